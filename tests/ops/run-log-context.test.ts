import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createProject } from "@/lib/projects/queries";
import { log, withLogContext } from "@/lib/log";
import { executorLog } from "@/inngest/log-context";
import { fileBlock, launch, startWorkflowHarness, waitForStatus, waitForWorkflow } from "../workflow/harness";
import type { GitHubEmulator } from "../github/emulator";
import { configureGitHub } from "../github/setup-github";

/*
 * Log lines written while a run's steps execute carry the run's id without the code that writes them passing it: the
 * Inngest middleware (inngest/log-context.ts) puts { runId, fn } in the log context of every function call and step.
 * The probe is a line deep in a library that knows nothing of runs: the GitHub client's "retrying" warning, provoked by
 * a 502 from the GitHub emulator in the middle of two concurrent runs' deliveries.
 */

let gh: GitHubEmulator;
let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
const lines: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  ({ emulator: gh } = await configureGitHub());
  h = await startWorkflowHarness();
  for (const method of ["log", "warn", "error"] as const) {
    const original = console[method].bind(console);
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
      const text = String(args[0]);
      if (text.startsWith("{")) lines.push(JSON.parse(text) as Record<string, unknown>);
      else original(...args);
    });
  }
});
afterAll(async () => {
  vi.restoreAllMocks();
  await h.close();
  await gh.close();
});

describe("structured logs carry the run id", () => {
  it("a warning written by the GitHub client during two runs' deliveries names the run it belongs to", { timeout: 120_000 }, async () => {
    const runs = [];
    for (const name of ["logs-one", "logs-two"]) {
      gh.addRepository({ owner: "acme", name });
      const project = await createProject({ name, ownerId: h.user.id, repository: { type: "github", owner: "acme", repo: name } });
      // Each repository's first pull-request creation fails once with a 502: the client logs a warning and retries.
      gh.fail(new RegExp(`^POST /repos/acme/${name}/pulls$`), 1, 502);
      runs.push({ name, run: await launch(h.user, project.id, `Log me\n\n${fileBlock("src/log.txt", name)}`, { trustMode: { planning: "auto" } }) });
    }
    for (const { run } of runs) {
      expect((await waitForStatus(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
      expect(await waitForWorkflow(run.id)).toBe("completed");
    }
    // The route is Octokit's template (no repository in it): only the log context tells which run each retry served.
    const retries = lines.filter((l) => l.msg === "github request failed; retrying" && l.route === "POST /repos/{owner}/{repo}/pulls");
    expect(retries).toHaveLength(2);
    for (const { name, run } of runs) {
      const mine = retries.filter((l) => l.runId === run.id);
      expect(mine, `the retry warning of ${name}`).toHaveLength(1);
      expect(mine[0]).toMatchObject({ level: "warn", fn: "run-workflow", status: 502 });
    }
  });

  it("a line written outside any run has no run id; nested contexts add fields", () => {
    lines.length = 0;
    log.warn("outside");
    withLogContext({ requestId: "req-1" }, () => withLogContext({ runId: "run-1" }, () => log.warn("inside")));
    expect(lines[0]).not.toHaveProperty("runId");
    expect(lines[1]).toMatchObject({ msg: "inside", requestId: "req-1", runId: "run-1" });
  });

  it("the embedded executor's lines are JSON lines through lib/log.ts, inside a run's context when there is one", () => {
    lines.length = 0;
    withLogContext({ runId: "run-2" }, () => executorLog("error", "driving run x failed", new Error("boom")));
    expect(lines[0]).toMatchObject({ level: "error", msg: "executor: driving run x failed", detail: "boom", runId: "run-2" });
  });
});
