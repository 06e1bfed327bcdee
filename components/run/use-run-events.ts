"use client";

import { useEffect, useRef, useState } from "react";
import { mergeEvents, type ApiEvent } from "@/lib/dashboard/timeline";

export type Connection = "connecting" | "live" | "polling" | "ended";

const POLL_MS = 2_000;
/** While polling, try the stream again after this long. */
const RECONNECT_MS = 15_000;

/**
 * Follow one run's event log: SSE first (resuming after `after`, the last sequence already known), and polling
 * /events?after= as soon as the stream drops, until the stream can be opened again. Stops when the server says the run
 * is terminal. Returns the function that stops following.
 */
export function followRunEvents({
  runId,
  after = 0,
  onEvents,
  onConnection,
  onError,
}: {
  runId: string;
  after?: number;
  onEvents: (events: ApiEvent[]) => void;
  onConnection: (connection: Connection) => void;
  onError: (error: string | null) => void;
}): () => void {
  let disposed = false;
  let last = after;
  let source: EventSource | null = null;
  let pollTimer: ReturnType<typeof setTimeout> | null = null;
  let pollingSince = 0;

  const add = (incoming: ApiEvent[]) => {
    if (!incoming.length || disposed) return;
    last = Math.max(last, ...incoming.map((e) => e.sequence));
    onEvents(incoming);
  };

  const stopPolling = () => {
    if (pollTimer) clearTimeout(pollTimer);
    pollTimer = null;
  };

  const openStream = () => {
    if (disposed) return;
    const es = new EventSource(`/api/runs/${runId}/stream?after=${last}`);
    source = es;
    es.addEventListener("open", () => {
      stopPolling();
      onConnection("live");
      onError(null);
    });
    es.addEventListener("run-event", (message) => {
      add([JSON.parse((message as MessageEvent<string>).data) as ApiEvent]);
    });
    es.addEventListener("end", () => {
      es.close();
      stopPolling();
      onConnection("ended");
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
      const response = await fetch(`/api/runs/${runId}/events?after=${last}&limit=500`, { cache: "no-store" });
      const body = await response.json();
      if (!response.ok) throw new Error(body?.error?.message ?? `Could not load events (${response.status}).`);
      add(body.events as ApiEvent[]);
      if (!disposed) onError(null);
    } catch (e) {
      if (!disposed) onError(`${e instanceof Error ? e.message : String(e)} Retrying…`);
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
    onConnection("polling");
    pollingSince = Date.now();
    pollTimer = setTimeout(poll, 0);
  };

  openStream();
  return () => {
    disposed = true;
    source?.close();
    stopPolling();
  };
}

/**
 * A run's event log, live. `initial` is the log as the page's first snapshot had it (server-rendered with the run):
 * shown at once, and the stream resumes after its last event, so the first render and the projection agree.
 */
export function useRunEvents(runId: string, initial?: ApiEvent[]): { events: ApiEvent[]; connection: Connection; error: string | null } {
  const [events, setEvents] = useState<ApiEvent[]>(() => initial ?? []);
  const [connection, setConnection] = useState<Connection>("connecting");
  const [error, setError] = useState<string | null>(null);
  const after = useRef(initial?.at(-1)?.sequence ?? 0);

  useEffect(
    () =>
      followRunEvents({
        runId,
        after: after.current,
        onEvents: (incoming) => setEvents((known) => mergeEvents(known, incoming)),
        onConnection: setConnection,
        onError: setError,
      }),
    [runId],
  );

  return { events, connection, error };
}

/**
 * Several runs' event logs, live (the comparison view): one stream per run, each falling back to polling on its own.
 * Keyed by run id; a run whose first events have not arrived yet is absent.
 */
export function useRunsEvents(runIds: string[]): Record<string, ApiEvent[]> {
  const [byRun, setByRun] = useState<Record<string, ApiEvent[]>>({});
  const key = runIds.join(",");

  useEffect(() => {
    const stops = key
      .split(",")
      .filter(Boolean)
      .map((runId) =>
        followRunEvents({
          runId,
          onEvents: (incoming) => setByRun((known) => ({ ...known, [runId]: mergeEvents(known[runId] ?? [], incoming) })),
          onConnection: () => {},
          onError: () => {},
        }),
      );
    return () => stops.forEach((stop) => stop());
  }, [key]);

  return byRun;
}
