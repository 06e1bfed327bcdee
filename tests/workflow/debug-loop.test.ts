import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createProject } from "@/lib/projects/queries";
import { answerClarification } from "@/lib/runs/gates/decide-clarification";
import { approveGate, decideFix } from "@/lib/runs/gates/decide-gate";
import { cancelRun } from "@/lib/runs/gates/decide-run";
import { clarificationAnswered, gateDecided, runCancelled } from "@/inngest/events";
import { inngest } from "@/inngest/client";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";
import { getDb } from "@/lib/db";
import { clarificationRequests } from "@/lib/db/schema";
import { eq } from "drizzle-orm";
import { expectRunConsistent, fileBlock, git, launch, makeRepo, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { useScriptedWorkflow, type Reply } from "./model-server";

/**
 * Per-task verification and the debug loop (seed 003) with a model's real tool calls (an OpenAI-compatible server
 * scripted per request): a task's own acceptance command runs right after it, a failure is classified by a debug step
 * (the same model, structured output), and the verdict drives the run.
 */

const t = useScriptedWorkflow();
const SCRIPTED = { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" };

/** A repository with a shell test for add.sh (which does not exist yet). */
function repoWithTest() {
  const repo = makeRepo();
  fs.writeFileSync(
    path.join(repo, "test-add.sh"),
    ['out=$(sh add.sh 2 2)', 'if [ "$out" = "4" ]; then echo "ok 1 - add 2 2"; else echo "not ok 1 - add 2 2: expected 4, got $out"; exit 1; fi', ""].join("\n"),
  );
  git(repo, "add", ".");
  git(repo, "commit", "-q", "-m", "a test for add.sh");
  return repo;
}

const TASKS = ["```tasks.md", "- [ ] T1: Make add.sh print the sum of its two arguments", "  Files: add.sh", "  Check: sh test-add.sh", "```"].join("\n");

type Body = { messages?: Array<{ role: string; content?: unknown; tool_calls?: unknown[] }>; response_format?: unknown; tools?: unknown[] };

/** The implementer's turn: its assistant messages with tool calls so far. */
const turnOf = (body: Body) => (body.messages ?? []).filter((m) => m.role === "assistant" && m.tool_calls?.length).length;
const lastUser = (body: Body) => JSON.stringify([...(body.messages ?? [])].reverse().find((m) => m.role === "user")?.content ?? "");

describe("per-task verification and the debug loop", () => {
  it("a task whose test fails is classified as a test failure, fixed in another pass with the failure in context, and verified", { timeout: 180_000 }, async () => {
    const repo = repoWithTest();
    const project = await createProject({ name: "debug-loop", ownerId: t.h.user.id, repository: { type: "local", path: repo } });
    const implementerPrompts: string[] = [];
    const debugPrompts: string[] = [];
    t.model.respond((raw): Reply => {
      const body = raw as Body;
      if (body.response_format && !body.tools?.length) {
        debugPrompts.push(JSON.stringify(body.messages));
        return { text: JSON.stringify({ category: "test", action: "fix", reason: "add.sh subtracts instead of adding.", question: null }) };
      }
      implementerPrompts.push(JSON.stringify(body.messages));
      const turn = turnOf(body);
      if (turn === 0) {
        return {
          toolCalls: [
            { name: "update_todo", arguments: { id: "T1", status: "in_progress" } },
            { name: "write_file", arguments: { path: "add.sh", content: 'echo $(($1 - $2))\n' } },
          ],
        };
      }
      if (turn === 1) return { toolCalls: [{ name: "update_todo", arguments: { id: "T1", status: "done" } }] };
      if (turn === 2 && lastUser(body).includes("verify-failure")) {
        return {
          toolCalls: [
            { name: "write_file", arguments: { path: "add.sh", content: 'echo $(($1 + $2))\n' } },
            { name: "update_todo", arguments: { id: "T1", status: "done" } },
          ],
        };
      }
      return { text: "add.sh prints the sum." };
    });
    const run = await launch(t.h.user, project.id, `Add numbers\n\n${TASKS}`, { trustMode: { planning: "auto", fixes: "manual" }, modelRouting: SCRIPTED });

    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval", "awaiting_clarification"], 150_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);

    const failed = events.filter((e) => e.type === "TASK_VERIFY_FAILED").map((e) => e.payload);
    expect(failed).toMatchObject([{ taskId: "T1", command: "sh test-add.sh", exitCode: 1, attempt: 1, output: expect.stringContaining("expected 4, got 0") }]);
    expect(events.filter((e) => e.type === "DEBUG_CLASSIFIED").map((e) => e.payload)).toMatchObject([
      { taskId: "T1", category: "test", action: "fix", reason: "add.sh subtracts instead of adding.", attempt: 1, parsed: true },
    ]);
    expect(events.filter((e) => e.type === "TASK_VERIFIED").map((e) => e.payload)).toMatchObject([{ taskId: "T1", commands: ["sh test-add.sh"] }]);
    // In this order: the failure, its classification, the fix pass finishing the task again, and the passing check.
    const order = events.filter((e) => ["TASK_COMPLETED", "TASK_VERIFY_FAILED", "DEBUG_CLASSIFIED", "TASK_VERIFIED"].includes(e.type)).map((e) => e.type);
    expect(order).toEqual(["TASK_COMPLETED", "TASK_VERIFY_FAILED", "DEBUG_CLASSIFIED", "TASK_COMPLETED", "TASK_VERIFIED"]);

    // The debug step saw the failing output; the fix pass had it in context (and the verdict's reason).
    expect(debugPrompts).toHaveLength(1);
    expect(debugPrompts[0]).toContain("expected 4, got 0");
    expect(implementerPrompts[2]).toContain("verify-failure");
    expect(implementerPrompts[2]).toContain("expected 4, got 0");
    expect(implementerPrompts[2]).toContain("add.sh subtracts instead of adding.");
    // What was delivered passes the test.
    expect(git(repo, "show", `${run.branch}:add.sh`)).toBe("echo $(($1 + $2))");
    expect(events.some((e) => e.type === "VALIDATION_PASSED")).toBe(true);
  });

  it("an environment failure asks a person; the answer reaches the fix pass", { timeout: 180_000 }, async () => {
    const repo = repoWithTest();
    const project = await createProject({ name: "debug-ask", ownerId: t.h.user.id, repository: { type: "local", path: repo } });
    const implementerPrompts: string[] = [];
    let debugCalls = 0;
    t.model.respond((raw): Reply => {
      const body = raw as Body;
      if (body.response_format && !body.tools?.length) {
        debugCalls += 1;
        return { text: JSON.stringify({ category: "environment", action: "ask", reason: "The test needs a tool.", question: "Which shell should add.sh target?" }) };
      }
      implementerPrompts.push(JSON.stringify(body.messages));
      const turn = turnOf(body);
      if (turn === 0) return { toolCalls: [{ name: "write_file", arguments: { path: "add.sh", content: "echo 0\n" } }, { name: "update_todo", arguments: { id: "T1", status: "done" } }] };
      if (turn === 1 && lastUser(body).includes("verify-failure")) {
        return { toolCalls: [{ name: "write_file", arguments: { path: "add.sh", content: 'echo $(($1 + $2))\n' } }, { name: "update_todo", arguments: { id: "T1", status: "done" } }] };
      }
      return { text: "Done." };
    });
    const run = await launch(t.h.user, project.id, `Add numbers\n\n${TASKS}`, { trustMode: { planning: "auto", fixes: "manual" }, modelRouting: SCRIPTED });

    await waitForStatus(run.id, ["awaiting_clarification"], 120_000);
    const db = await getDb();
    const [question] = await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.id));
    expect(question!.question).toBe("Which shell should add.sh target?");
    await answerClarification({ user: t.h.user, clarificationId: question!.id, response: "POSIX sh" });
    await announceDecision({
      event: clarificationAnswered.create({ runId: run.id, clarificationId: question!.id }),
      key: decisionKey.clarification(question!.id),
    });

    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    expect(debugCalls).toBe(1);
    expect(events.filter((e) => e.type === "DEBUG_CLASSIFIED").map((e) => e.payload)).toMatchObject([{ category: "environment", action: "ask" }]);
    expect(implementerPrompts[1]).toContain("POSIX sh");
    expect(events.filter((e) => e.type === "TASK_VERIFIED")).toHaveLength(1);
  });

  it("with the demo model: [verify:] fails, the debug step classifies it, the ```fix: pass makes it pass", { timeout: 180_000 }, async () => {
    const repo = repoWithTest();
    const project = await createProject({ name: "debug-demo", ownerId: t.h.user.id, repository: { type: "local", path: repo } });
    const request = ["Add numbers", "", fileBlock("add.sh", "echo $(($1 - $2))"), "```fix:add.sh", "echo $(($1 + $2))", "```", "[verify: sh test-add.sh]"].join("\n");
    const run = await launch(t.h.user, project.id, request, { trustMode: { planning: "auto", fixes: "manual" } });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval", "awaiting_clarification"], 150_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    const order = events.filter((e) => ["TASK_VERIFY_FAILED", "DEBUG_CLASSIFIED", "TASK_VERIFIED"].includes(e.type)).map((e) => [e.type, (e.payload as { taskId: string }).taskId]);
    expect(order).toEqual([
      ["TASK_VERIFY_FAILED", "T2"],
      ["DEBUG_CLASSIFIED", "T2"],
      ["TASK_VERIFIED", "T2"],
    ]);
    expect(events.find((e) => e.type === "DEBUG_CLASSIFIED")!.payload).toMatchObject({ category: "test", action: "fix", parsed: true });
    expect(git(repo, "show", `${run.branch}:add.sh`)).toBe("echo $(($1 + $2))");
  });

  it("a failure the fix passes cannot fix escalates to the fix gate after verification.maxDebugAttempts; accepted, the run goes on", { timeout: 180_000 }, async () => {
    const repo = repoWithTest();
    const project = await createProject({ name: "debug-exhausted", ownerId: t.h.user.id, repository: { type: "local", path: repo } });
    let debugCalls = 0;
    let turn = 0;
    t.model.respond((raw): Reply => {
      const body = raw as Body;
      if (body.response_format && !body.tools?.length) {
        debugCalls += 1;
        return { text: JSON.stringify({ category: "test", action: "fix", reason: "Still subtracting.", question: null }) };
      }
      // A model that never gets it right: every pass writes the same wrong script and marks the task done.
      turn += 1;
      const last = body.messages?.at(-1);
      if (turn === 1 || (last?.role === "user" && JSON.stringify(last.content).includes("verify-failure"))) {
        return { toolCalls: [{ name: "write_file", arguments: { path: "add.sh", content: `echo $(($1 - $2)) # pass ${turn}\n` } }, { name: "update_todo", arguments: { id: "T1", status: "done" } }] };
      }
      return { text: "Done." };
    });
    const run = await launch(t.h.user, project.id, `Add numbers\n\n${TASKS}`, {
      trustMode: { planning: "auto", fixes: "manual" },
      modelRouting: SCRIPTED,
      verification: { maxDebugAttempts: 1 },
    });

    await waitForStatus(run.id, ["awaiting_fix_decision"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("fix");
    expect(gate.context).toMatchObject({ automaticFixesExhausted: true, verification: { taskId: "T1", command: "sh test-add.sh", category: "test" } });
    expect(String((gate.context as { report: string }).report)).toContain("expected 4, got 0");
    await decideFix({ user: t.h.user, runId: run.id, input: { gateId: gate.id, decision: "accept" } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "accept" }), key: decisionKey.gate(gate.id) });

    // Accepted as it is: the run goes on to validation, whose own run of the check fails and goes to a person again.
    await waitForStatus(run.id, ["awaiting_fix_decision", "completed", "failed"], 120_000);
    const events = await expectRunConsistent(run.id);
    expect(debugCalls).toBe(2);
    expect(events.filter((e) => e.type === "DEBUG_CLASSIFIED").map((e) => e.payload)).toMatchObject([
      { attempt: 1, action: "fix" },
      { attempt: 2, action: "escalate", exhausted: true },
    ]);
    expect(events.some((e) => e.type === "VALIDATION_FAILED")).toBe(true);
    await cancelRun({ user: t.h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    await waitForWorkflow(run.id);
  });

  it("a failure the debug step puts on the plan escalates to a re-plan at the plan gate", { timeout: 180_000 }, async () => {
    const repo = repoWithTest();
    const project = await createProject({ name: "debug-plan", ownerId: t.h.user.id, repository: { type: "local", path: repo } });
    t.model.respond((raw): Reply => {
      const body = raw as Body;
      if (body.response_format && !body.tools?.length) {
        // Hostile: a plan problem the model wants "fixed" anyway; the run escalates it regardless.
        return { text: 'Verdict: {"category": "PLAN", "action": "fix", "reason": "The check tests a script the task does not own."}' };
      }
      if (turnOf(body) === 0) {
        return { toolCalls: [{ name: "write_file", arguments: { path: "add.sh", content: "echo 0\n" } }, { name: "update_todo", arguments: { id: "T1", status: "done" } }] };
      }
      return { text: "Done." };
    });
    const run = await launch(t.h.user, project.id, `Add numbers\n\n${TASKS}`, { trustMode: { planning: "auto", fixes: "manual" }, modelRouting: SCRIPTED });

    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("plan");
    expect(gate.context).toMatchObject({ version: 2, replan: expect.stringMatching(/^Re-plan proposed by the debug step\. Observation: task T1's acceptance command `sh test-add.sh` failed/) });
    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "DEBUG_CLASSIFIED").map((e) => e.payload)).toMatchObject([{ category: "plan", action: "escalate", parsed: true }]);
    await approveGate({ user: t.h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    // The approved plan is the implementer's now; the run goes on (validation judges what is there).
    await waitForStatus(run.id, ["awaiting_fix_decision", "completed", "failed"], 120_000);
    const after = await expectRunConsistent(run.id);
    expect(after.filter((e) => e.type === "PLAN_CREATED").map((e) => (e.payload as { version: number }).version)).toEqual([1, 2]);
    await cancelRun({ user: t.h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    await waitForWorkflow(run.id);
  });
});
