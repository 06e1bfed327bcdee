import { describe, expect, it } from "vitest";
import { listEvents } from "@/lib/db/event-store";
import { createProject } from "@/lib/projects/queries";
import { approveGate, rejectGate } from "@/lib/runs/gates/decide-gate";
import { gateDecided } from "@/inngest/events";
import { autoPlanning, expectRunConsistent, git, launch, makeRepo, newProject, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";

/** The policy for risky actions, through the real workflow: the demo model's tool calls meet it like a model's would. */

const h = useWorkflowHarness();

describe("risky actions wait for a person", () => {
  it("a protected path and a recursive delete each open a policy gate with the exact action; approved runs once, refused never", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const request = [
      "Add CI and tidy up",
      "",
      "```file:.github/workflows/ci.yml",
      "on: push",
      "```",
      // The plan names the file the command writes (a file written outside the plan would go to a plan gate about
      // scope, #35 item 4, which this test is not about); deleting the whole folder still reaches outside it.
      "[scope: old/x.txt]",
      "[run: sh -c 'mkdir -p old && echo keep > old/x.txt']",
      "[run: rm -r old]",
    ].join("\n");
    const run = await launch(h.user, project.id, request, autoPlanning);

    await waitForStatus(run.id, ["awaiting_approval"]);
    const first = await waitForPendingGate(run.id);
    expect(first.kind).toBe("policy");
    expect(first.context).toMatchObject({ action: { tool: "write_file", summary: ".github/workflows/ci.yml" }, reason: expect.stringMatching(/protected path \(\.github\/\*\*\)/) });
    await approveGate({ user: h.user, runId: run.id, input: { gateId: first.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: first.id, decision: "approve" }), key: decisionKey.gate(first.id) });

    await waitForStatus(run.id, ["awaiting_approval"]);
    const second = await waitForPendingGate(run.id);
    expect(second.id).not.toBe(first.id);
    expect(second.context).toMatchObject({ action: { tool: "run_command", summary: "rm -r old" }, reason: expect.stringMatching(/^The command deletes old, outside the plan's scope/) });
    await rejectGate({ user: h.user, runId: run.id, input: { gateId: second.id, feedback: "Keep the old folder." } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: second.id, decision: "reject" }), key: decisionKey.gate(second.id) });

    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    // Approved: written once. Refused: never run — the folder it would have deleted is on the branch.
    expect(git(repo, "show", `${run.branch}:.github/workflows/ci.yml`)).toBe("on: push");
    expect(git(repo, "show", `${run.branch}:old/x.txt`)).toBe("keep");
    const events = await expectRunConsistent(run.id);
    const kinds = events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind: string }).kind);
    expect(kinds).toEqual(["policy", "policy"]);
    expect(events.filter((e) => e.type === "APPROVAL_GRANTED")).toHaveLength(1);
    expect(events.find((e) => e.type === "APPROVAL_REJECTED")?.payload).toMatchObject({ feedback: "Keep the old folder." });
  });

  it("a command on the project's deny list is refused without a gate, and never runs", { timeout: 120_000 }, async () => {
    const repo = makeRepo();
    const project = await createProject({
      name: "deny",
      ownerId: h.user.id,
      repository: { type: "local", path: repo },
      defaultConfig: { policy: { commands: { deny: ["touch"] } } },
    });
    const run = await launch(h.user, project.id, "Try a denied command\n[run: touch denied.txt]", autoPlanning);
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    expect(git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n")).not.toContain("denied.txt");
    const events = await listEvents({ runId: run.id });
    expect(events.some((e) => e.type === "APPROVAL_REQUESTED")).toBe(false);
    expect(events.filter((e) => e.type === "POLICY_REFUSED").map((e) => e.payload)).toEqual([
      { stepKey: expect.any(String), tool: "run_command", summary: "touch denied.txt", reason: expect.stringMatching(/`touch` is on this project's deny list/) },
    ]);
  });

  it("an rm -rf outside the plan's scope is gated (approved once, refused once); inside the scope it runs without a gate", { timeout: 180_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const request = [
      "Clean up build leftovers",
      "[scope: tmp/]",
      // old2/x is kept (its delete refused), so the plan names it: not a change of scope (#35 item 4); deleting the
      // folder old2 still reaches outside the plan's scope.
      "[scope: old2/x]",
      "[run: mkdir -p tmp/cache old1 old2 && echo x > tmp/cache/y && echo k > old1/x && echo k > old2/x]",
      "[run: rm -rf tmp/cache]",
      "[run: rm -rf old1]",
      "[run: rm -rf old2]",
    ].join("\n");
    const run = await launch(h.user, project.id, request, autoPlanning);

    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const first = await waitForPendingGate(run.id);
    expect(first.context).toMatchObject({
      action: { tool: "run_command", summary: "rm -rf old1" },
      reason: expect.stringMatching(/^The command deletes old1, outside the plan's scope \(.*tmp\/, old2\/x\)/),
    });
    await approveGate({ user: h.user, runId: run.id, input: { gateId: first.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: first.id, decision: "approve" }), key: decisionKey.gate(first.id) });

    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const second = await waitForPendingGate(run.id);
    expect(second.id).not.toBe(first.id);
    expect(second.context).toMatchObject({ action: { tool: "run_command", summary: "rm -rf old2" } });
    await rejectGate({ user: h.user, runId: run.id, input: { gateId: second.id, feedback: "old2 stays." } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: second.id, decision: "reject" }), key: decisionKey.gate(second.id) });

    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const files = git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n");
    expect(files).not.toContain("tmp/cache/y"); // inside the scope: deleted without asking
    expect(files).not.toContain("old1/x"); // approved: deleted, once
    expect(files).toContain("old2/x"); // refused: never deleted
    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "APPROVAL_REQUESTED")).toHaveLength(2);
  });

  it("a command that creates one file past policy.maxFilesPerRun is refused, its file undone, and the refusal recorded", { timeout: 120_000 }, async () => {
    const repo = makeRepo();
    const project = await createProject({
      name: "cap",
      ownerId: h.user.id,
      repository: { type: "local", path: repo },
      defaultConfig: { policy: { maxFilesPerRun: 2 } },
    });
    // a.txt (task T1) and the request note (T2) are the run's two files; the command's extra.txt would be a third.
    const request = ["Cap the files", "```file:a.txt", "a", "```", "[run: echo x > extra.txt]"].join("\n");
    const run = await launch(h.user, project.id, request, autoPlanning);
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_approval", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const files = git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n");
    expect(files).toContain("a.txt");
    expect(files).not.toContain("extra.txt");
    const events = await expectRunConsistent(run.id);
    const refused = events.filter((e) => e.type === "POLICY_REFUSED");
    expect(refused.map((e) => e.payload)).toEqual([
      { stepKey: expect.any(String), tool: "run_command", summary: "sh -c echo x > extra.txt", reason: expect.stringMatching(/at most 2 files \(policy\.maxFilesPerRun\); extra\.txt would make 3/) },
    ]);
  });
});
