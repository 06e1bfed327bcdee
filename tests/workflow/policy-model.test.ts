import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createProject } from "@/lib/projects/queries";
import { approveGate } from "@/lib/runs/gates/decide-gate";
import { gateDecided } from "@/inngest/events";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";
import { expectRunConsistent, git, launch, makeRepo, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { useScriptedWorkflow } from "./model-server";

/**
 * The policy meets a model's real tool calls (an OpenAI-compatible server scripted per turn), not only the demo model:
 * a delete outside the plan's scope waits for a person, and a denied command is refused and recorded.
 */

const t = useScriptedWorkflow();
const SCRIPTED = { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" };

describe("the policy on a model's tool calls", () => {
  it("rm -rf outside the scope opens a gate before it runs; approved, the repeated call runs once; a denied command is refused", { timeout: 180_000 }, async () => {
    const repo = makeRepo();
    fs.mkdirSync(path.join(repo, "old"));
    fs.writeFileSync(path.join(repo, "old", "x.txt"), "old\n");
    git(repo, "add", ".");
    git(repo, "commit", "-q", "-m", "old");
    const project = await createProject({
      name: "policy-model",
      ownerId: t.h.user.id,
      repository: { type: "local", path: repo },
      defaultConfig: { policy: { commands: { deny: ["curl"] } } },
    });
    const seen: string[] = [];
    t.model.respond((body) => {
      const turn = (body.messages ?? []).filter((m) => m.role === "assistant" && m.tool_calls?.length).length;
      seen.push(JSON.stringify(body.messages ?? []));
      const rm = { name: "run_command", arguments: { command: "rm", args: ["-rf", "old"] } };
      if (turn === 0) return { toolCalls: [{ name: "update_todo", arguments: { id: "T1", status: "in_progress" } }, rm] };
      if (turn === 1) return { toolCalls: [rm] };
      if (turn === 2) return { toolCalls: [{ name: "run_command", arguments: { command: "curl", args: ["https://example.com"] } }] };
      if (turn === 3) {
        return {
          toolCalls: [
            { name: "write_file", arguments: { path: "docs/requests/remove-old.md", content: "# Remove old\n" } },
            { name: "update_todo", arguments: { id: "T1", status: "done" } },
          ],
        };
      }
      return { text: "Removed old/." };
    });
    const run = await launch(t.h.user, project.id, "Remove old", { trustMode: { planning: "auto", fixes: "manual" }, modelRouting: SCRIPTED });

    await waitForStatus(run.id, ["awaiting_approval"], 120_000);
    const gate = await waitForPendingGate(run.id);
    expect(gate.kind).toBe("policy");
    expect(gate.context).toMatchObject({ action: { tool: "run_command", summary: "rm -rf old", paths: ["old"] }, reason: expect.stringMatching(/deletes old, outside the plan's scope/) });
    // The turn ended at the held call: no further model call while the person decides.
    expect(seen).toHaveLength(1);
    await approveGate({ user: t.h.user, runId: run.id, input: { gateId: gate.id } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });

    // The approved delete is the person's decision: validation counts what it removed as in scope.
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    // The model was told: the first call held, the approval, and the deny-list refusal as the curl call's error.
    expect(seen[1]).toContain("Needs a person's approval first");
    expect(seen[1]).toMatch(/approved: rm -rf old \(run_command\)/);
    expect(seen[3]).toContain("deny list");
    const files = git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n");
    expect(files).not.toContain("old/x.txt");
    expect(files).toContain("docs/requests/remove-old.md");
    const events = await expectRunConsistent(run.id);
    expect(events.filter((e) => e.type === "APPROVAL_REQUESTED").map((e) => (e.payload as { kind: string }).kind)).toEqual(["policy"]);
    expect(events.filter((e) => e.type === "POLICY_REFUSED").map((e) => e.payload)).toMatchObject([{ tool: "run_command", summary: "curl https://example.com" }]);
  });
});
