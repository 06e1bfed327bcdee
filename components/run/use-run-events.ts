"use client";

import { useEffect, useRef, useState } from "react";
import { mergeEvents, type ApiEvent } from "@/lib/dashboard/timeline";

export type Connection = "connecting" | "live" | "polling" | "ended";

const POLL_MS = 2_000;
/** While polling, try the stream again after this long. */
const RECONNECT_MS = 15_000;

/**
 * A run's event log, live: SSE first (resuming after the last sequence seen), and polling /events?after= as soon as
 * the stream drops, until the stream can be opened again. Stops when the server says the run is terminal.
 */
export function useRunEvents(runId: string): { events: ApiEvent[]; connection: Connection; error: string | null } {
  const [events, setEvents] = useState<ApiEvent[]>([]);
  const [connection, setConnection] = useState<Connection>("connecting");
  const [error, setError] = useState<string | null>(null);
  const last = useRef(0);

  useEffect(() => {
    let disposed = false;
    let source: EventSource | null = null;
    let pollTimer: ReturnType<typeof setTimeout> | null = null;
    let pollingSince = 0;

    const add = (incoming: ApiEvent[]) => {
      if (!incoming.length) return;
      last.current = Math.max(last.current, ...incoming.map((e) => e.sequence));
      setEvents((known) => mergeEvents(known, incoming));
    };

    const stopPolling = () => {
      if (pollTimer) clearTimeout(pollTimer);
      pollTimer = null;
    };

    const openStream = () => {
      if (disposed) return;
      const es = new EventSource(`/api/runs/${runId}/stream?after=${last.current}`);
      source = es;
      es.addEventListener("open", () => {
        stopPolling();
        setConnection("live");
        setError(null);
      });
      es.addEventListener("run-event", (message) => {
        add([JSON.parse((message as MessageEvent<string>).data) as ApiEvent]);
      });
      es.addEventListener("end", () => {
        es.close();
        stopPolling();
        setConnection("ended");
      });
      es.addEventListener("error", () => {
        es.close();
        if (source === es) source = null;
        startPolling();
      });
    };

    const poll = async () => {
      if (disposed) return;
      try {
        const response = await fetch(`/api/runs/${runId}/events?after=${last.current}&limit=500`, { cache: "no-store" });
        const body = await response.json();
        if (!response.ok) throw new Error(body?.error?.message ?? `Could not load events (${response.status}).`);
        add(body.events as ApiEvent[]);
        setError(null);
      } catch (e) {
        setError(`${e instanceof Error ? e.message : String(e)} Retrying…`);
      }
      if (disposed || pollTimer === null) return;
      if (Date.now() - pollingSince >= RECONNECT_MS) {
        pollingSince = Date.now();
        openStream();
      }
      pollTimer = setTimeout(poll, POLL_MS);
    };

    const startPolling = () => {
      if (disposed || pollTimer) return;
      setConnection("polling");
      pollingSince = Date.now();
      pollTimer = setTimeout(poll, 0);
    };

    openStream();
    return () => {
      disposed = true;
      source?.close();
      stopPolling();
    };
  }, [runId]);

  return { events, connection, error };
}
