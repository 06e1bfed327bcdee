import { describe, expect, it } from "vitest";
import { POST as askBackRoute } from "@/app/api/runs/[id]/ask-back/route";
import { POST as approveRoute } from "@/app/api/runs/[id]/approve/route";
import { POST as resumeRoute } from "@/app/api/runs/[id]/resume/route";
import type { PlanDocument } from "@/lib/workflow";
import { expectRunConsistent, fileBlock, git, launch, newProject, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { ADMIN, call } from "../api/helpers";

const h = useWorkflowHarness();

/** POST to a run's route as the admin token does, through the real handler (auth, parsing, decision, announcement). */
async function post(handler: typeof askBackRoute, runId: string, action: string, body: unknown) {
  const r = await call(handler, { method: "POST", path: `/api/runs/${runId}/${action}`, params: { id: runId }, headers: ADMIN, body });
  return { status: r.status, body: r.json as { error?: { message?: string }; message?: string } & Record<string, unknown> };
}

const errorText = (body: Record<string, unknown>) => JSON.stringify(body);

describe("the plan gate: ask back, edit tasks / acceptance commands / scope, fix an invalid diagram by hand", () => {
  it("ask back: the planner answers on the card and gives a revised plan version; questions do not count toward maxReplans", async () => {
    const { project } = await newProject(h.user);
    // maxReplans 0: a single rejection would fail the run, so two questions prove they are not rejections.
    const run = await launch(h.user, project.id, `Write a note\n\n${fileBlock("notes/a.txt", "a")}`, {
      trustMode: { planning: "manual" },
      limits: { maxReplans: 0 },
    });
    await waitForStatus(run.id, ["awaiting_approval"]);
    const first = await waitForPendingGate(run.id);
    expect((first.context as { version: number }).version).toBe(1);

    // An empty question is a clear 400 and decides nothing.
    const empty = await post(askBackRoute, run.id, "ask-back", { gateId: first.id, question: "  " });
    expect(empty.status).toBe(400);
    expect(errorText(empty.body)).toMatch(/question: must ask the planner something/);
    expect((await waitForPendingGate(run.id)).id).toBe(first.id);

    const asked = await post(askBackRoute, run.id, "ask-back", { gateId: first.id, question: "Why one note per file?" });
    expect(asked.status).toBe(200);
    // The gate is decided: asking again on it is a 409.
    expect((await post(askBackRoute, run.id, "ask-back", { gateId: first.id, question: "again?" })).status).toBe(409);

    const second = await waitForPendingGate(run.id);
    expect(second.id).not.toBe(first.id);
    const context = second.context as { version: number; plan: PlanDocument; answered?: { question: string; answer: string } };
    expect(context.version).toBe(2);
    expect(context.answered?.question).toBe("Why one note per file?");
    expect(context.answered?.answer).toContain('you asked "Why one note per file?"');
    expect(context.plan.risks).toContain("Asked on the plan card: Why one note per file?");

    // A second question, then an approval: still no rejection counted, and the run completes.
    expect((await post(askBackRoute, run.id, "ask-back", { gateId: second.id, question: "And the order?" })).status).toBe(200);
    const third = await waitForPendingGate(run.id);
    expect((third.context as { version: number }).version).toBe(3);
    expect((await post(approveRoute, run.id, "approve", { gateId: third.id })).status).toBe(200);

    const done = await waitForStatus(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(done.rejections).toBe(0);
    expect(done.planVersion).toBe(3);
    expect(await waitForWorkflow(run.id)).toBe("completed");
    const events = await expectRunConsistent(run.id);
    const answers = events.filter((e) => e.type === "PLAN_QUESTION_ANSWERED").map((e) => e.payload as { version: number; question: string });
    expect(answers).toEqual([
      expect.objectContaining({ version: 2, question: "Why one note per file?" }),
      expect.objectContaining({ version: 3, question: "And the order?" }),
    ]);
    expect(events.filter((e) => e.type === "PLAN_QUESTION_ASKED")).toHaveLength(2);
    expect(events.some((e) => e.type === "APPROVAL_REJECTED")).toBe(false);
  });

  it("the editor edits tasks (files = scope, dependencies) and acceptance commands; the run validates against the edited ones", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Write a note\n\n${fileBlock("notes/a.txt", "a")}`, { trustMode: { planning: "manual" } });
    await waitForStatus(run.id, ["awaiting_approval"]);
    const gate = await waitForPendingGate(run.id);
    const drafted = (gate.context as { plan: PlanDocument }).plan;

    const tasks = [
      { id: "T1", title: "Write notes/a.txt", files: ["notes/a.txt"] },
      { id: "T2", title: "Write the request note", files: ["docs/requests/"], dependsOn: ["T1"] },
    ];
    // Server-side checks, each a 400 naming the field; none decides the gate.
    const badDep = await post(approveRoute, run.id, "approve", {
      gateId: gate.id,
      editedPlan: { mermaid: drafted.mermaid, tasks: [{ ...tasks[0], dependsOn: ["T9"] }] },
    });
    expect(badDep.status).toBe(400);
    expect(errorText(badDep.body)).toMatch(/editedPlan\.tasks\.0\.dependsOn: \\"T9\\" is not a task of this plan/);
    const badScope = await post(approveRoute, run.id, "approve", {
      gateId: gate.id,
      editedPlan: { mermaid: drafted.mermaid, tasks: [{ ...tasks[0], files: ["../outside.txt"] }] },
    });
    expect(badScope.status).toBe(400);
    expect(errorText(badScope.body)).toMatch(/editedPlan\.tasks\.0\.files\.0: must be a path inside the repository/);
    const badCriterion = await post(approveRoute, run.id, "approve", {
      gateId: gate.id,
      editedPlan: { mermaid: drafted.mermaid, acceptanceCriteria: [{ description: "", command: "true" }] },
    });
    expect(badCriterion.status).toBe(400);
    expect(errorText(badCriterion.body)).toMatch(/editedPlan\.acceptanceCriteria\.0\.description/);
    const cycle = await post(approveRoute, run.id, "approve", {
      gateId: gate.id,
      editedPlan: { mermaid: drafted.mermaid, tasks: [{ ...tasks[0], dependsOn: ["T2"] }, tasks[1]] },
    });
    expect(cycle.status).toBe(400);
    expect(errorText(cycle.body)).toMatch(/form a cycle/);
    expect((await waitForPendingGate(run.id)).id).toBe(gate.id);

    const acceptanceCriteria = [
      { id: "AC1", description: "notes/a.txt holds a", command: "grep -qx a notes/a.txt" },
      { id: "AC2", description: "the edited check", command: "test -f edited-check-was-here.txt" },
    ];
    const approved = await post(approveRoute, run.id, "approve", {
      gateId: gate.id,
      editedPlan: { mermaid: drafted.mermaid, tasks, acceptanceCriteria },
    });
    expect(approved.status).toBe(200);

    // The edited plan is the one the run works from: its tasks and commands, not the drafted ones. The extra command
    // fails (nothing writes that file), so validation fails on exactly the edited criterion.
    const fix = await waitForPendingGate(run.id, 120_000);
    expect(fix.kind).toBe("fix");
    const findings = (fix.context as { findings: Array<{ criterion: string }> }).findings.map((f) => f.criterion);
    expect(findings.join(" ")).toContain("AC2");
    const events = await expectRunConsistent(run.id);
    const edited = events.find((e) => e.type === "PLAN_EDITED")!.payload as { plan: PlanDocument; version: number };
    expect(edited.version).toBe(2);
    expect(edited.plan.acceptanceCriteria).toEqual(acceptanceCriteria);
    expect(edited.plan.tasks.map((t) => [t.id, t.files, t.dependsOn ?? []])).toEqual([
      ["T1", ["notes/a.txt"], []],
      ["T2", ["docs/requests/"], ["T1"]],
    ]);
    expect(git(repo, "log", "--format=%s", run.branch!, "--", ".autonomous/specs")).toMatch(/Plan v2/);
  });

  it("an invalid-Mermaid pause is fixed by hand: the edited plan is checked with Mermaid's grammar and becomes the run's plan", async () => {
    const { project, repo } = await newProject(h.user);
    // Four invalid diagrams: the planner's call and its retry both fail, and the run pauses for a person.
    const run = await launch(h.user, project.id, `Write a note\n[invalid-mermaid: 4]\n\n${fileBlock("notes/a.txt", "a")}`, {
      trustMode: { planning: "auto" },
    });
    const paused = await waitForStatus(run.id, ["paused"]);
    expect(paused.pauseReason?.reason).toBe("invalid_plan");
    // The draft that came with the invalid diagram is kept for the editor.
    const draft = paused.pauseReason!.plan!;
    expect(draft.mermaid).toContain("invalid on purpose");
    expect(draft.tasks.length).toBeGreaterThan(0);

    const stillInvalid = await post(resumeRoute, run.id, "resume", { editedPlan: { mermaid: "flowchart TD\n  A --> B{{{ oops" } });
    expect(stillInvalid.status).toBe(400);
    expect(errorText(stillInvalid.body)).toMatch(/editedPlan\.mermaid/);
    expect((await waitForStatus(run.id, ["paused"])).status).toBe("paused");

    const mermaid = "flowchart TD\n  R[Write a note] --> T1[Write notes/a.txt]\n  T1 --> T2[Write the request note]";
    const resumed = await post(resumeRoute, run.id, "resume", { editedPlan: { mermaid } });
    expect(resumed.status).toBe(200);

    const done = await waitForStatus(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(await waitForWorkflow(run.id)).toBe("completed");
    const events = await expectRunConsistent(run.id);
    const types = events.map((e) => e.type);
    // No planner plan was created after the fix: the hand-fixed plan is version 1, recorded as a person's edit.
    expect(types).not.toContain("PLAN_CREATED");
    const edited = events.find((e) => e.type === "PLAN_EDITED")!.payload as { plan: PlanDocument; version: number; by: string };
    expect(edited).toMatchObject({ version: 1, by: h.user.id });
    expect(edited.plan.mermaid).toBe(mermaid);
    expect(edited.plan.tasks).toEqual(draft.tasks);
    expect(git(repo, "show", `${run.branch}:notes/a.txt`)).toBe("a");
  });

  it("a run paused for another reason takes no edited plan (409)", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Write a note", { trustMode: { planning: "manual" } });
    await waitForStatus(run.id, ["awaiting_approval"]);
    const refused = await post(resumeRoute, run.id, "resume", { editedPlan: { mermaid: "flowchart TD\n  A --> B" } });
    expect(refused.status).toBe(409);
  });
});

describe("the escalated-question gate takes the same typed answer as the question", () => {
  it("past maxClarifications a single choice escalates; an option not offered is a 400, the chosen one reaches the implementer", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Greeting\n[ask: Which language? | English | French]", {
      trustMode: { planning: "auto" },
      maxClarifications: 0,
    });
    await waitForStatus(run.id, ["awaiting_approval"]);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("escalation");
    expect(gate.context).toMatchObject({ question: "Which language?", responseType: "single_choice", options: ["English", "French"] });

    const notOffered = await post(approveRoute, run.id, "approve", { gateId: gate.id, response: "German" });
    expect(notOffered.status).toBe(400);
    expect(errorText(notOffered.body)).toMatch(/response: choose one of: English, French/);
    const wrongShape = await post(approveRoute, run.id, "approve", { gateId: gate.id, response: ["English", "French"] });
    expect(wrongShape.status).toBe(400);
    expect((await waitForPendingGate(run.id)).id).toBe(gate.id);

    expect((await post(approveRoute, run.id, "approve", { gateId: gate.id, response: "French" })).status).toBe(200);
    const done = await waitForStatus(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(await waitForWorkflow(run.id)).toBe("completed");
    expect(git(repo, "show", `${run.branch}:docs/requests/greeting.md`)).toContain("- **Which language?** — French\n");
    await expectRunConsistent(run.id);
  });

  it("a typed response on a plan gate is a 400", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Write a note", { trustMode: { planning: "manual" } });
    await waitForStatus(run.id, ["awaiting_approval"]);
    const gate = await waitForPendingGate(run.id);
    const refused = await post(approveRoute, run.id, "approve", { gateId: gate.id, response: "yes" });
    expect(refused.status).toBe(400);
    expect(errorText(refused.body)).toMatch(/only an escalated question takes a typed response/);
  });
});

describe("validation's deterministic plan constraints: required commands present", () => {
  it("a command that exits 0 without its script passes the review but fails the constraint; the run goes to a person", async () => {
    const { project } = await newProject(h.user);
    // `|| true` makes the check exit 0 although ./scripts/check.sh was never written: the demo review (which trusts
    // green checks) passes, and only Gatehouse's own check notices the missing script.
    const run = await launch(h.user, project.id, `Write a note\n[check: ./scripts/check.sh || true]\n\n${fileBlock("notes/a.txt", "a")}`, {
      trustMode: { planning: "auto", fixes: "auto" },
    });
    const fix = await waitForPendingGate(run.id, 120_000);
    expect(fix.kind).toBe("fix");
    const context = fix.context as { findings: Array<{ severity: string; criterion: string; evidence: string }>; majorFindings: boolean };
    // A major finding: never retried automatically, even under fixes=auto.
    expect(context.majorFindings).toBe(true);
    expect(context.findings).toEqual([
      expect.objectContaining({ severity: "major", criterion: "plan:commands", evidence: expect.stringContaining("./scripts/check.sh does not exist") }),
    ]);
    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "VALIDATION_FAILED")).toHaveLength(1);
  });
});
