PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_workflow_events` (
	`id` text NOT NULL,
	`workflow_run_id` text NOT NULL,
	`type` text NOT NULL,
	`payload` text NOT NULL,
	`timestamp` integer NOT NULL,
	`sequence` integer NOT NULL,
	PRIMARY KEY(`workflow_run_id`, `sequence`),
	FOREIGN KEY (`workflow_run_id`) REFERENCES `workflow_runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_workflow_events`("id", "workflow_run_id", "type", "payload", "timestamp", "sequence") SELECT "id", "workflow_run_id", "type", "payload", "timestamp", "sequence" FROM `workflow_events`;--> statement-breakpoint
DROP TABLE `workflow_events`;--> statement-breakpoint
ALTER TABLE `__new_workflow_events` RENAME TO `workflow_events`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `workflow_events_run_step_key_idx` ON `workflow_events` (`workflow_run_id`, json_extract(`payload`, '$.stepKey'), `sequence`) WHERE json_extract("payload", '$.stepKey') IS NOT NULL;--> statement-breakpoint
CREATE INDEX `workflow_events_run_type_idx` ON `workflow_events` (`workflow_run_id`,`type`) WHERE "type" IN ('STAGE_STARTED', 'STAGE_COMPLETED', 'PLAN_CREATED', 'PLAN_EDITED', 'PLAN_ESTIMATED', 'APPROVAL_REQUESTED', 'APPROVAL_GRANTED', 'APPROVAL_REJECTED', 'PLAN_QUESTION_ASKED', 'FIX_DECISION_MADE', 'CLARIFICATION_REQUESTED', 'CLARIFICATION_ANSWERED', 'CLARIFICATION_IGNORED', 'DECISION_REMINDED', 'DECISION_TIMED_OUT', 'DECISION_ESCALATED', 'RUN_PAUSED', 'RUN_RESUMED', 'RUN_COMPLETED', 'RUN_FAILED', 'RUN_CANCELLED', 'MERGE_DECIDED', 'MERGE_FAILED', 'PR_MERGED', 'RUN_CLEANED_UP');