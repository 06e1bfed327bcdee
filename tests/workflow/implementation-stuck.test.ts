import { describe, expect, it } from "vitest";
import { POST as fixRoute } from "@/app/api/runs/[id]/fix-decision/route";
import { POST as approveRoute } from "@/app/api/runs/[id]/approve/route";
import { listEvents } from "@/lib/db/event-store";
import { listInbox } from "@/lib/runs/inbox";
import { expectRunConsistent, git, launch, newProject, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { scriptedImplementer, useScriptedWorkflow } from "./model-server";
import { ADMIN, call } from "../api/helpers";

/*
 * #35 item 5, through the real workflow at the default limits (no limit raised): an implementer that loops is nudged,
 * then firmly reminded with its todo list, then stopped — IMPLEMENTATION_FAILED and a fix gate about the stopped
 * implementer, whatever trustMode.fixes says — where a person retries with a note, sends the run back to planning, or
 * cancels it.
 */

const t = useScriptedWorkflow();
const SCRIPTED = { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" };
/** trustMode.fixes stays at its default (auto): a stopped implementer still goes to a person. */
const CONFIG = { trustMode: { planning: "auto" }, modelRouting: SCRIPTED };
/** What a person tells the next session; the scripted implementer works properly once it reads it. */
const NOTE = "Write the note file first (note 7f3a).";

type Body = { messages?: Array<{ role: string; content?: unknown }> };
const text = (m: { content?: unknown }) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? ""));

/** Loops on one read (the same call, the same arguments) until a conversation carries the person's note. */
function loopUntilNoted(notePath: string, seen: Body[]) {
  const work = scriptedImplementer(notePath);
  return (body: Body) => {
    seen.push(body);
    if ((body.messages ?? []).some((m) => m.role === "user" && text(m).includes("note 7f3a"))) return work(body as Parameters<typeof work>[0]);
    return { toolCalls: [{ name: "read_file", arguments: { path: "README.md" } }] };
  };
}

async function decide(route: Parameters<typeof call>[0], runId: string, action: string, body: unknown) {
  const r = await call(route, { method: "POST", path: `/api/runs/${runId}/${action}`, params: { id: runId }, headers: ADMIN, body });
  return { status: r.status, body: r.json as { error?: { code: string; message: string } } };
}

/** Launch, and wait for the fix gate about the stopped implementer. */
async function untilStuck(request: string, seen: Body[]) {
  t.model.respond(loopUntilNoted(`docs/requests/${request.toLowerCase().replace(/[^a-z0-9]+/g, "-")}.md`, seen));
  const { project, repo } = await newProject(t.h.user);
  const run = await launch(t.h.user, project.id, request, CONFIG);
  await waitForStatus(run.id, ["awaiting_fix_decision"], 180_000);
  const gate = await waitForPendingGate(run.id);
  // The first attempt's stop goes to a person at once (fixes: auto retries nothing here).
  expect(gate).toMatchObject({ kind: "fix", context: { attempt: 1, stuck: { reason: "loop" } } });
  return { run, repo, gate };
}

const nudges = async (runId: string) =>
  (await listEvents({ runId, limit: 1000 })).filter((e) => e.type === "IMPLEMENTER_NUDGED").map((e) => e.payload as { level: number; reason: string });

describe("an implementer that loops ends in a decision for a person", () => {
  it("nudge → firm reminder with the todo list → stopped and asked; retried with a note, which reaches the model, the run completes", { timeout: 300_000 }, async () => {
    const seen: Body[] = [];
    const { run, repo, gate } = await untilStuck("Stuck then retried", seen);

    // Each level recorded, then the failure, then the gate; the gate says why and lists the todos.
    expect((await nudges(run.id)).map((n) => [n.level, n.reason])).toEqual([[1, "loop"], [2, "loop"], [3, "loop"]]);
    const types = (await listEvents({ runId: run.id, limit: 1000 })).map((e) => e.type);
    expect(types.indexOf("IMPLEMENTATION_FAILED")).toBeGreaterThan(types.lastIndexOf("IMPLEMENTER_NUDGED"));
    expect(gate.kind).toBe("fix");
    expect(gate.context).toMatchObject({
      stuck: { reason: "loop", message: expect.stringMatching(/looping: it called read_file .*after a nudge and a firm reminder/), todos: [{ id: "T1", status: "pending" }] },
    });
    // What the model was told: the nudge, then the firm reminder carrying the todo list.
    const lastUser = seen.map((b) => (b.messages ?? []).filter((m) => m.role === "user").map(text).at(-1) ?? "");
    expect(lastUser[3]).toContain("Gatehouse — a nudge: You called read_file with the same arguments 3 times");
    expect(lastUser[6]).toContain("Gatehouse — a firm reminder, the last one");
    expect(lastUser[6]).toMatch(/<todo-list>\n- T1 "[^"]+": pending\n<\/todo-list>/);
    expect(seen).toHaveLength(9);

    // In the inbox, with its own line; nothing finished to accept.
    const inboxed = (await listInbox({ user: t.h.user })).items.find((i) => i.id === gate.id);
    expect(inboxed).toMatchObject({ gateKind: "fix", summary: "The implementer stopped (loop): retry with a note, re-plan or cancel" });
    const accept = await decide(fixRoute, run.id, "fix-decision", { gateId: gate.id, decision: "accept" });
    expect(accept.status).toBe(409);
    expect(accept.body.error?.message).toMatch(/retry \(with a note for it\), replan or cancel/);

    expect((await decide(fixRoute, run.id, "fix-decision", { gateId: gate.id, decision: "retry", notes: NOTE })).status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed", "cancelled", "awaiting_fix_decision"], 180_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    // The next session's first prompt carries the person's note.
    const retried = seen.slice(9);
    expect(text(retried[0]!.messages!.find((m) => m.role === "user")!)).toContain(`A person's note: ${NOTE}`);
    const events = await expectRunConsistent(run.id);
    const attempts = events.filter((e) => e.type === "STAGE_STARTED" && (e.payload as { stage: string }).stage === "implementation");
    expect(attempts.map((e) => (e.payload as { attempt?: number }).attempt)).toEqual([1, 2]);
    expect(events.find((e) => e.type === "FIX_DECISION_MADE")?.payload).toMatchObject({ decision: "retry" });
    expect(git(repo, "show", `${run.branch}:docs/requests/stuck-then-retried.md`)).toContain("Written by the scripted model.");
  });

  it("cancelled at the gate: the run ends cancelled, with IMPLEMENTATION_FAILED recorded", { timeout: 300_000 }, async () => {
    const { run, gate } = await untilStuck("Stuck then cancelled", []);
    expect((await decide(fixRoute, run.id, "fix-decision", { gateId: gate.id, decision: "cancel" })).status).toBe(200);
    expect((await waitForStatus(run.id, ["cancelled", "completed", "failed"], 120_000)).status).toBe("cancelled");
    await waitForWorkflow(run.id);
    const types = (await expectRunConsistent(run.id)).map((e) => e.type);
    expect(types).toContain("IMPLEMENTATION_FAILED");
    expect(types.at(-1)).toBe("RUN_CANCELLED");
    expect(types).not.toContain("VALIDATION_PASSED");
  });

  it("sent back to planning: a re-plan goes through the plan gate, and the run then completes", { timeout: 300_000 }, async () => {
    const seen: Body[] = [];
    const { run, gate } = await untilStuck("Stuck then replanned", seen);
    // "replan" belongs to this gate alone: a fix gate after validation refuses it (lib/runs/gates/decide-gate.ts).
    expect((await decide(fixRoute, run.id, "fix-decision", { gateId: gate.id, decision: "replan", notes: NOTE })).status).toBe(200);
    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const planGate = await waitForPendingGate(run.id);
    expect(planGate.kind).toBe("plan");
    expect(planGate.context).toMatchObject({ version: 2, replan: expect.stringContaining("A person sent the run back to planning after the implementer stopped") });
    expect((planGate.context as { replan: string }).replan).toContain(NOTE);
    expect((await decide(approveRoute, run.id, "approve", { gateId: planGate.id })).status).toBe(200);
    expect((await waitForStatus(run.id, ["completed", "failed", "cancelled", "awaiting_fix_decision"], 180_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    expect(events.find((e) => e.type === "FIX_DECISION_MADE")?.payload).toMatchObject({ decision: "replan" });
    expect(events.filter((e) => e.type === "PLAN_CREATED")).toHaveLength(2);
    expect(text(seen[9]!.messages!.find((m) => m.role === "user")!)).toContain("The run was re-planned: implement the new plan.");
  });
});
