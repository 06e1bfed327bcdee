import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadTasks, runEval, summarize } from "@/scripts/eval/run";

/** `npm run eval` with the demo model: the committed task set through the real workflow, offline. */

const DEMO = { planner: "demo:default", implementer: "demo:default", validator: "demo:default" };

describe("npm run eval (demo model)", () => {
  it("runs every committed task through the real workflow and scores it by its hidden check", { timeout: 300_000 }, async () => {
    const tasks = loadTasks();
    expect(tasks.map((t) => t.id)).toEqual(["add-config", "add-greeting", "fix-sum"]);
    const results = await runEval({ tasks, routing: DEMO, timeoutMs: 120_000 });
    const byTask = Object.fromEntries(results.map((r) => [r.task, r]));
    // The demo model writes the files its request carries: it solves the two tasks that give it a solution...
    expect(byTask["add-greeting"]).toMatchObject({ status: "completed", solved: true, interventions: 0 });
    // ...where fix-sum's question is one intervention the harness decides ("proceed with your best judgement").
    expect(byTask["fix-sum"]).toMatchObject({ status: "completed", solved: true, interventions: 1 });
    // It cannot do the third (it writes only a note): the run completes, the hidden check says it is not solved.
    expect(byTask["add-config"]).toMatchObject({ status: "completed", solved: false });
    expect(byTask["add-config"]!.checkOutput).toContain("expected 8080");
    for (const r of results) {
      expect(r.modelCalls).toBeGreaterThanOrEqual(3);
      expect(r.tokens).toBeGreaterThan(0);
    }
    expect(summarize(results)).toMatchObject({ tasks: 3, solved: 2, interventions: 1 });
    expect(summarize(results).passRate).toBeCloseTo(2 / 3);
  });

  it("refuses a malformed task file, naming the file and the field", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gh-eval-tasks-"));
    fs.writeFileSync(path.join(dir, "bad.json"), JSON.stringify({ id: "bad", description: "x", files: {}, request: "" , check: "true" }));
    expect(() => loadTasks(dir)).toThrow(/bad\.json: request/);
    expect(() => loadTasks(path.join(import.meta.dirname, "../../scripts/eval/tasks"), ["nope"])).toThrow(/No such eval task: nope/);
  });
});
