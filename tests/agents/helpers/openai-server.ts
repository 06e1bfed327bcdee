import http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A scripted OpenAI-compatible server on 127.0.0.1 for exercising the real provider code path over HTTP. Each request
 * to /chat/completions takes the next scripted reply; every request body is kept for assertions.
 */

export type ScriptedHttpReply =
  | { status: number; body?: unknown; headers?: Record<string, string> }
  | { text?: string; toolCalls?: Array<{ name: string; arguments: unknown }>; usage?: { prompt: number; completion: number } }
  | { rawContent: string; usage?: { prompt: number; completion: number } };

export type OpenAIServer = {
  baseURL: string;
  requests: Array<Record<string, unknown>>;
  /** Replies used in order; when exhausted the last one repeats. */
  script(replies: ScriptedHttpReply[]): void;
  close(): Promise<void>;
};

function completion(model: string, reply: Exclude<ScriptedHttpReply, { status: number }>, n: number) {
  const usage = reply.usage ?? { prompt: 10, completion: 5 };
  const toolCalls =
    "toolCalls" in reply && reply.toolCalls?.length
      ? reply.toolCalls.map((c, i) => ({
          id: `call_${n}_${i}`,
          type: "function",
          function: { name: c.name, arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments) },
        }))
      : undefined;
  const content = "rawContent" in reply ? reply.rawContent : ("text" in reply ? reply.text : undefined) ?? null;
  return {
    message: { role: "assistant", content, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
    finish_reason: toolCalls ? "tool_calls" : "stop",
    usage: { prompt_tokens: usage.prompt, completion_tokens: usage.completion, total_tokens: usage.prompt + usage.completion },
    id: `chatcmpl-${n}`,
    model,
  };
}

export async function startOpenAIServer(): Promise<OpenAIServer> {
  let replies: ScriptedHttpReply[] = [];
  let next = 0;
  const requests: Array<Record<string, unknown>> = [];
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      const body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
      requests.push({ ...body, __path: req.url, __auth: req.headers.authorization });
      const reply = replies[Math.min(next, replies.length - 1)];
      next++;
      if (!reply) {
        res.writeHead(500).end();
        return;
      }
      if ("status" in reply) {
        res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
        res.end(JSON.stringify(reply.body ?? { error: { message: `scripted ${reply.status}`, type: "scripted" } }));
        return;
      }
      const model = String(body.model ?? "model");
      const c = completion(model, reply, next);
      if (body.stream) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        const base = { id: c.id, object: "chat.completion.chunk", created: 0, model };
        const send = (payload: unknown) => res.write(`data: ${JSON.stringify(payload)}\n\n`);
        send({ ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] });
        const text = c.message.content ?? "";
        for (const chunk of text.match(/[\s\S]{1,5}/g) ?? []) {
          send({ ...base, choices: [{ index: 0, delta: { content: chunk }, finish_reason: null }] });
        }
        if ("tool_calls" in c.message && c.message.tool_calls) {
          c.message.tool_calls.forEach((tc, index) =>
            send({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index, ...tc }] }, finish_reason: null }] }),
          );
        }
        send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: c.finish_reason }] });
        send({ ...base, choices: [], usage: c.usage });
        res.end("data: [DONE]\n\n");
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: c.id,
          object: "chat.completion",
          created: 0,
          model,
          choices: [{ index: 0, message: c.message, finish_reason: c.finish_reason }],
          usage: c.usage,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    script(r) {
      replies = r;
      next = 0;
      requests.length = 0;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
