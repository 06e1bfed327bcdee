import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { clarificationRequests } from "@/lib/db/schema";
import { decisionKey } from "@/lib/runs/gates/acks";
import { answerClarification } from "@/lib/runs/gates/decide-clarification";
import { announceDecision } from "@/inngest/announce";
import { clarificationAnswered } from "@/inngest/events";
import { autoPlanning, expectRunConsistent, git, launch, newProject, processesRunning, tasksRequest, until, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";
import { type RunEvent, eventsOf, heldUntilRef, seqOf, taskOf } from "./parallel-fixtures";

/**
 * Issue #31, item 2: "a question from one task does not stop the others" — nor does another task's work hold up the
 * question or its answer. Task T3 asks while task T2's command runs; the answer resumes T3 at once, and T3 completes
 * while T2's command still runs. The order is forced by the test, never by timing: each held command runs until the
 * test creates its ref in the repository, which it does only once it has seen what must come first. The timeouts are
 * failsafes only. Through the real workflow on the embedded executor, in strict cloud mode.
 *
 * Before the fix this caught, a task's own step.sendEvent (the question's notification) was an ordinary step among
 * the other tasks' race-mode steps: Inngest calls a run again after such a step only once no other step is pending,
 * so the asking task stood still — its wait for the answer not even stored — until T2's command ended.
 */

const h = useWorkflowHarness();

describe("a question in one parallel task while another task's command runs", () => {
  it("is asked, and its answer resumes the asking task at once: it completes while the other task's command still runs", { timeout: 300_000 }, async () => {
    // Limit 2: lanes [T1, T3] and [T2]. T1 is held until T2's command runs, so T3 (the plan's last task, which asks the
    // request's question in the demo) begins, and asks, while T2's command runs. T2's command is held until T3 is done.
    const goT1 = "refs/question-test/t1";
    const goT2 = "refs/question-test/t2";
    const napT1 = "0.1061";
    const napT2 = "0.1062";
    const tasks = [
      "# Ask while another works",
      "- [ ] T1: Write alpha",
      "  Files: alpha.txt",
      `  [run: ${heldUntilRef(goT1, "alpha.txt", 120, napT1)}]`,
      "- [ ] T2: Write beta",
      "  Files: beta.txt",
      `  [run: ${heldUntilRef(goT2, "beta.txt", 240, napT2)}]`,
      "- [ ] T3: Write gamma",
      "  Files: gamma.txt",
      "",
    ].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Ask while another works [ask: Which greeting? | Hello | Hi]", tasks), {
      ...autoPlanning,
      limits: { maxConcurrentTasks: 2 },
    });

    await until(async () => processesRunning(["sleep", napT2]).length > 0, "T2's command to run", 120_000);
    git(repo, "update-ref", goT1, "HEAD");
    // T3 asks while T2's command runs.
    await waitForStatus(run.id, ["awaiting_clarification"], 150_000);
    let events = await eventsOf(run.id);
    expect(taskOf(events.find((e) => e.type === "CLARIFICATION_REQUESTED")!)).toBe("T3");
    expect(seqOf(events, "TASK_COMPLETED", "T2")).toBe(-1);
    const db = await getDb();
    const [question] = await db.select().from(clarificationRequests).where(eq(clarificationRequests.workflowRunId, run.id));
    expect(question).toMatchObject({ question: "Which greeting?", status: "pending" });
    await answerClarification({ user: h.user, clarificationId: question!.id, response: "Hi" });
    await announceDecision({ event: clarificationAnswered.create({ runId: run.id, clarificationId: question!.id }), key: decisionKey.clarification(question!.id) });

    // T3 resumes and completes — T2's command is still held.
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T3"), "T3 to complete while T2's command still runs", 180_000);
    expect((await eventsOf(run.id)).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T2")).toBe(false);
    git(repo, "update-ref", goT2, "HEAD");

    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval", "awaiting_clarification"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    events = (await expectRunConsistent(run.id)) as RunEvent[];
    // From the run's record: T3 began after T1 completed (T1's lane), asked, was answered and completed; T2 completed
    // only after that — its command released by the test, not given up on.
    const asked = events.find((e) => e.type === "CLARIFICATION_REQUESTED")!;
    expect((asked.payload as { stepKey: string }).stepKey).toMatch(/^impl:1:task:T3:1:turn:\d+:q:ask/);
    expect(seqOf(events, "TASK_COMPLETED", "T1")).toBeLessThan(seqOf(events, "TASK_BRANCH_CREATED", "T3"));
    const answered = seqOf(events, "CLARIFICATION_ANSWERED");
    expect(asked.sequence).toBeLessThan(answered);
    expect(answered).toBeLessThan(seqOf(events, "TASK_COMPLETED", "T3"));
    expect(seqOf(events, "TASK_COMPLETED", "T3")).toBeLessThan(seqOf(events, "TASK_COMPLETED", "T2"));
    expect(git(repo, "show", `${run.branch}:alpha.txt`)).toBe("T1: Write alpha\nreleased");
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta\nreleased");
    expect(events.filter((e) => e.type === "CLARIFICATION_REQUESTED")).toHaveLength(1);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2", "T3"]);
  });
});
