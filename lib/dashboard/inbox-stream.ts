import { pollingStream, sseMessage, type PollingStreamOptions } from "./sse";

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
  intervalMs = 1_000,
  ...options
}: PollingStreamOptions & { source: InboxSnapshotSource<S> }): ReadableStream<Uint8Array> {
  let last: string | null = null;
  let version = 0;
  return pollingStream({
    ...options,
    intervalMs,
    poll: async (send) => {
      const snapshot = await source.snapshot();
      const fingerprint = source.fingerprint(snapshot);
      if (fingerprint === last) return { wrote: false, next: "wait" };
      version += 1;
      send(sseMessage({ id: version, event: "inbox", data: snapshot }));
      last = fingerprint;
      return { wrote: true, next: "wait" };
    },
  });
}
