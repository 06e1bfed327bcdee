CREATE TABLE `project_invitations` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`email` text NOT NULL,
	`role` text NOT NULL,
	`status` text DEFAULT 'pending' NOT NULL,
	`invited_by` text NOT NULL,
	`created_at` integer DEFAULT (cast(unixepoch('subsecond') * 1000 as integer)) NOT NULL,
	`decided_at` integer,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`invited_by`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `project_invitations_pending_uq` ON `project_invitations` (`project_id`,`email`) WHERE "project_invitations"."status" = 'pending';--> statement-breakpoint
CREATE INDEX `project_invitations_email_idx` ON `project_invitations` (`email`);--> statement-breakpoint
ALTER TABLE `projects` ADD `repository_key` text;--> statement-breakpoint
CREATE UNIQUE INDEX `projects_repository_key_uq` ON `projects` (`repository_key`);