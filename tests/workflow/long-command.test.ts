import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelRun } from "@/lib/runs/gates/decide-run";
import { inngest } from "@/inngest";
import { runCancelled } from "@/inngest/events";
import { query } from "@/lib/executor/store";
import { listEvents } from "@/lib/db/event-store";
import { stepBudget } from "@/lib/runs/steps/context";
import { fileBlock, git, launch, newProject, processesRunning, startWorkflowHarness, until, waitForStatus, waitForWorkflow } from "./harness";

/*
 * A serverless host cuts a call after its duration limit. With a step budget of 2 s, a 5-second command cannot finish
 * inside the implementer turn that starts it: it runs on detached in the sandbox, later steps look at it (each within the
 * budget, a durable sleep between them), and its result joins the conversation as an inline command's would.
 */

let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
const budget = stepBudget.ms;
beforeAll(async () => {
  stepBudget.ms = () => 2000;
  h = await startWorkflowHarness();
});
afterAll(async () => {
  stepBudget.ms = budget;
  await h.close();
});

type Part = { type: string; toolName?: string; output?: { type: string; value: unknown } };

describe("a command longer than a step", () => {
  it("runs once, detached, across several steps; its output reaches the conversation and the run completes", { timeout: 120_000 }, async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(
      h.user,
      project.id,
      `Slow build\n${fileBlock("out.txt", "x")}\n[run: sleep 5 && echo ran >> out.txt && echo done]`,
      { trustMode: { planning: "auto" } },
    );
    expect((await waitForStatus(run.id, ["completed", "failed"], 90_000)).status).toBe("completed");
    await waitForWorkflow(run.id, 60_000);

    // Exactly once: the command appended one line (to a file of the plan's scope), and the final checkpoint committed it.
    expect(git(repo, "show", `${run.branch}:out.txt`).split("\n").filter((l) => l === "ran")).toHaveLength(1);

    // Its result is in the conversation once, as run_command's JSON result, with no placeholder left.
    const chunks = await query<{ messages: string }>("SELECT messages FROM implementer_chunks WHERE workflow_run_id = ?", [run.id]);
    const text = chunks.map((c) => c.messages).join("\n");
    expect(text).not.toContain("__gatehouse_command_pending__");
    const results = chunks
      .flatMap((c) => JSON.parse(c.messages) as Array<{ role: string; content: unknown }>)
      .filter((m) => m.role === "tool")
      .flatMap((m) => m.content as Part[])
      .filter((p) => p.type === "tool-result" && p.toolName === "run_command");
    expect(results).toHaveLength(1);
    expect(results[0]!.output).toEqual({ type: "json", value: { exitCode: 0, timedOut: false, stdout: "done\n", stderr: "" } });

    // Several steps: the turn that started it ended with the command running, and at least one look found it running.
    const [wf] = await query<{ id: string }>(
      "SELECT id FROM executor_runs WHERE fn_id LIKE '%-run-workflow' AND json_extract(event, '$.data.runId') = ?",
      [run.id],
    );
    const [counts] = await query<{ started: number; running: number }>(
      `SELECT sum(result LIKE '%"kind":"command_running"%') AS started, sum(result LIKE '%"kind":"running"%') AS running
         FROM executor_steps WHERE run_id = ?`,
      [wf!.id],
    );
    expect(Number(counts!.started)).toBe(1);
    expect(Number(counts!.running)).toBeGreaterThanOrEqual(1);
    expect((await listEvents({ runId: run.id, limit: 100_000 })).map((e) => e.type)).toContain("IMPLEMENTATION_SUCCEEDED");
  });

  it("a cancel while the workflow waits between looks kills the detached command", { timeout: 120_000 }, async () => {
    const sleeper = ["sleep", "491.5"];
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Slow\n${fileBlock("out.txt", "x")}\n[run: ${sleeper.join(" ")}]`, { trustMode: { planning: "auto" } });
    await until(async () => processesRunning(sleeper).length > 0, "the command to start");
    const [wf] = await query<{ id: string }>(
      "SELECT id FROM executor_runs WHERE fn_id LIKE '%-run-workflow' AND json_extract(event, '$.data.runId') = ?",
      [run.id],
    );
    // Cancelled only once the turn is over and a later step has looked at the command (it still runs, detached).
    await until(
      async () => Number((await query<{ n: number }>(`SELECT count(*) AS n FROM executor_steps WHERE run_id = ? AND result LIKE '%"kind":"running"%'`, [wf!.id]))[0]!.n) > 0,
      "a look at the running command",
    );
    await cancelRun({ user: h.user, runId: run.id });
    await inngest.send(runCancelled.create({ runId: run.id }));
    await waitForStatus(run.id, ["cancelled"]);
    await until(async () => processesRunning(sleeper).length === 0, "the command to be killed");
  });
});
