import type { InboxFilter, InboxItem } from "@/lib/runs/inbox";
import { runKeys } from "@/components/runs/api";

export type InboxPage = { items: InboxItem[]; open: number; unread: number; truncated: boolean };

/** Under runKeys.inbox, so a decision made anywhere in the dashboard refreshes the inbox too. */
export const inboxKeys = {
  lists: [...runKeys.inbox, "list"] as const,
  list: (filter: InboxFilter) => [...runKeys.inbox, "list", filter] as const,
};

export const INBOX_FILTER_LABELS: Record<InboxFilter, string> = { open: "Open", unread: "Unread", done: "Done", all: "All" };
