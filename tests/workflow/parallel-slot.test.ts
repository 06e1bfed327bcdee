import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { clarificationRequests } from "@/lib/db/schema";
import { listEvents } from "@/lib/db/event-store";
import { decisionKey, waitCheckHooks } from "@/lib/runs/gates/acks";
import { answerClarification } from "@/lib/runs/gates/decide-clarification";
import { announceDecision } from "@/inngest/announce";
import { clarificationAnswered } from "@/inngest/events";
import { autoPlanning, expectRunConsistent, git, launch, newProject, startWorkflowHarness, tasksRequest, until, waitForStatus, waitForWorkflow } from "./harness";
import { type RunEvent, taskOf } from "./parallel-fixtures";

/**
 * Issue #31, item 4: "A run holds one slot of its person's concurrency limit, however many tasks run." While one of
 * its parallel tasks waits for a person, the others compute on: the run keeps its slot, so a run that may compute only
 * alone (limits.maxConcurrency 1) stays queued until the first run has nothing computing.
 */

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  h = await startWorkflowHarness();
});
afterAll(async () => {
  waitCheckHooks.afterPending = undefined;
  await h.close();
});

type Ev = RunEvent & { timestamp: number };

describe("a run of parallel tasks and its user's concurrency limit", () => {
  it("keeps its one slot while a task waits for a person and another computes: a run limited to computing alone stays queued", { timeout: 240_000 }, async () => {
    // T1's command is held until the test releases it; T2 asks the request's question meanwhile.
    const go = "refs/slot-test/go";
    const wait = `n=0; until git rev-parse -q --verify ${go} >/dev/null || test $n -ge 900; do sleep 0.1; n=$((n+1)); done; echo released >> alpha.txt`;
    const tasks = ["# Slot", "- [ ] T1: Write alpha", "  Files: alpha.txt", `  [run: ${wait}]`, "- [ ] T2: Write beta", "  Files: beta.txt", ""].join("\n");
    const { project, repo } = await newProject(h.user);
    const first = await launch(h.user, project.id, tasksRequest("One slot [ask: Which greeting? | Hello | Hi]", tasks), {
      ...autoPlanning,
      limits: { maxConcurrentTasks: 3 },
    });
    await waitForStatus(first.id, ["awaiting_clarification"], 120_000);
    expect(((await listEvents({ runId: first.id, limit: 1000 })) as Ev[]).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T1")).toBe(false);

    // A run that computes only while nothing else of its user does: it finds no free slot.
    const queued = new Set<string>();
    waitCheckHooks.afterPending = async ({ runId, key }) => {
      if (key === "slot") queued.add(runId);
    };
    const second = await launch(h.user, project.id, "Run me alone", { trustMode: { planning: "auto" }, limits: { maxConcurrency: 1 } });
    const outcome = await until(
      async () => (queued.has(second.id) ? "queued" : ((await listEvents({ runId: second.id })) as Ev[]).some((e) => e.type === "RUN_STARTED") ? "started" : null),
      "the second run to start or to find no free slot",
      60_000,
    );
    expect(outcome).toBe("queued");

    // The first run goes on: T1 released, the question answered; once it completes, the second run starts.
    git(repo, "update-ref", go, "HEAD");
    const db = await getDb();
    const [question] = await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, first.id));
    await answerClarification({ user: h.user, clarificationId: question!.id, response: "Hi" });
    await announceDecision({ event: clarificationAnswered.create({ runId: first.id, clarificationId: question!.id }), key: decisionKey.clarification(question!.id) });
    expect((await waitForStatus(first.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    expect((await waitForStatus(second.id, ["completed", "failed"], 120_000)).status).toBe("completed");
    await waitForWorkflow(first.id);
    await waitForWorkflow(second.id);
    const a = (await expectRunConsistent(first.id)) as Ev[];
    const b = (await expectRunConsistent(second.id)) as Ev[];
    const t1Done = a.find((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T1")!.timestamp;
    expect(b.find((e) => e.type === "RUN_STARTED")!.timestamp).toBeGreaterThanOrEqual(t1Done);
  });
});
