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
