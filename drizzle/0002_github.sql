CREATE TABLE `github_deliveries` (
	`id` text PRIMARY KEY NOT NULL,
	`event` text NOT NULL,
	`action` text,
	`payload` text NOT NULL,
	`outcome` text,
	`created_at` integer DEFAULT (cast(unixepoch('subsecond') * 1000 as integer)) NOT NULL,
	`processed_at` integer
);
--> statement-breakpoint
CREATE INDEX `github_deliveries_received_idx` ON `github_deliveries` (`created_at`);--> statement-breakpoint
CREATE TABLE `github_repositories` (
	`id` integer PRIMARY KEY NOT NULL,
	`installation_id` integer NOT NULL,
	`owner` text NOT NULL,
	`name` text NOT NULL,
	`full_name` text NOT NULL,
	`private` integer DEFAULT false NOT NULL,
	`updated_at` integer DEFAULT (cast(unixepoch('subsecond') * 1000 as integer)) NOT NULL
);
--> statement-breakpoint
CREATE INDEX `github_repositories_installation_idx` ON `github_repositories` (`installation_id`);--> statement-breakpoint
CREATE INDEX `github_repositories_full_name_idx` ON `github_repositories` (`full_name`);