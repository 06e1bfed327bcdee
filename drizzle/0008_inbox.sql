CREATE TABLE `inbox_item_states` (
	`user_id` text NOT NULL,
	`item_id` text NOT NULL,
	`read_at` integer,
	`done_at` integer,
	`updated_at` integer DEFAULT (cast(unixepoch('subsecond') * 1000 as integer)) NOT NULL,
	PRIMARY KEY(`user_id`, `item_id`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
