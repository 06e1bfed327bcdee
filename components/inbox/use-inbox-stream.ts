"use client";

import { useEffect, useState } from "react";
import { useQueryClient } from "@tanstack/react-query";
import type { InboxItem } from "@/lib/runs/inbox";
import { inboxKeys } from "./api";

export type InboxSnapshot = { items: InboxItem[]; open: number; unread: number; truncated: boolean };

const REOPEN_MS = 5_000;

/**
 * The caller's open inbox, live from GET /api/inbox/stream: each message is the whole snapshot, sent when a gate or
 * question opens, is decided, or is marked. Every inbox list on the page is refreshed along with it. EventSource
 * reconnects by itself when the server ends a long response; a refused connection (signed out) is retried slowly.
 */
export function useInboxStream(): InboxSnapshot | null {
  const queryClient = useQueryClient();
  const [snapshot, setSnapshot] = useState<InboxSnapshot | null>(null);
  useEffect(() => {
    let disposed = false;
    let source: EventSource | null = null;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const open = () => {
      if (disposed) return;
      const es = new EventSource("/api/inbox/stream");
      source = es;
      es.addEventListener("inbox", (message) => {
        setSnapshot(JSON.parse((message as MessageEvent<string>).data) as InboxSnapshot);
        void queryClient.invalidateQueries({ queryKey: inboxKeys.lists });
      });
      es.addEventListener("error", () => {
        if (es.readyState !== EventSource.CLOSED) return;
        timer = setTimeout(open, REOPEN_MS);
      });
    };
    open();
    return () => {
      disposed = true;
      if (timer) clearTimeout(timer);
      source?.close();
    };
  }, [queryClient]);
  return snapshot;
}
