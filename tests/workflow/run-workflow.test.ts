import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { getEnv } from "@/lib/env";
import { getDb } from "@/lib/db";
import { clarificationRequests, gates } from "@/lib/db/schema";
import { eq } from "drizzle-orm";
import { answerClarification } from "@/lib/runs/gates/decide-clarification";
import { approveGate, decideFix, rejectGate } from "@/lib/runs/gates/decide-gate";
import { cancelRun, decideMerge } from "@/lib/runs/gates/decide-run";
import { inngest } from "@/inngest";
import { clarificationAnswered, gateDecided, mergeDecided, runCancelled } from "@/inngest/events";
import { getRunState } from "@/lib/db/event-store";
import { expectConsistent, git, launch, newProject, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";

const h = useWorkflowHarness();

const fileBlock = (p: string, content: string) => ["```file:" + p, content, "```"].join("\n");

async function pendingGate(runId: string) {
  const db = await getDb();
  const rows = await db.select().from(gates).where(eq(gates.workflowRunId, runId));
  return rows.find((g) => g.status === "pending")!;
}

describe("the run workflow (embedded executor, demo model, local sandbox, real git)", () => {
  it("full auto: plan → implement → validate → deliver → completed, squash-merged, with the records on the branch", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Add a greeting\n\n${fileBlock("src/greet.txt", "hello")}`, {
      trustMode: { planning: "auto" },
      git: { autoMerge: true },
    });
    const done = await waitForStatus(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(done.merged).toBe(true);
    expect(await waitForWorkflow(run.id)).toBe("completed");

    const branch = run.branch!;
    const files = git(repo, "ls-tree", "-r", "--name-only", branch).split("\n");
    expect(files).toContain("src/greet.txt");
    expect(files.some((f) => /^\.autonomous\/specs\/001-.*\.md$/.test(f))).toBe(true);
    for (const record of ["context.json", "validation-report.md", "events.jsonl"]) {
      expect(files).toContain(`.autonomous/runs/${run.id}/${record}`);
    }
    expect(git(repo, "show", `${branch}:.autonomous/memory.md`)).toContain(run.id);
    const context = JSON.parse(git(repo, "show", `${branch}:.autonomous/runs/${run.id}/context.json`));
    expect({ runId: context.runId, status: context.status }).toEqual({ runId: run.id, status: "completed" });
    // Squash-merged into main: the file is there, in one commit on top of the initial one, and the records that landed
    // there say what the run ended as.
    expect(git(repo, "show", "main:src/greet.txt")).toBe("hello");
    const merged = JSON.parse(git(repo, "show", `main:.autonomous/runs/${run.id}/context.json`));
    expect(merged.status).toBe("completed");
    expect(merged.completedAt).not.toBeNull();
    expect(git(repo, "log", "--format=%s", "main").split("\n")).toHaveLength(2);
    // No workspace is left behind.
    expect(fs.existsSync(path.join(getEnv().dataDir, "workspaces", run.id))).toBe(false);

    const { gapless, replayed, stored, events } = await expectConsistent(run.id);
    expect(gapless).toBe(true);
    expect(replayed).toEqual(stored);
    const types = events.map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(["RUN_STARTED", "PLAN_CREATED", "TASK_COMPLETED", "IMPLEMENTATION_SUCCEEDED", "VALIDATION_PASSED", "RUN_COMPLETED"]));
    expect(types.indexOf("PLAN_CREATED")).toBeLessThan(types.indexOf("IMPLEMENTATION_SUCCEEDED"));
  });

  it("plan gate: reject with feedback re-plans, approve with an edited plan commits a new spec version, then completes", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Write a note\n\n${fileBlock("notes/a.txt", "a")}`, { trustMode: { planning: "manual" } });
    await waitForStatus(run.id, ["awaiting_approval"]);
    const first = await pendingGate(run.id);
    expect(first.kind).toBe("plan");
    expect((first.context as { plan: { mermaid: string } }).plan.mermaid).toMatch(/flowchart|graph/);
    await rejectGate({ user: h.user, runId: run.id, input: { gateId: first.id, feedback: "Mention the reviewer" } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: first.id, decision: "reject" }), key: decisionKey.gate(first.id) });

    await waitForStatus(run.id, ["awaiting_approval"]);
    const second = await pendingGate(run.id);
    expect(second.id).not.toBe(first.id);
    expect((second.context as { version: number }).version).toBe(2);
    await approveGate({
      user: h.user,
      runId: run.id,
      input: { gateId: second.id, editedPlan: { mermaid: "flowchart TD\n  A[Write the note] --> B[Done]" } },
    });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: second.id, decision: "approve" }), key: decisionKey.gate(second.id) });
    const done = await waitForStatus(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(done.planVersion).toBe(3);
    const specLog = git(repo, "log", "--format=%s", run.branch!, "--", ".autonomous/specs");
    expect(specLog.split("\n").filter((l) => l.startsWith("Plan v"))).toHaveLength(3);
    const { gapless, replayed, stored } = await expectConsistent(run.id);
    expect(gapless).toBe(true);
    expect(replayed).toEqual(stored);
  });

  it("clarification: the implementer asks, the answer resumes it and lands in the note; the sandbox is gone while waiting", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Greet people [ask: Which language? | English | French]", { trustMode: { planning: "auto" } });
    const waiting = await waitForStatus(run.id, ["awaiting_clarification"]);
    expect(waiting.currentStage).toBe("implementation");
    expect(fs.existsSync(path.join(getEnv().dataDir, "workspaces", run.id))).toBe(false);
    const db = await getDb();
    const [question] = await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.id));
    expect(question).toMatchObject({ question: "Which language?", responseType: "single_choice", options: ["English", "French"] });
    await answerClarification({ user: h.user, clarificationId: question!.id, response: "French" });
    await announceDecision({ event: clarificationAnswered.create({ runId: run.id, clarificationId: question!.id }), key: decisionKey.clarification(question!.id) });
    const done = await waitForStatus(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    const notes = git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n").filter((f) => f.startsWith("docs/requests/"));
    expect(notes).toHaveLength(1);
    expect(git(repo, "show", `${run.branch}:${notes[0]}`)).toContain("French");
  });

  it("past maxClarifications the question escalates to a gate", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Greet [ask: Formal or casual?]", { trustMode: { planning: "auto" }, maxClarifications: 0 });
    await waitForStatus(run.id, ["awaiting_approval"]);
    const gate = await pendingGate(run.id);
    expect(gate.kind).toBe("escalation");
    expect(gate.context).toMatchObject({ question: "Formal or casual?" });
    await approveGate({ user: h.user, runId: run.id, input: { gateId: gate.id, notes: "casual" } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
  });

  it("validation failure with fixes=auto loops back to implementation and then passes", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Write it [fail-validation: 1]", { trustMode: { planning: "auto", fixes: "auto" } });
    const done = await waitForStatus(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    const { events } = await expectConsistent(run.id);
    expect(events.filter((e) => e.type === "VALIDATION_FAILED")).toHaveLength(1);
    expect(events.filter((e) => e.type === "VALIDATION_PASSED")).toHaveLength(1);
    expect(events.filter((e) => e.type === "IMPLEMENTATION_SUCCEEDED")).toHaveLength(2);
  });

  it("costs per stage and per model: subtotals that add up to the run's total", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Costs", { trustMode: { planning: "auto" } });
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
    const { getRunDetail } = await import("@/lib/runs/service");
    const { cost } = await getRunDetail({ user: h.user, runId: run.id });
    expect(cost.byStage.map((r) => r.stage)).toEqual(["planning", "implementation", "validation"]);
    expect(cost.byStage.reduce((n, r) => n + r.calls, 0)).toBe(cost.calls);
    expect(cost.byModel).toEqual([expect.objectContaining({ model: "demo:default", calls: cost.calls })]);
    expect(cost.byStage.reduce((n, r) => n + r.tokensIn, 0)).toBe(Number(cost.tokensIn));
  });

  it("accepting a failed validation delivers the branch but never merges it, even with git.autoMerge", async () => {
    const { project, repo } = await newProject(h.user);
    const mainBefore = git(repo, "rev-parse", "main");
    const run = await launch(h.user, project.id, `Write it [fail-validation: 5]\n\n${fileBlock("src/x.txt", "x")}`, {
      trustMode: { planning: "auto", fixes: "manual" },
      git: { autoMerge: true },
    });
    await waitForStatus(run.id, ["awaiting_fix_decision"]);
    const gate = await pendingGate(run.id);
    await decideFix({ user: h.user, runId: run.id, input: { gateId: gate.id, decision: "accept" } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "accept" }), key: decisionKey.gate(gate.id) });
    const done = await waitForStatus(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(done.merged).toBe(false);
    expect(git(repo, "rev-parse", "main")).toBe(mainBefore);
    expect(git(repo, "show", `${run.branch}:src/x.txt`)).toBe("x");
    const { events } = await expectConsistent(run.id);
    expect(events.map((e) => e.type)).not.toContain("PR_MERGED");
  });

  it("merging accepted-but-failed work takes a person's merge decision: MERGE_DECIDED, then PR_MERGED by them; a conflict is MERGE_FAILED and can be decided again", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Write it [fail-validation: 5]\n\n${fileBlock("src/m.txt", "m")}`, {
      trustMode: { planning: "auto", fixes: "manual" },
      git: { autoMerge: true },
    });
    await waitForStatus(run.id, ["awaiting_fix_decision"]);
    const gate = await pendingGate(run.id);
    await expect(decideMerge({ user: h.user, runId: run.id })).rejects.toMatchObject({ status: 409 });
    await decideFix({ user: h.user, runId: run.id, input: { gateId: gate.id, decision: "accept" } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "accept" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed"])).merged).toBe(false);
    await waitForWorkflow(run.id);

    // The checkout of main has an uncommitted change: the decided merge fails, says why, and changes nothing.
    const mainBefore = git(repo, "rev-parse", "main");
    fs.appendFileSync(path.join(repo, "README.md"), "local edit\n");
    await decideMerge({ user: h.user, runId: run.id, notes: "ship it" });
    await expect(decideMerge({ user: h.user, runId: run.id })).rejects.toMatchObject({ status: 409 });
    await inngest.send(mergeDecided.create({ runId: run.id }));
    const failedAt = Date.now();
    while (!(await expectConsistent(run.id)).events.some((e) => e.type === "MERGE_FAILED")) {
      if (Date.now() - failedAt > 30_000) throw new Error("no MERGE_FAILED within 30 s");
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(git(repo, "rev-parse", "main")).toBe(mainBefore);
    expect((await getRunState({ id: run.id }))!.merged).toBe(false);

    // Cleaned up, decided again: merged by that person.
    git(repo, "checkout", "--", "README.md");
    await decideMerge({ user: h.user, runId: run.id });
    await inngest.send(mergeDecided.create({ runId: run.id }));
    const mergedAt = Date.now();
    while (!(await getRunState({ id: run.id }))!.merged) {
      if (Date.now() - mergedAt > 30_000) throw new Error("not merged within 30 s");
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(git(repo, "show", "main:src/m.txt")).toBe("m");
    const { events } = await expectConsistent(run.id);
    const types = events.map((e) => e.type);
    expect(types.slice(types.indexOf("RUN_COMPLETED"))).toEqual(["RUN_COMPLETED", "MERGE_DECIDED", "MERGE_FAILED", "MERGE_DECIDED", "PR_MERGED"]);
    const merged = events.find((e) => e.type === "PR_MERGED")!;
    expect(merged.payload).toMatchObject({ by: h.user.id, method: "squash" });
    expect((events.find((e) => e.type === "MERGE_FAILED")!.payload as { reason: string }).reason).toMatch(/uncommitted changes/);
    await expect(decideMerge({ user: h.user, runId: run.id })).rejects.toMatchObject({ status: 409, message: "The run is already merged." });
  });

  it("severity routing: a major finding (a failing acceptance command) goes to a person even with fixes=auto", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Write it\n[check: false]", { trustMode: { planning: "auto", fixes: "auto" } });
    await waitForStatus(run.id, ["awaiting_fix_decision"]);
    const gate = await pendingGate(run.id);
    expect(gate.context).toMatchObject({ majorFindings: true, automaticFixesExhausted: false, attempt: 1 });
    const { events } = await expectConsistent(run.id);
    expect(events.filter((e) => e.type === "VALIDATION_FAILED")).toHaveLength(1);
    await decideFix({ user: h.user, runId: run.id, input: { gateId: gate.id, decision: "cancel" } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "cancel" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["cancelled", "completed", "failed"])).status).toBe("cancelled");
  });

  it("validation failure with fixes=manual waits for a fix decision; retry completes", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Write it [fail-validation: 1]", { trustMode: { planning: "auto", fixes: "manual" } });
    await waitForStatus(run.id, ["awaiting_fix_decision"]);
    const gate = await pendingGate(run.id);
    expect(gate.kind).toBe("fix");
    expect((gate.context as { report: string }).report.length).toBeGreaterThan(0);
    await decideFix({ user: h.user, runId: run.id, input: { gateId: gate.id, decision: "retry" } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "retry" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed"])).status).toBe("completed");
  });

  it("cancel while waiting ends the run cancelled, keeps the branch and frees the workspace", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Anything", { trustMode: { planning: "manual" } });
    await waitForStatus(run.id, ["awaiting_approval"]);
    await cancelRun({ user: h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    const state = await waitForStatus(run.id, ["cancelled"]);
    expect(state.pendingGate).toBeNull();
    expect(git(repo, "branch", "--list", run.branch!)).toContain(run.branch!);
    expect(fs.existsSync(path.join(getEnv().dataDir, "workspaces", run.id))).toBe(false);
  });
});
