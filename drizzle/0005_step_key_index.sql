CREATE INDEX `workflow_events_run_step_key_idx` ON `workflow_events` (`workflow_run_id`, json_extract(`payload`, '$.stepKey'));
