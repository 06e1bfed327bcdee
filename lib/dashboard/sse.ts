/**
 * Server-sent events for a run's event log: each stored event is one SSE message whose `id:` is its sequence, so a
 * browser that reconnects sends Last-Event-ID and resumes exactly after the last event it saw.
 */

export type StreamedEvent = { sequence: number; type: string; payload: unknown; timestamp: string };

export function sseMessage({ id, event, data }: { id?: number | string; event?: string; data: unknown }): string {
  const lines: string[] = [];
  if (id !== undefined) lines.push(`id: ${id}`);
  if (event) lines.push(`event: ${event}`);
  // JSON never contains a raw newline, so one data line suffices.
  lines.push(`data: ${JSON.stringify(data)}`);
  return `${lines.join("\n")}\n\n`;
}

/** Where to resume: the Last-Event-ID header (a reconnect) wins over ?after= (the first connection). */
export function resumeAfter(request: Request): number {
  const candidates = [request.headers.get("last-event-id"), new URL(request.url).searchParams.get("after")];
  for (const value of candidates) {
    if (value === null || value.trim() === "") continue;
    const n = Number(value);
    if (Number.isInteger(n) && n >= 0) return n;
  }
  return 0;
}

export type RunStreamSource = {
  /** Events with sequence > after, oldest first. */
  events(after: number): Promise<StreamedEvent[]>;
  /** The run's status and last sequence now. */
  state(): Promise<{ status: string; lastSequence: number } | null>;
};

const TERMINAL = new Set(["completed", "failed", "cancelled"]);

/** The response for an SSE stream: no caching or proxy buffering, so each message reaches the browser at once. */
export function sseResponse(stream: ReadableStream<Uint8Array>): Response {
  return new Response(stream, {
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    },
  });
}

/** What a stream's poll says: whether it sent anything, and whether to wait, poll again at once, or end. */
export type PollOutcome = { wrote: boolean; next: "wait" | "again" | "end" };

export type PollingStreamOptions = {
  signal?: AbortSignal;
  intervalMs?: number;
  heartbeatMs?: number;
  maxDurationMs?: number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  now?: () => number;
};

/**
 * The loop every polled SSE stream shares: `poll` sends what is new; between polls a heartbeat keeps proxies from
 * closing an idle connection, and after `maxDurationMs` the response ends (serverless hosts cap a response's lifetime;
 * the browser reconnects). A failing poll becomes an `error` message, never a torn connection.
 */
export function pollingStream({
  poll,
  signal,
  intervalMs = 500,
  heartbeatMs = 15_000,
  maxDurationMs = 5 * 60_000,
  sleep = defaultSleep,
  now = Date.now,
}: PollingStreamOptions & { poll: (send: (chunk: string) => void) => Promise<PollOutcome> }): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let closed = false;
  return new ReadableStream<Uint8Array>({
    async start(controller) {
      const send = (chunk: string) => {
        if (!closed) controller.enqueue(encoder.encode(chunk));
      };
      const close = () => {
        if (closed) return;
        closed = true;
        controller.close();
      };
      signal?.addEventListener("abort", close, { once: true });
      const started = now();
      let lastWrite = started;
      // Tell EventSource how soon to reconnect when the connection drops.
      send("retry: 1000\n\n");
      try {
        while (!closed && !signal?.aborted) {
          const { wrote, next } = await poll(send);
          if (wrote) lastWrite = now();
          if (next === "end") break;
          if (now() - started >= maxDurationMs) break;
          if (now() - lastWrite >= heartbeatMs) {
            send(": keep-alive\n\n");
            lastWrite = now();
          }
          if (next === "wait") await sleep(intervalMs, signal);
        }
      } catch (error) {
        send(sseMessage({ event: "error", data: { message: error instanceof Error ? error.message : "stream failed" } }));
      }
      close();
    },
    cancel() {
      closed = true;
    },
  });
}

/**
 * Poll the source and stream new events until the run is terminal and every event has been sent (then an `end`
 * message), the client goes away, or `maxDurationMs` passes (the browser reconnects and resumes by Last-Event-ID).
 */
export function runEventStream({
  source,
  after,
  ...options
}: PollingStreamOptions & { source: RunStreamSource; after: number }): ReadableStream<Uint8Array> {
  let cursor = after;
  return pollingStream({
    ...options,
    poll: async (send) => {
      const batch = await source.events(cursor);
      for (const event of batch) {
        send(sseMessage({ id: event.sequence, event: "run-event", data: event }));
        cursor = event.sequence;
      }
      const wrote = batch.length > 0;
      const state = await source.state();
      if (!state) {
        send(sseMessage({ event: "end", data: { reason: "not_found" } }));
        return { wrote, next: "end" };
      }
      if (TERMINAL.has(state.status) && cursor >= state.lastSequence) {
        send(sseMessage({ event: "end", data: { status: state.status, lastSequence: cursor } }));
        return { wrote, next: "end" };
      }
      // A full page means more are waiting: fetch again at once.
      return { wrote, next: wrote ? "again" : "wait" };
    },
  });
}

/** Sleep, cut short when the signal aborts (the client went away). */
export function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    // Remove the abort listener once the timer fires, or a long-lived stream piles up listeners on its signal.
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
