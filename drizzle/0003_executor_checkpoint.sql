ALTER TABLE `executor_runs` ADD `generation` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `executor_runs` ADD `state_bytes` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `executor_steps` ADD `event_seq` integer DEFAULT 0 NOT NULL;