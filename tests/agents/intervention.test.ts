import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LanguageModelV3CallOptions } from "@ai-sdk/provider";
import { DEFAULT_MAX_ITERATIONS, implementerTurn, startImplementer, type ImplementerState, type ImplementerTurnResult } from "@/lib/agents/implementer";
import { createScriptedModel, type ScriptedReply } from "@/lib/ai/scripted-model";
import { createTempSandbox } from "./helpers/temp-sandbox";
import { planOf } from "./helpers/plan";

/*
 * Seed 004's graduated intervention in one implementer session: level 1 a nudge, level 2 a firm reminder with the todo
 * list, level 3 stop (and the workflow asks a person) — for a loop and for turns running out at the default limit.
 */

let sandbox: Awaited<ReturnType<typeof createTempSandbox>>;
beforeEach(async () => {
  sandbox = await createTempSandbox({ "src/app.ts": "export const version = 1;\n" });
});
afterEach(() => sandbox.destroy());

const plan = planOf({ tasks: [{ id: "T1", title: "Write a", files: ["src/a.ts"] }, { id: "T2", title: "Write b", files: ["src/b.ts"], dependsOn: ["T1"] }] });

async function drive(respond: (n: number) => ScriptedReply, maxTurns = 60) {
  const seen: LanguageModelV3CallOptions[] = [];
  const model = createScriptedModel({ respond: (options) => (seen.push(options), respond(seen.length)) });
  let state: ImplementerState = startImplementer({ plan, request: "Write a and b" });
  const results: ImplementerTurnResult[] = [];
  for (let i = 0; i < maxTurns; i++) {
    const r = await implementerTurn({ state, sandbox, modelId: "demo:scripted", model, context: { stepKey: `impl-${crypto.randomUUID()}` } });
    results.push(r);
    state = r.state;
    if (r.kind !== "continue") break;
  }
  return { results, seen };
}

const lastUserText = (options: LanguageModelV3CallOptions) => {
  const user = options.prompt.filter((m) => m.role === "user").at(-1)!;
  return (user.content as Array<{ type: string; text?: string }>).map((p) => p.text ?? "").join("");
};

describe("graduated intervention", () => {
  it("a loop: a nudge, then a firm reminder with the todo list, then the session stops", async () => {
    const { results, seen } = await drive(() => ({ toolCalls: [{ toolName: "read_file", input: { path: "src/app.ts" } }] }));
    expect(results.map((r) => r.kind)).toEqual([...Array(8).fill("continue"), "failure"]);
    const interventions = results.at(-1)!.state.interventions!;
    expect(interventions.map((i) => [i.level, i.reason, i.iteration])).toEqual([[1, "loop", 3], [2, "loop", 6], [3, "loop", 9]]);
    // The model's 4th call carries the nudge; its 7th the firm reminder, with every todo and its status.
    expect(lastUserText(seen[3]!)).toMatch(/^Gatehouse — a nudge: You called read_file with the same arguments 3 times/);
    const reminder = lastUserText(seen[6]!);
    expect(reminder).toContain("Gatehouse — a firm reminder, the last one");
    expect(reminder).toContain('<todo-list>\n- T1 "Write a": pending\n- T2 "Write b": pending\n</todo-list>');
    expect(results.at(-1)).toMatchObject({ kind: "failure", reason: "loop", message: expect.stringMatching(/looping: it called read_file .*, after a nudge and a firm reminder\.$/) });
  });

  it("turns running out at the default limit: a nudge with a fifth left, a firm reminder with a tenth, stopped at the limit", async () => {
    // Busy but never finishing: a different file content every turn is progress, so no loop is seen.
    const { results, seen } = await drive((n) => ({ toolCalls: [{ toolName: "write_file", input: { path: "src/a.ts", content: `export const a = ${n};\n` } }] }));
    expect(DEFAULT_MAX_ITERATIONS).toBe(30);
    expect(results).toHaveLength(31);
    const interventions = results.at(-1)!.state.interventions!;
    expect(interventions.map((i) => [i.level, i.reason, i.iteration])).toEqual([[1, "iteration_limit", 24], [2, "iteration_limit", 27], [3, "iteration_limit", 30]]);
    expect(lastUserText(seen[24]!)).toContain("You have used 24 of your 30 turns; 6 are left.");
    expect(lastUserText(seen[27]!)).toContain('- T1 "Write a": pending');
    expect(results.at(-1)).toMatchObject({ kind: "failure", reason: "iteration_limit" });
  });

  it("a session that makes progress and finishes is never nudged", async () => {
    const turns: ScriptedReply[] = [
      { toolCalls: [{ toolName: "write_file", input: { path: "src/a.ts", content: "a" } }, { toolName: "update_todo", input: { id: "T1", status: "done" } }] },
      { toolCalls: [{ toolName: "write_file", input: { path: "src/b.ts", content: "b" } }, { toolName: "update_todo", input: { id: "T2", status: "done" } }] },
      { text: "Wrote a and b." },
    ];
    const { results } = await drive((n) => turns[n - 1]!);
    expect(results.at(-1)!.kind).toBe("done");
    expect(results.at(-1)!.state.interventions ?? []).toEqual([]);
  });
});
