import { describe, expect, it } from "vitest";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { decisionKey } from "@/lib/runs/gates/acks";
import { announceDecision } from "@/inngest/announce";
import { gateDecided } from "@/inngest/events";
import { autoPlanning, expectRunConsistent, git, launch, newProject, processesRunning, tasksRequest, until, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { type RunEvent, eventsOf, taskOf } from "./parallel-fixtures";

/**
 * Issue #31, item 2: "policy gates … work inside a task as they do today; [a wait for a person in] one task does not stop
 * the others." T1 writes a protected path (a policy gate, opened by T1); T2 works on, and completes, while the gate
 * waits. Ordered by a ref the test creates, not by timing. Through the real workflow on the embedded executor, in strict
 * cloud mode.
 */

const h = useWorkflowHarness();

describe("a policy gate in one parallel task", () => {
  it("is opened by that task with the exact action; the other task works on and completes while it waits; approved, the write lands once", { timeout: 240_000 }, async () => {
    const go = "refs/policy-test/go";
    const nap = "0.1071";
    const wait = `n=0; until git rev-parse -q --verify ${go} >/dev/null || test $n -ge 1200; do sleep ${nap}; n=$((n+1)); done; if git rev-parse -q --verify ${go} >/dev/null; then echo released; else echo gave-up; fi >> beta.txt`;
    const tasks = ["# Policy in a task", "- [ ] T1: Write CI", "  Files: .github/workflows/ci.yml", "- [ ] T2: Write beta", "  Files: beta.txt", `  [run: ${wait}]`, ""].join("\n");
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Policy in a task", tasks), autoPlanning);

    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("policy");
    expect(gate.context).toMatchObject({ action: { tool: "write_file", summary: ".github/workflows/ci.yml" }, reason: expect.stringMatching(/protected path \(\.github\/\*\*\)/) });
    const requested = (await eventsOf(run.id)).find((e) => e.type === "APPROVAL_REQUESTED")!;
    expect(taskOf(requested)).toBe("T1");

    // T2 computes while T1's gate waits: its command runs, and once released it completes — the gate still pending.
    await until(async () => processesRunning(["sleep", nap]).length > 0, "T2's command to run", 120_000);
    git(repo, "update-ref", go, "HEAD");
    await until(async () => (await eventsOf(run.id)).some((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T2"), "T2 to complete while T1's gate waits", 120_000);
    expect((await waitForPendingGate(run.id)).id).toBe(gate.id);

    await approveGate({ user: h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = (await expectRunConsistent(run.id)) as RunEvent[];
    expect(events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind: string }).kind)).toEqual(["policy"]);
    const granted = events.find((e) => e.type === "APPROVAL_GRANTED")!.sequence;
    expect(events.find((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T2")!.sequence).toBeLessThan(granted);
    expect(events.find((e) => e.type === "TASK_COMPLETED" && taskOf(e) === "T1")!.sequence).toBeGreaterThan(granted);
    expect(events.filter((e) => e.type === "TASK_MERGED").map(taskOf)).toEqual(["T1", "T2"]);
    expect(git(repo, "show", `${run.branch}:.github/workflows/ci.yml`)).toBe("T1: Write CI");
    expect(git(repo, "show", `${run.branch}:beta.txt`)).toBe("T2: Write beta\nreleased");
  });
});
