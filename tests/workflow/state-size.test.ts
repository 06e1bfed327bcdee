import { describe, expect, it } from "vitest";
import { query } from "@/lib/executor/store";
import { listEvents } from "@/lib/db/event-store";
import { expectRunConsistent, fileBlock, launch, newProject, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";

/*
 * Inngest Cloud caps a step's output at 4 MB and a run's state at 32 MB. The implementer's conversation is kept out of
 * the steps' results (lib/runs/conversation.ts), so a long implementation stays far below both. Here 58 commands with
 * ~24 KB of output each make a 60+-turn implementation with a ~1.5 MB conversation: with the whole conversation in
 * every turn's result, the run's state would be ~45 MB (it grows with the square of the turns).
 */

const h = useWorkflowHarness();

const MB = 1024 * 1024;
const COMMANDS = 58;

describe("a long implementation within Inngest Cloud's state limits", () => {
  it("60+ turns: every step's output under 4 MB and the run's state under 32 MB", { timeout: 300_000 }, async () => {
    const { project } = await newProject(h.user);
    // Distinct commands (identical ones would be a loop); each fills both stdout and stderr past the 12,000-character tail.
    const runs = Array.from({ length: COMMANDS }, (_, i) => `[run: seq ${i} 30000; seq ${i} 30000 >&2]`).join("\n");
    const run = await launch(h.user, project.id, `Long session\n${fileBlock("out.txt", "x")}\n${runs}`, {
      trustMode: { planning: "auto" },
      limits: { maxIterations: 100 },
    });
    expect((await waitForStatus(run.id, ["completed", "failed"], 240_000)).status).toBe("completed");
    await waitForWorkflow(run.id, 60_000);

    const [wf] = await query<{ id: string }>(
      "SELECT id FROM executor_runs WHERE fn_id LIKE '%-run-workflow' AND json_extract(event, '$.data.runId') = ?",
      [run.id],
    );
    const [state] = await query<{ steps: number; largest: number; total: number; turns: number }>(
      `SELECT count(*) AS steps, max(length(result)) AS largest, sum(length(result)) AS total,
              (SELECT count(*) FROM implementer_chunks WHERE workflow_run_id = ?2) AS turns
         FROM executor_steps WHERE run_id = ?1`,
      [wf!.id, run.id],
    );
    const [conversation] = await query<{ bytes: number }>("SELECT sum(length(messages)) AS bytes FROM implementer_chunks WHERE workflow_run_id = ?", [
      run.id,
    ]);
    const largest = Number(state!.largest);
    const total = Number(state!.total);
    console.log(
      `[state-size] ${state!.turns} implementer turns, ${state!.steps} stored steps: largest step ${(largest / 1024).toFixed(1)} KiB, ` +
        `run state ${(total / 1024).toFixed(1)} KiB; conversation kept outside the steps ${(Number(conversation!.bytes) / 1024).toFixed(1)} KiB`,
    );
    // The implementation really was long, and its conversation large.
    expect(Number(state!.turns)).toBeGreaterThanOrEqual(60);
    expect(Number(conversation!.bytes)).toBeGreaterThan(1.2 * MB);
    expect((await listEvents({ runId: run.id, limit: 100_000 })).map((e) => e.type)).toContain("IMPLEMENTATION_SUCCEEDED");
    expect(largest).toBeLessThan(4 * MB);
    expect(total).toBeLessThan(32 * MB);
    // No turn's result holds the conversation: even the largest is far below what was said.
    expect(largest).toBeLessThan(Number(conversation!.bytes) / 10);
    await expectRunConsistent(run.id);
  });
});
