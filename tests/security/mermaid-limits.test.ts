import { afterEach, describe, expect, it, vi } from "vitest";
import * as validateRoute from "@/app/api/mermaid/validate/route";
import * as healthRoute from "@/app/api/health/route";
import { runPlanner } from "@/lib/agents/planner";
import { createScriptedModel, promptText } from "@/lib/ai/scripted-model";
import { DIAGRAM_LIMITS, validateMermaid } from "@/lib/mermaid";
import { MermaidWorker, ParseTimeout } from "@/lib/mermaid/worker";
import { checkEditedPlan } from "@/lib/runs/gates/edited-plan";
import { ADMIN, ORIGIN, call } from "../api/helpers";

/**
 * Issue #29, finding 2: one Mermaid request stalled the server (12,000 `<b>` tags in a label: 58 s, during which
 * /api/health took 56 s). Diagrams over the limits are refused before any parse; what is parsed runs on a worker
 * thread with a time limit, and the event loop keeps turning meanwhile.
 */

const TAGS = `flowchart TD\n  A["${"<b>".repeat(12_000)}x"] --> B`;
const NESTED = `flowchart TD\n${Array.from({ length: 3_000 }, (_, i) => `subgraph S${i}`).join("\n")}\n  A --> B\n${"end\n".repeat(3_000)}`;
/** 3,000 subgraphs on few lines: the subgraph count, not the line count, refuses it. */
const NESTED_ONE_LINE = `flowchart TD\n${Array.from({ length: 3_000 }, (_, i) => `subgraph S${i};`).join(" ")}\n  A --> B\n${"end;".repeat(3_000)}`;

afterEach(() => {
  vi.restoreAllMocks();
});

describe("diagrams over the limits", () => {
  it("POST /api/mermaid/validate answers 12,000 <b> tags and 3,000 nested subgraphs with a 422 without parsing them", async () => {
    const parse = vi.spyOn(MermaidWorker.prototype, "parse");
    for (const [source, says] of [
      [TAGS, /12,000 HTML tags; at most 500/],
      [NESTED, /6,002 lines; at most 1,000/],
      [NESTED_ONE_LINE, /3,000 subgraphs; at most 100/],
    ] as const) {
      const res = await call(validateRoute.POST, { method: "POST", headers: ADMIN, body: { source } });
      expect(res.status).toBe(422);
      expect(res.json.error.code).toBe("unprocessable:mermaid");
      expect(res.json.error.message).toMatch(/^Diagram too complex: /);
      expect(res.json.error.message).toMatch(says);
    }
    expect(parse).not.toHaveBeenCalled();
  });

  it("an edited plan over the limits is a 422 naming editedPlan.mermaid", async () => {
    const error = await checkEditedPlan({ mermaid: TAGS }).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 422, code: "unprocessable:mermaid" });
    expect((error as Error).message).toMatch(/^editedPlan\.mermaid: Diagram too complex: it has 12,000 HTML tags/);
  });

  it("the planner takes a diagram over the limits as invalid: retried once with the reason, then a plan", async () => {
    const prompts: string[] = [];
    const reply = (mermaid: string) => ({
      text: JSON.stringify({
        kind: "plan",
        clarification: null,
        summary: "Add numbers",
        mermaid,
        tasks: [{ id: "T1", title: "Add", description: "", dependsOn: [], files: ["add.sh"] }],
        acceptanceCriteria: [{ id: null, description: "the test passes", command: "sh test-add.sh" }],
        risks: [],
      }),
    });
    const model = createScriptedModel({
      respond: (options) => {
        prompts.push(promptText(options.prompt));
        return reply(prompts.length === 1 ? TAGS : "flowchart TD\n  T1[Add] --> B[Done]");
      },
    });
    const result = await runPlanner({ input: { request: "Add numbers" }, modelId: "demo:test", model, context: {} });
    expect(result).toMatchObject({ kind: "plan", diagramsProduced: 2 });
    expect(prompts[1]).toContain("Diagram too complex: it has 12,000 HTML tags");
  });

  it("the limits are far above a real plan: 40 tasks with a tag each and 10 subgraphs parse", async () => {
    const lines = ["flowchart TD"];
    for (let s = 0; s < 10; s++) {
      lines.push(`  subgraph G${s}["Stage ${s}"]`);
      for (let t = 0; t < 4; t++) lines.push(`    T${s * 4 + t}["<b>T${s * 4 + t}</b>: step ${t}<br>of stage ${s}"]`);
      lines.push("  end");
    }
    for (let i = 1; i < 40; i++) lines.push(`  T${i - 1} --> T${i}`);
    await expect(validateMermaid(lines.join("\n"))).resolves.toEqual({ kind: "flowchart" });
    expect(DIAGRAM_LIMITS.parseMs).toBeGreaterThanOrEqual(1_000);
  });
});

describe("the parse worker's time limit", () => {
  it("a parse past the limit ends in ParseTimeout while the event loop keeps answering; the next parse gets a new worker", async () => {
    const worker = new MermaidWorker({ timeLimitMs: 10_000 });
    try {
      // Ready first (it loads mermaid), so what follows is the parse alone.
      await expect(worker.parse("flowchart TD\n  A --> B", ["getVertices"])).resolves.toMatchObject({ ok: true, type: "flowchart-v2" });
      expect(worker.started).toBe(1);

      // The worker, unlike the limits, parses what it is given: 12,000 tags take it far longer than 10 s.
      let settled = false;
      const slow = worker.parse(TAGS, ["getVertices"]).finally(() => {
        settled = true;
      });
      slow.catch(() => undefined);
      // While it parses, this thread runs callbacks and answers a request.
      const turned = await new Promise<boolean>((resolve) => setImmediate(() => resolve(!settled)));
      expect(turned).toBe(true);
      const health = await healthRoute.GET(new Request(`${ORIGIN}/api/health`), { params: Promise.resolve({}) });
      expect(health.status).toBe(200);
      expect(settled).toBe(false);

      const error = await slow.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ParseTimeout);
      expect((error as Error).message).toBe("parsing took longer than 10 s");

      await expect(worker.parse("flowchart TD\n  A --> C", ["getVertices"])).resolves.toMatchObject({ ok: true });
      expect(worker.started).toBe(2);
    } finally {
      worker.close();
    }
  });

});
