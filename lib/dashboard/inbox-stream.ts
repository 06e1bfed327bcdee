import { defaultSleep, sseMessage } from "./sse";

/*
 * The inbox as server-sent events: one `inbox` message with the whole snapshot at once, then another each time it
 * changes (a gate or question opens, is decided, or is marked by this person). Each message is a full snapshot, so a
 * reconnecting browser needs no Last-Event-ID: its first message is the truth. The database is polled, so a gate
 * opened by any process (the embedded executor, a worker, Inngest Cloud's calls) is seen.
 */

export type InboxSnapshotSource<S> = {
  snapshot(): Promise<S>;
  /** Two snapshots with the same fingerprint are the same to the reader; only a change is sent. */
  fingerprint(snapshot: S): string;
};

export function inboxEventStream<S>({
  source,
  signal,
  intervalMs = 1_000,
  heartbeatMs = 15_000,
  maxDurationMs = 5 * 60_000,
  sleep = defaultSleep,
  now = Date.now,
}: {
  source: InboxSnapshotSource<S>;
  signal?: AbortSignal;
  intervalMs?: number;
  heartbeatMs?: number;
  maxDurationMs?: number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  now?: () => number;
}): ReadableStream<Uint8Array> {
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
      let last: string | null = null;
      let version = 0;
      send("retry: 1000\n\n");
      try {
        while (!closed && !signal?.aborted) {
          const snapshot = await source.snapshot();
          const fingerprint = source.fingerprint(snapshot);
          if (fingerprint !== last) {
            version += 1;
            send(sseMessage({ id: version, event: "inbox", data: snapshot }));
            last = fingerprint;
            lastWrite = now();
          }
          // Serverless hosts cap a response's lifetime: end, and the browser reconnects (to a fresh snapshot).
          if (now() - started >= maxDurationMs) break;
          if (now() - lastWrite >= heartbeatMs) {
            send(": keep-alive\n\n");
            lastWrite = now();
          }
          await sleep(intervalMs, signal);
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
