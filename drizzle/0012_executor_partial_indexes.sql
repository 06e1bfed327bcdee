DROP INDEX `executor_runs_fn_ckey_idx`;--> statement-breakpoint
DROP INDEX `executor_runs_ckey_idx`;--> statement-breakpoint
DROP INDEX `executor_runs_ckey2_idx`;--> statement-breakpoint
DROP INDEX `executor_runs_fn_gather_idx`;--> statement-breakpoint
DROP INDEX `executor_runs_fn_singleton_idx`;--> statement-breakpoint
DROP INDEX `executor_runs_timeout_idx`;--> statement-breakpoint
CREATE INDEX `executor_runs_fn_unstarted_idx` ON `executor_runs` (`fn_id`,`concurrency_key`,`next_at`) WHERE "status" = 'queued' AND "generation" = 0;--> statement-breakpoint
CREATE INDEX `executor_runs_ckey_idx` ON `executor_runs` (`concurrency_key`,`lease_until`) WHERE "concurrency_key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX `executor_runs_ckey2_idx` ON `executor_runs` (`concurrency_key2`,`lease_until`) WHERE "concurrency_key2" IS NOT NULL;--> statement-breakpoint
CREATE INDEX `executor_runs_fn_gather_idx` ON `executor_runs` (`fn_id`,`gather_key`) WHERE "gather_key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX `executor_runs_fn_singleton_idx` ON `executor_runs` (`fn_id`,`singleton_key`) WHERE "singleton_key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX `executor_runs_timeout_idx` ON `executor_runs` (`timeout_at`) WHERE "timeout_at" IS NOT NULL;