-- The run event log rebuilt as a WITHOUT ROWID table: its primary key (workflow_run_id, sequence) is the table itself,
-- one b-tree instead of a rowid table plus a key index, so an append writes one page fewer. Drizzle has no word for
-- WITHOUT ROWID; columns and indexes are as in schema.ts. Two conditions every append evaluates get cheaper: the step
-- key moves to a column of its own (filled here from the payload, where it stays), and the type index's condition
-- becomes a chain of equalities instead of an IN list (TYPE_INDEX_CONDITION).
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_workflow_events` (
	`id` text NOT NULL,
	`workflow_run_id` text NOT NULL,
	`type` text NOT NULL,
	`payload` text NOT NULL,
	`timestamp` integer NOT NULL,
	`sequence` integer NOT NULL,
	`step_key` text,
	PRIMARY KEY(`workflow_run_id`, `sequence`),
	FOREIGN KEY (`workflow_run_id`) REFERENCES `workflow_runs`(`id`) ON UPDATE no action ON DELETE cascade
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `__new_workflow_events`("id", "workflow_run_id", "type", "payload", "timestamp", "sequence", "step_key") SELECT "id", "workflow_run_id", "type", "payload", "timestamp", "sequence", json_extract("payload", '$.stepKey') FROM `workflow_events`;--> statement-breakpoint
DROP TABLE `workflow_events`;--> statement-breakpoint
ALTER TABLE `__new_workflow_events` RENAME TO `workflow_events`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `workflow_events_run_step_key_idx` ON `workflow_events` (`workflow_run_id`,`step_key`,`sequence`) WHERE "step_key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX `workflow_events_run_type_idx` ON `workflow_events` (`workflow_run_id`,`type`) WHERE ("type" = 'STAGE_STARTED' OR "type" = 'STAGE_COMPLETED' OR "type" = 'PLAN_CREATED' OR "type" = 'PLAN_EDITED' OR "type" = 'PLAN_ESTIMATED' OR "type" = 'APPROVAL_REQUESTED' OR "type" = 'APPROVAL_GRANTED' OR "type" = 'APPROVAL_REJECTED' OR "type" = 'PLAN_QUESTION_ASKED' OR "type" = 'FIX_DECISION_MADE' OR "type" = 'CLARIFICATION_REQUESTED' OR "type" = 'CLARIFICATION_ANSWERED' OR "type" = 'CLARIFICATION_IGNORED' OR "type" = 'DECISION_REMINDED' OR "type" = 'DECISION_TIMED_OUT' OR "type" = 'DECISION_ESCALATED' OR "type" = 'RUN_PAUSED' OR "type" = 'RUN_RESUMED' OR "type" = 'RUN_COMPLETED' OR "type" = 'RUN_FAILED' OR "type" = 'RUN_CANCELLED' OR "type" = 'MERGE_DECIDED' OR "type" = 'MERGE_FAILED' OR "type" = 'PR_MERGED' OR "type" = 'RUN_CLEANED_UP');--> statement-breakpoint
-- In a WITHOUT ROWID table a secondary index costs a key lookup per row, so without statistics SQLite would rather walk
-- a run's whole log by its key than use the partial type and step-key indexes. These rows tell it the shape of a log
-- (about 1,000 events a run, about 10 of one indexed type, about 2 per step key); a later ANALYZE replaces them with
-- the database's own figures, which have the same shape.
ANALYZE sqlite_schema;--> statement-breakpoint
DELETE FROM sqlite_stat1 WHERE tbl = 'workflow_events';--> statement-breakpoint
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
	('workflow_events', 'sqlite_autoindex_workflow_events_1', '1000000 1000 1'),
	('workflow_events', 'workflow_events_run_type_idx', '100000 100 10'),
	('workflow_events', 'workflow_events_run_step_key_idx', '400000 400 2 1');--> statement-breakpoint
-- Analysing anything reloads every statistic into this connection (the one that ran the migration goes on serving).
ANALYZE sqlite_schema;
