PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_executor_steps` (
	`seq` integer PRIMARY KEY NOT NULL,
	`run_id` text NOT NULL,
	`hashed_id` text NOT NULL,
	`result` text NOT NULL,
	`event_seq` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_executor_steps`("seq", "run_id", "hashed_id", "result", "event_seq", "created_at") SELECT "seq", "run_id", "hashed_id", "result", "event_seq", "created_at" FROM `executor_steps`;--> statement-breakpoint
DROP TABLE `executor_steps`;--> statement-breakpoint
ALTER TABLE `__new_executor_steps` RENAME TO `executor_steps`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `executor_steps_run_step_idx` ON `executor_steps` (`run_id`,`hashed_id`);