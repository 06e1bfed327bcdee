import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll } from "vitest";
import { resetEnvCache } from "@/lib/env";
import { workflowClock } from "@/lib/runs/steps/context";
import { startWorkflowHarness } from "./harness";

/**
 * A controllable OpenAI-compatible chat-completions server on loopback for the implementer's model: the test decides,
 * per request, whether to answer (a scripted implementer that writes one file), fail with a status, or hold the reply.
 */

export type Reply =
  | { status: number; headers?: Record<string, string> }
  | { toolCalls: Array<{ name: string; arguments: unknown }> }
  | { text: string };

type Body = { model?: string; messages?: Array<{ role: string; tool_calls?: unknown[] }> };

export type ModelServer = {
  baseURL: string;
  /** Requests seen so far (all runs). */
  requests: number;
  /** Replace the reply policy; `body` is the request, `n` counts requests from 1. */
  respond(policy: (body: Body, n: number) => Reply | Promise<Reply>): void;
  close(): Promise<void>;
};

/** The implementer of a demo plan with one task T1 that writes `notePath`: start T1 + write, finish T1, summary. */
export function scriptedImplementer(notePath: string) {
  return (body: Body): Reply => {
    const turn = (body.messages ?? []).filter((m) => m.role === "assistant" && m.tool_calls?.length).length;
    if (turn === 0) {
      return {
        toolCalls: [
          { name: "update_todo", arguments: { id: "T1", status: "in_progress" } },
          { name: "write_file", arguments: { path: notePath, content: "# note\n\nWritten by the scripted model.\n" } },
        ],
      };
    }
    if (turn === 1) return { toolCalls: [{ name: "update_todo", arguments: { id: "T1", status: "done" } }] };
    return { text: "Wrote the note." };
  };
}

export async function startModelServer(): Promise<ModelServer> {
  let policy: (body: Body, n: number) => Reply | Promise<Reply> = () => ({ status: 500 });
  const state = { requests: 0 };
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", async () => {
      const body = (raw ? JSON.parse(raw) : {}) as Body;
      const n = ++state.requests;
      let reply: Reply;
      try {
        reply = await policy(body, n);
      } catch {
        reply = { status: 500 };
      }
      if (res.destroyed) return;
      if ("status" in reply) {
        res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
        res.end(JSON.stringify({ error: { message: `scripted ${reply.status}`, type: "scripted" } }));
        return;
      }
      const toolCalls =
        "toolCalls" in reply
          ? reply.toolCalls.map((c, i) => ({ id: `call_${n}_${i}`, type: "function", function: { name: c.name, arguments: JSON.stringify(c.arguments) } }))
          : undefined;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: `chatcmpl-${n}`,
          object: "chat.completion",
          created: 0,
          model: body.model ?? "model",
          choices: [
            {
              index: 0,
              message: { role: "assistant", content: "text" in reply ? reply.text : null, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
              finish_reason: toolCalls ? "tool_calls" : "stop",
            },
          ],
          usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const baseURL = `http://127.0.0.1:${port}/v1`;
  process.env.OPENAI_COMPATIBLE_BASE_URL = baseURL;
  process.env.OPENAI_COMPATIBLE_API_KEY = "scripted-key";
  resetEnvCache();
  return {
    baseURL,
    get requests() {
      return state.requests;
    },
    respond(p) {
      policy = p;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * The usual setup of a workflow test with a scripted model: the model server (which points OPENAI_COMPATIBLE_* at
 * itself) and then the workflow harness, closed after the file; the workflow clock is reset after each test.
 * Fields are filled in beforeAll, so read them inside tests.
 */
export function useScriptedWorkflow(): { h: Awaited<ReturnType<typeof startWorkflowHarness>>; model: ModelServer } {
  const t = {} as { h: Awaited<ReturnType<typeof startWorkflowHarness>>; model: ModelServer };
  beforeAll(async () => {
    t.model = await startModelServer();
    t.h = await startWorkflowHarness();
  });
  afterAll(async () => {
    await t.h.close();
    await t.model.close();
  });
  afterEach(() => {
    workflowClock.now = () => Date.now();
  });
  return t;
}
