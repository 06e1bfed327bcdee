import { generateText, streamText } from "ai";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runPlanner } from "@/lib/agents/planner";
import { implementerTurn, startImplementer } from "@/lib/agents/implementer";
import { callModel, ModelCallError } from "@/lib/ai/call";
import { getLanguageModel } from "@/lib/ai/providers";
import { getDb } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { parseEnv } from "@/lib/env";
import { createTempSandbox } from "@/tests/agents/helpers/temp-sandbox";
import { startOpenAIServer, type OpenAIServer } from "@/tests/agents/helpers/openai-server";
import type { Plan } from "@/lib/agents/plan";

let server: OpenAIServer;
let env: ReturnType<typeof parseEnv>;
const backoffs: number[] = [];
const noWait = async (attempt: number) => {
  backoffs.push(attempt);
};
let step = 0;
const ctx = () => ({ env, backoff: noWait, stepKey: `test:${++step}` });

async function rowsFor(stepKey: string) {
  const db = await getDb();
  const all = await db.select().from(modelCalls);
  return all.filter((r) => r.stepKey?.startsWith(`${stepKey}`)).sort((a, b) => a.attempt - b.attempt);
}

beforeAll(async () => {
  server = await startOpenAIServer();
  env = parseEnv({ OPENAI_COMPATIBLE_BASE_URL: server.baseURL, OPENAI_COMPATIBLE_API_KEY: "local-test-key-0123456789" });
});
afterAll(() => server.close());
beforeEach(() => {
  backoffs.length = 0;
});

const MODEL = "openai-compatible:gpt-4o-mini";

async function generate(stepKey: string, prompt = "Say hi") {
  return callModel({
    modelId: MODEL,
    context: { ...ctx(), stage: "planning", stepKey },
    run: async ({ model }) => {
      const r = await generateText({ model, prompt, maxRetries: 0 });
      return { value: r.text, usage: r.totalUsage };
    },
  });
}

describe("the real provider code path over HTTP", () => {
  it("a chat completion records tokens, cost and latency in model_calls", async () => {
    server.script([{ text: "hello there", usage: { prompt: 1000, completion: 500 } }]);
    expect(await generate("http:plain")).toBe("hello there");
    expect(server.requests[0]!.__path).toBe("/v1/chat/completions");
    expect(server.requests[0]!.__auth).toBe("Bearer local-test-key-0123456789");
    const [row] = await rowsFor("http:plain#");
    expect(row).toMatchObject({ stage: "planning", model: MODEL, tokensIn: 1000, tokensOut: 500, status: "ok", attempt: 1 });
    // gpt-4o-mini: $0.15 / $0.60 per million tokens.
    expect(row!.costUsd).toBeCloseTo(0.00015 + 0.0003, 10);
    expect(row!.latencyMs).toBeGreaterThanOrEqual(0);
  });

  it("a replayed step does not record its call twice", async () => {
    server.script([{ text: "once", usage: { prompt: 3, completion: 2 } }]);
    await generate("http:replayed");
    await generate("http:replayed");
    expect(await rowsFor("http:replayed#")).toHaveLength(1);
  });

  it("streaming: text arrives in chunks and usage is recorded", async () => {
    server.script([{ text: "streamed reply text", usage: { prompt: 40, completion: 7 } }]);
    const text = await callModel({
      modelId: MODEL,
      context: { ...ctx(), stage: "validation", stepKey: "http:stream" },
      run: async ({ model }) => {
        const r = streamText({ model, prompt: "stream please", maxRetries: 0 });
        const chunks: string[] = [];
        for await (const c of r.textStream) chunks.push(c);
        expect(chunks.length).toBeGreaterThan(1);
        return { value: chunks.join(""), usage: await r.totalUsage };
      },
    });
    expect(text).toBe("streamed reply text");
    expect(server.requests[0]!.stream).toBe(true);
    const [row] = await rowsFor("http:stream#");
    expect(row).toMatchObject({ stage: "validation", tokensIn: 40, tokensOut: 7, status: "ok" });
  });

  it("a 429 is retried with backoff and then succeeds; both attempts are recorded", async () => {
    server.script([{ status: 429, headers: { "retry-after": "1" } }, { text: "after the limit" }]);
    expect(await generate("http:429")).toBe("after the limit");
    expect(server.requests).toHaveLength(2);
    expect(backoffs).toEqual([2]);
    const rows = await rowsFor("http:429#");
    expect(rows.map((r) => [r.attempt, r.status])).toEqual([
      [1, "error"],
      [2, "ok"],
    ]);
    expect(rows[0]!.error).toContain("429");
  });

  it("repeated 500s: three retries, then a model_outage error the workflow turns into a pause", async () => {
    server.script([{ status: 500 }]);
    const error = await generate("http:500").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelCallError);
    expect((error as ModelCallError).reason).toBe("model_outage");
    expect((error as ModelCallError).attempts).toBe(4);
    expect(server.requests).toHaveLength(4);
    expect(backoffs).toEqual([2, 3, 4]);
    expect((await rowsFor("http:500#")).map((r) => r.status)).toEqual(["error", "error", "error", "error"]);
  });

  it("a 401 is a model_auth error at once, naming the variable to check, without retries", async () => {
    server.script([{ status: 401 }]);
    const error = (await generate("http:401").catch((e: unknown) => e)) as ModelCallError;
    expect(error).toBeInstanceOf(ModelCallError);
    expect(error.reason).toBe("model_auth");
    expect(error.message).toContain("OPENAI_COMPATIBLE_API_KEY");
    expect(server.requests).toHaveLength(1);
    expect(backoffs).toEqual([]);
  });

  it("prompts and keys never reach model_calls", async () => {
    server.script([{ status: 400, body: { error: { message: "bad request: sk-proj-abcdefghijklmnopqrstuvwxyz012345" } } }]);
    const error = (await generate("http:400", "SECRET PROMPT TEXT").catch((e: unknown) => e)) as ModelCallError;
    expect(error.reason).toBe("model_error");
    const [row] = await rowsFor("http:400#");
    expect(row!.error).not.toContain("SECRET PROMPT TEXT");
    expect(row!.error).not.toContain("sk-proj-abcdefghijklmnopqrstuvwxyz012345");
    expect(row!.error).toContain("[REDACTED:openai-key]");
  });

  it("junk JSON for a structured output: one retry, then a typed model_output failure", async () => {
    server.script([{ rawContent: "this is {not json" }, { rawContent: '{"half": ' }]);
    const error = (await runPlanner({
      input: { request: "Add a login page" },
      modelId: MODEL,
      context: { env, backoff: noWait, stepKey: "http:junk" },
    }).catch((e: unknown) => e)) as ModelCallError;
    expect(error).toBeInstanceOf(ModelCallError);
    expect(error.reason).toBe("model_output");
    expect(server.requests).toHaveLength(2);
    expect(server.requests[0]!.response_format).toMatchObject({ type: "json_object" });
    expect((await rowsFor("http:junk#")).map((r) => r.status)).toEqual(["error", "error"]);
  });

  it("tool calls: an implementer turn executes the model's write_file call in the sandbox", async () => {
    const sandbox = await createTempSandbox();
    const plan: Plan = {
      summary: "hello",
      mermaid: "flowchart TD\n A[Hello]",
      tasks: [{ id: "T1", title: "Write hello", description: "", dependsOn: [], files: ["hello.txt"] }],
      acceptanceCriteria: [],
      risks: [],
      constraints: {
        diagramType: "flowchart",
        requiredRoutes: ["Hello"],
        requiredComponents: [],
        conditionalBranches: [],
        dataEntities: [],
        relationships: [],
        participants: [],
        states: [],
        validationRules: [],
      },
    };
    server.script([
      {
        toolCalls: [
          { name: "write_file", arguments: { path: "hello.txt", content: "hi\n" } },
          { name: "update_todo", arguments: { id: "T1", status: "done" } },
        ],
      },
      { text: "Wrote hello.txt." },
    ]);
    let state = startImplementer({ plan, request: "Write hello.txt" });
    const first = await implementerTurn({ state, sandbox, modelId: MODEL, context: { env, backoff: noWait, stepKey: "http:impl:1" } });
    expect(first.kind).toBe("continue");
    expect(await sandbox.readFile("hello.txt")).toBe("hi\n");
    state = first.state;
    const second = await implementerTurn({ state, sandbox, modelId: MODEL, context: { env, backoff: noWait, stepKey: "http:impl:2" } });
    expect(second).toMatchObject({ kind: "done", summary: "Wrote hello.txt." });
    // The second request carried the tool results back to the model.
    const messages = server.requests[1]!.messages as Array<{ role: string; tool_call_id?: string }>;
    expect(messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id)).toEqual(["call_1_0", "call_1_1"]);
    // Every implementer tool is offered to the model, reflection's record_progress and propose_replan and bounded
    // context's recall_output included.
    const offered = (server.requests[0]!.tools as Array<{ function?: { name?: string } }>).map((t) => t.function?.name);
    expect(offered).toHaveLength(10);
    expect(offered).toEqual(expect.arrayContaining(["write_file", "run_command", "request_clarification", "record_progress", "propose_replan", "recall_output"]));
    await sandbox.destroy();
  });

  it("getLanguageModel refuses a provider whose variable is missing", () => {
    expect(() => getLanguageModel("openai:gpt-4o-mini", { env: parseEnv({}) })).toThrow(/OPENAI_API_KEY/);
  });
});

describe("rows tie to a run", () => {
  it("model_calls rows carry the stepKey with the attempt", async () => {
    server.script([{ text: "x" }]);
    await generate("run-7:plan:1");
    const db = await getDb();
    const rows = await db.select().from(modelCalls).where(eq(modelCalls.stepKey, "run-7:plan:1#1"));
    expect(rows).toHaveLength(1);
  });
});
