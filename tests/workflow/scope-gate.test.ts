import { describe, expect, it } from "vitest";
import { POST as approveRoute } from "@/app/api/runs/[id]/approve/route";
import { POST as rejectRoute } from "@/app/api/runs/[id]/reject/route";
import { POST as askBackRoute } from "@/app/api/runs/[id]/ask-back/route";
import { POST as cancelRoute } from "@/app/api/runs/[id]/cancel/route";
import { getDb } from "@/lib/db";
import { gates } from "@/lib/db/schema";
import { decideFix } from "@/inngest/run/validate";
import type { RunFlow } from "@/inngest/run/flow";
import { eq } from "drizzle-orm";
import { expectRunConsistent, git, launch, newProject, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { ADMIN, call } from "../api/helpers";

/**
 * Item 4 of #35: a diff outside the approved plan's files is a change of the plan's scope, decided at the plan gate
 * (approve the wider scope / back to implementation / cancel) — no longer a finding for the fix gate.
 */

const h = useWorkflowHarness();

type Handler = Parameters<typeof call>[0];
async function decide(handler: Handler, runId: string, action: string, body: unknown) {
  const r = await call(handler, { method: "POST", path: `/api/runs/${runId}/${action}`, params: { id: runId }, headers: ADMIN, body });
  return { status: r.status, body: r.json as Record<string, unknown> };
}

// The demo implementer runs this command as a model's command would: it writes a file no task of the plan names.
const WIDENS = "Greeting\n[run: sh -c 'echo extra > extra.txt']";

async function gateKinds(runId: string) {
  const db = await getDb();
  return (await db.select().from(gates).where(eq(gates.workflowRunId, runId))).map((g) => g.kind);
}

describe("a change of scope goes back to the plan gate", () => {
  it("approving the wider scope validates again with it, and the run completes without a fix gate (planning: auto)", { timeout: 180_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, WIDENS, { trustMode: { planning: "auto", fixes: "manual" } });
    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("plan");
    expect(gate.context).toMatchObject({ scope: { files: ["extra.txt"], attempt: 1 }, version: 1, report: expect.stringContaining("outside the plan's scope") });
    // A scope decision is not a plan draft: no edited plan, no question to the planner.
    const plan = (gate.context as { plan: { mermaid: string } }).plan;
    expect((await decide(approveRoute, run.id, "approve", { gateId: gate.id, editedPlan: { mermaid: plan.mermaid } })).status).toBe(400);
    expect((await decide(askBackRoute, run.id, "ask-back", { gateId: gate.id, question: "Why?" })).status).toBe(409);
    expect((await decide(approveRoute, run.id, "approve", { gateId: gate.id, notes: "extra.txt may stay" })).status).toBe(200);

    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    const types = events.map((e) => e.type);
    expect(types.filter((t) => t === "VALIDATION_FAILED")).toHaveLength(1);
    expect(types.indexOf("VALIDATION_PASSED")).toBeGreaterThan(types.indexOf("APPROVAL_GRANTED"));
    expect(await gateKinds(run.id)).toEqual(["plan"]);
    expect(git(repo, "show", `${run.branch}:extra.txt`)).toBe("extra");
  });

  it("sent back to implementation, the out-of-scope files are taken back and the implementer told; done again, it is flagged again; the branch delivered has none of it", { timeout: 300_000 }, async () => {
    // An implementer that widens the scope twice, then keeps to the plan: its command counts its attempts in notes/n
    // (in the plan's scope through [scope:]) and writes extra.txt (outside it) in the first two.
    const AGAIN = "Greeting\n[scope: notes/]\n[run: sh -c 'n=$(cat notes/n 2>/dev/null || echo 0); mkdir -p notes; echo $((n+1)) > notes/n; test $n -lt 2 && echo extra > extra.txt; true']";
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, AGAIN, { trustMode: { planning: "auto", fixes: "manual" } });
    for (const attempt of [1, 2]) {
      await waitForStatus(run.id, ["awaiting_approval"], 120_000);
      const gate = await waitForPendingGate(run.id);
      // Attempt 2 writes extra.txt again, with the same content: still outside the plan, so flagged again.
      expect(gate.context).toMatchObject({ scope: { files: ["extra.txt"], attempt } });
      expect((await decide(rejectRoute, run.id, "reject", { gateId: gate.id, feedback: "Keep to the plan's files." })).status).toBe(200);
      await waitForStatus(run.id, ["running", "completed", "failed", "cancelled"], 60_000);
    }
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "cancelled"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);
    const started = events.filter((e) => e.type === "STAGE_STARTED" && (e.payload as { stage: string }).stage === "implementation");
    expect(started.map((e) => (e.payload as { attempt?: number }).attempt)).toEqual([1, 2, 3]);
    expect(events.map((e) => e.type).filter((t) => t.startsWith("VALIDATION_"))).toEqual(["VALIDATION_FAILED", "VALIDATION_FAILED", "VALIDATION_PASSED"]);
    // Each rejection took the files back in one commit on the run branch, recorded as an event.
    const reverted = events.filter((e) => e.type === "SCOPE_REVERTED").map((e) => e.payload as { files: string[]; commitSha: string; attempt: number });
    expect(reverted.map((r) => [r.files, r.attempt])).toEqual([[["extra.txt"], 1], [["extra.txt"], 2]]);
    for (const r of reverted) expect(git(repo, "show", "--name-status", "--format=%s", r.commitSha)).toMatch(/Out-of-scope changes taken back[\s\S]*D\textra\.txt/);
    expect(await gateKinds(run.id)).toEqual(["plan", "plan"]);
    // The change outside the plan is not delivered; the work in the plan's scope is.
    const delivered = git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n");
    expect(delivered).not.toContain("extra.txt");
    expect(git(repo, "show", `${run.branch}:notes/n`)).toBe("3");
  });

  it("the next attempt is told which files were taken back and why, with the person's notes", async () => {
    const verdict = { kind: "result" as const, passed: false, score: 10, feedback: "Revert the changes outside the plan's scope: extra.txt.", report: "", findings: [], now: 0, scopeRejected: { notes: "Keep to the plan's files.", reverted: ["extra.txt"] } };
    const flow = { config: { trustMode: { fixes: "manual" }, limits: { maxFixAttempts: 3 } } } as unknown as RunFlow;
    const next = await decideFix(flow, { attempt: 1, verdict, failure: null, budgetStopped: false });
    expect(next.accepted).toBe(false);
    const feedback = (next as { feedback: string }).feedback;
    expect(feedback).toContain("Taken back: extra.txt");
    expect(feedback).toContain("outside the approved plan's files");
    expect(feedback).toContain("Reviewer: Keep to the plan's files.");
  });

  it("cancelled at the scope gate, the run ends cancelled", { timeout: 180_000 }, async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, WIDENS, { trustMode: { planning: "auto", fixes: "manual" } });
    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.context).toMatchObject({ scope: { files: ["extra.txt"] } });
    expect((await decide(cancelRoute, run.id, "cancel", {})).status).toBe(200);
    expect((await waitForStatus(run.id, ["cancelled", "failed", "completed"], 60_000)).status).toBe("cancelled");
    await waitForWorkflow(run.id);
    await expectRunConsistent(run.id);
    expect(await gateKinds(run.id)).toEqual(["plan"]);
  });
});
