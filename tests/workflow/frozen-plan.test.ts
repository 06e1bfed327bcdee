import { describe, expect, it } from "vitest";
import { POST as approveRoute } from "@/app/api/runs/[id]/approve/route";
import { parseSpec, readFileAt, readRunContext } from "@/lib/git";
import { planHash } from "@/lib/workflow/plan-hash";
import type { PlanDocument } from "@/lib/workflow";
import { expectRunConsistent, git, launch, newProject, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";

/** Seed 003: the approved plan is frozen (its hash on the approval, in the spec and context.json); a change needs a new approval. */

const h = useWorkflowHarness();

/** Approve through the real route (auth, the decision, its announcement). */
async function approve(runId: string, body: unknown) {
  const response = await approveRoute(
    new Request(`http://127.0.0.1:3000/api/runs/${runId}/approve`, {
      method: "POST",
      headers: { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    }),
    { params: Promise.resolve({ id: runId }) },
  );
  expect(response.status).toBe(200);
}

describe("the approved plan is frozen", () => {
  it("an edited plan's hash is what the approval records; a later re-plan needs (and records) a new approval; spec, context.json and the validator agree", { timeout: 180_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Add a changelog\n[replan: The repository has no CHANGELOG convention to follow.]", {
      trustMode: { planning: "manual", fixes: "manual" },
    });
    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const first = await waitForPendingGate(run.id);
    expect(first.kind).toBe("plan");
    const drafted = (first.context as { plan: PlanDocument }).plan;
    // The person edits a task's title at the gate: the approval freezes the edited plan, not the draft.
    const tasks = drafted.tasks.map((t) => ({ id: t.id, title: `${t.title} (reviewed)`, files: t.files, dependsOn: t.dependsOn }));
    await approve(run.id, { gateId: first.id, editedPlan: { mermaid: drafted.mermaid, tasks } });

    // The implementer's observation proposes a re-plan: a change of the approved plan, so it waits at a new plan gate.
    const second = await waitForPendingGate(run.id, 120_000);
    expect(second.kind).toBe("plan");
    expect(second.id).not.toBe(first.id);
    const replanned = (second.context as { plan: PlanDocument }).plan;
    await approve(run.id, { gateId: second.id });

    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);

    const edited = events.find((e) => e.type === "PLAN_EDITED")!.payload as { plan: PlanDocument; path: string; commitSha: string };
    const approvals = events.filter((e) => e.type === "APPROVAL_GRANTED").map((e) => (e.payload as { planHash?: string }).planHash);
    expect(approvals).toEqual([planHash(edited.plan), planHash(replanned)]);
    expect(approvals[0]).not.toBe(planHash(drafted));
    expect(approvals[1]).not.toBe(approvals[0]);

    // Each spec version carries its own hash in the front matter: the edited version's is the first approval's.
    const editedSpec = parseSpec((await readFileAt({ repoPath: repo, ref: edited.commitSha, path: edited.path })) ?? "");
    expect(editedSpec.frontMatter.planHash).toBe(approvals[0]);
    const lastSpec = parseSpec(git(repo, "show", `${run.branch!}:${edited.path}`));
    expect(lastSpec.frontMatter.planHash).toBe(approvals[1]);

    // context.json: the plan in force is the re-plan, approved last.
    const context = await readRunContext({ repoPath: repo, ref: run.branch!, runId: run.id });
    expect(context?.approvedPlanHash).toBe(approvals[1]);

    // The validator checked the plan it validated against the approved one.
    const passed = events.find((e) => e.type === "VALIDATION_PASSED")!.payload as { report: string };
    expect(passed.report).toContain(`frozen: The plan validated is the approved one (${approvals[1]!.slice(0, 12)})`);
  });
});
