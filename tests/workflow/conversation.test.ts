import type { ModelMessage } from "ai";
import { describe, expect, it } from "vitest";
import { count, eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { implementerChunks } from "@/lib/db/schema";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { startRun } from "@/lib/runs/service";
import { loadConversation, storeConversation } from "@/lib/runs/conversation";
import type { ImplementerState } from "@/lib/agents";
import type { SessionUser } from "@/lib/auth/guard";
import { newProject } from "./harness";

/** The implementer's conversation outside the steps' results (lib/runs/conversation.ts): by reference, crash-safe. */

const say = (text: string): ModelMessage => ({ role: "assistant", content: text });
const texts = (state: ImplementerState) => state.messages.map((m) => m.content);

async function aRun() {
  const owner = await ensureLocalOwner();
  const user: SessionUser = { id: owner.id, name: owner.name, via: "admin-token" };
  const { project } = await newProject(user);
  return startRun({ user, projectId: project.id, request: "conversation", config: {} });
}

/** One turn as implementTurn runs it: load, add messages, store. */
async function turn(runId: string, base: ImplementerState, ...added: ModelMessage[]) {
  const loaded = await loadConversation(base);
  return storeConversation({ runId, base, loaded, next: { ...loaded, messages: [...loaded.messages, ...added] } });
}

describe("the implementer's conversation, stored by reference", () => {
  it("a turn that runs again after a crash writes a fresh chunk: the conversation has no message twice and none of the lost run", async () => {
    const run = await aRun();
    const base = { messages: [{ role: "user", content: "plan" }], todos: [] } as unknown as ImplementerState;
    // The first execution of the turn stores its chunk, then "crashes" before its result is memoized.
    const lost = await turn(run.id, base, say("lost"));
    // The step runs again from the same memoized input.
    const kept = await turn(run.id, base, say("again"), say("tool"));
    expect(kept.history).not.toBe(lost.history);
    expect(kept.messages).toEqual([]);
    expect(texts(await loadConversation(kept))).toEqual(["plan", "again", "tool"]);

    // Between steps the workflow appends to the small tail (an answer); the next turn stores it with its own messages.
    const answered = { ...kept, messages: [{ role: "user", content: "answer" }] } as ImplementerState;
    const next = await turn(run.id, answered, say("next"));
    expect(texts(await loadConversation(next))).toEqual(["plan", "again", "tool", "answer", "next"]);

    // A turn that adds nothing (a finished state returned as is) stores nothing and keeps the reference.
    const db = await getDb();
    const chunks = async () => (await db.select({ n: count() }).from(implementerChunks).where(eq(implementerChunks.workflowRunId, run.id)))[0]!.n;
    const before = await chunks();
    const same = await turn(run.id, next);
    expect(same.history).toBe(next.history);
    expect(await chunks()).toBe(before);
  });

  it("a state stored before conversations moved out (whole conversation, no reference) loads as is and is stored whole", async () => {
    const run = await aRun();
    const legacy = { messages: [{ role: "user", content: "plan" }, say("one")], todos: [] } as unknown as ImplementerState;
    expect(await loadConversation(legacy)).toBe(legacy);
    const stored = await turn(run.id, legacy, say("two"));
    expect(stored.messages).toEqual([]);
    expect(texts(await loadConversation(stored))).toEqual(["plan", "one", "two"]);
  });
});
