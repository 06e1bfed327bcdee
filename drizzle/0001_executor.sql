CREATE TABLE `executor_apps` (
	`url` text PRIMARY KEY NOT NULL,
	`app_id` text,
	`functions` text DEFAULT '[]' NOT NULL,
	`synced_at` integer,
	`last_error` text
);
--> statement-breakpoint
CREATE TABLE `executor_events` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`id` text NOT NULL,
	`name` text NOT NULL,
	`payload` text NOT NULL,
	`received_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `executor_events_id_idx` ON `executor_events` (`id`);--> statement-breakpoint
CREATE INDEX `executor_events_name_seq_idx` ON `executor_events` (`name`,`seq`);--> statement-breakpoint
CREATE INDEX `executor_events_received_idx` ON `executor_events` (`received_at`);--> statement-breakpoint
CREATE TABLE `executor_pending` (
	`run_id` text NOT NULL,
	`hashed_id` text NOT NULL,
	`kind` text NOT NULL,
	`op` text NOT NULL,
	`attempt` integer DEFAULT 0 NOT NULL,
	`due_at` integer,
	`event_name` text,
	`expression` text,
	`race` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`run_id`, `hashed_id`)
);
--> statement-breakpoint
CREATE INDEX `executor_pending_event_idx` ON `executor_pending` (`event_name`);--> statement-breakpoint
CREATE TABLE `executor_runs` (
	`id` text PRIMARY KEY NOT NULL,
	`fn_id` text NOT NULL,
	`app_url` text NOT NULL,
	`event` text NOT NULL,
	`events` text NOT NULL,
	`status` text NOT NULL,
	`output` text,
	`error` text,
	`attempt` integer DEFAULT 0 NOT NULL,
	`next_at` integer DEFAULT 0 NOT NULL,
	`lease_owner` text,
	`lease_until` integer DEFAULT 0 NOT NULL,
	`watermark` integer DEFAULT 0 NOT NULL,
	`parallel` integer DEFAULT 0 NOT NULL,
	`concurrency_key` text,
	`idempotency_key` text,
	`parent_run_id` text,
	`parent_step` text,
	`created_at` integer NOT NULL,
	`ended_at` integer
);
--> statement-breakpoint
CREATE INDEX `executor_runs_status_next_idx` ON `executor_runs` (`status`,`next_at`);--> statement-breakpoint
CREATE INDEX `executor_runs_fn_ckey_idx` ON `executor_runs` (`fn_id`,`concurrency_key`,`lease_until`);--> statement-breakpoint
CREATE INDEX `executor_runs_fn_idem_idx` ON `executor_runs` (`fn_id`,`idempotency_key`);--> statement-breakpoint
CREATE TABLE `executor_steps` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`run_id` text NOT NULL,
	`hashed_id` text NOT NULL,
	`result` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `executor_steps_run_step_idx` ON `executor_steps` (`run_id`,`hashed_id`);