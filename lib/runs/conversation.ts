import { sql } from "drizzle-orm";
import type { ModelMessage } from "ai";
import { getDb, write } from "@/lib/db";
import { implementerChunks } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import type { ImplementerState } from "@/lib/agents";

/*
 * The implementer's conversation, kept out of the durable steps' results. Every turn is a step, and a step's result
 * is stored by the executor (Inngest Cloud: 4 MB per step, 32 MB per run): with the whole conversation in each result
 * the stored state grew with the square of the number of turns. Instead each turn stores the messages it added as one
 * chunk (implementer_chunks) linked to the chunk before it, and its result carries only the newest chunk's id (the
 * state's `history`) plus the messages added since (a nudge, an answer, a person's decision on a held action).
 *
 * Crash-safe: a chunk's id is new for every execution of a step, and nothing is ever updated. A turn that runs again
 * after a crash starts from its memoized input (the previous turn's `history`), writes a fresh chunk, and the chunk
 * its lost execution wrote stays unreferenced: the conversation a result points at never contains a message twice.
 */

/** The state with its whole conversation, for implementerTurn. */
export async function loadConversation(state: ImplementerState): Promise<ImplementerState> {
  if (!state.history) return state;
  const db = await getDb();
  const rows = await db.all<{ messages: string }>(sql`
    WITH RECURSIVE chain(id, prev, messages, depth) AS (
      SELECT id, prev_id, messages, 0 FROM ${implementerChunks} WHERE id = ${state.history}
      UNION ALL
      SELECT c.id, c.prev_id, c.messages, chain.depth + 1 FROM ${implementerChunks} c JOIN chain ON c.id = chain.prev
    )
    SELECT messages FROM chain ORDER BY depth DESC`);
  if (rows.length === 0) throw new Error(`The implementer's conversation ${state.history} is missing from the database.`);
  const stored = rows.flatMap((row) => JSON.parse(row.messages) as ModelMessage[]);
  return { ...state, messages: [...stored, ...state.messages] };
}

/**
 * Store what a turn added to the conversation and return the state a step may keep: `loaded` is what the turn was
 * given (loadConversation of `base`), `next` what it returned (the same messages, with any new ones appended).
 */
export async function storeConversation({
  runId,
  base,
  loaded,
  next,
}: {
  runId: string;
  base: ImplementerState;
  loaded: ImplementerState;
  next: ImplementerState;
}): Promise<ImplementerState> {
  const storedCount = loaded.messages.length - base.messages.length;
  const added = next.messages.slice(storedCount);
  if (added.length === 0) return { ...next, messages: [], history: base.history ?? null };
  const id = newId("chk");
  await write((tx) => tx.insert(implementerChunks).values({ id, workflowRunId: runId, prevId: base.history ?? null, messages: added }));
  return { ...next, messages: [], history: id };
}
