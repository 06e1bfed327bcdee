import { listEvents } from "@/lib/db/event-store";

/** What the parallel-task tests read of a stored run event. */
export type RunEvent = { type: string; payload: unknown; sequence: number };

/** The task an event is about, if any. */
export const taskOf = (e: RunEvent) => (e.payload as { taskId?: string }).taskId;

/** The sequence of the first event of `type` (about `taskId`, when given), or -1 if there is none. */
export const seqOf = (events: RunEvent[], type: string, taskId?: string) =>
  events.find((e) => e.type === type && (taskId === undefined || taskOf(e) === taskId))?.sequence ?? -1;

/** The run's events so far (the first thousand, more than any of these scenarios writes). */
export const eventsOf = async (runId: string) => (await listEvents({ runId, limit: 1000 })) as RunEvent[];

/**
 * A `[run: …]` command that waits until the test creates `ref` in the repository (at most `seconds`), then writes whether
 * it was released or gave up into `file`. `nap`: the seconds of each sleep between looks; a number no other command
 * uses lets the test see the command running.
 */
export const heldUntilRef = (ref: string, file: string, seconds = 30, nap = "0.1") =>
  `n=0; until git rev-parse -q --verify ${ref} >/dev/null || test $n -ge ${seconds * 10}; do sleep ${nap}; n=$((n+1)); done; if git rev-parse -q --verify ${ref} >/dev/null; then echo released; else echo gave-up; fi >> ${file}`;
