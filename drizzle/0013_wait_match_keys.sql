DROP INDEX `executor_pending_event_idx`;--> statement-breakpoint
ALTER TABLE `executor_pending` ADD `match_path` text;--> statement-breakpoint
ALTER TABLE `executor_pending` ADD `match_value` text;--> statement-breakpoint
CREATE INDEX `executor_pending_wait_idx` ON `executor_pending` (`event_name`,`match_path`,`match_value`) WHERE "kind" = 'wait';