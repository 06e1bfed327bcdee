CREATE TABLE `executor_flow` (
	`fn_id` text NOT NULL,
	`kind` text NOT NULL,
	`key` text NOT NULL,
	`at` integer NOT NULL,
	PRIMARY KEY(`fn_id`, `kind`, `key`)
);
--> statement-breakpoint
ALTER TABLE `executor_runs` ADD `concurrency_key2` text;--> statement-breakpoint
ALTER TABLE `executor_runs` ADD `gather_key` text;--> statement-breakpoint
ALTER TABLE `executor_runs` ADD `priority` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `executor_runs` ADD `singleton_key` text;--> statement-breakpoint
ALTER TABLE `executor_runs` ADD `timeout_at` integer;--> statement-breakpoint
CREATE INDEX `executor_runs_ckey_idx` ON `executor_runs` (`concurrency_key`,`lease_until`);--> statement-breakpoint
CREATE INDEX `executor_runs_ckey2_idx` ON `executor_runs` (`concurrency_key2`,`lease_until`);--> statement-breakpoint
CREATE INDEX `executor_runs_fn_gather_idx` ON `executor_runs` (`fn_id`,`gather_key`);--> statement-breakpoint
CREATE INDEX `executor_runs_fn_singleton_idx` ON `executor_runs` (`fn_id`,`singleton_key`);--> statement-breakpoint
CREATE INDEX `executor_runs_timeout_idx` ON `executor_runs` (`timeout_at`);