import http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * An OpenAI-compatible chat-completions server on loopback for the implementer of chaos runs (the planner and
 * validator stay the demo model): a scripted implementer of the demo plan's one task T1 that writes its note (the path
 * the plan names, read from the request, so several runs can use it at once), and a way to learn that a request is in
 * flight, so the server can be killed while it waits for the reply.
 */
type Body = { model?: string; messages?: Array<{ role: string; tool_calls?: unknown[] }> };

export type ModelServer = {
  baseURL: string;
  /**
   * Called on every request with the note it is about (the run's, e.g. docs/requests/chaos-model-3.md) and its number
   * for that note (from 1 since the last reset); "hold" leaves it unanswered.
   */
  onRequest: ((note: string, n: number) => "answer" | "hold") | null;
  reset(): void;
  close(): Promise<void>;
};

function reply(body: Body, notePath: string) {
  const turn = (body.messages ?? []).filter((m) => m.role === "assistant" && m.tool_calls?.length).length;
  if (turn === 0) {
    return [
      { name: "update_todo", arguments: { id: "T1", status: "in_progress" } },
      { name: "write_file", arguments: { path: notePath, content: "# note\n\nWritten by the chaos run's scripted model.\n" } },
    ];
  }
  if (turn === 1) return [{ name: "update_todo", arguments: { id: "T1", status: "done" } }];
  return null;
}

/** The demo planner's note for a request without files: docs/requests/<slug of the title>.md, named in the task. */
const NOTE = /docs\/requests\/[a-z0-9-]+\.md/;

export async function startModelServer(): Promise<ModelServer> {
  const counts = new Map<string, number>();
  let n = 0;
  const held: http.ServerResponse[] = [];
  const self: ModelServer = {
    baseURL: "",
    onRequest: null,
    reset() {
      counts.clear();
      for (const res of held.splice(0)) res.destroy();
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      const body = (raw ? JSON.parse(raw) : {}) as Body;
      const note = NOTE.exec(raw)?.[0] ?? "docs/requests/note.md";
      counts.set(note, (counts.get(note) ?? 0) + 1);
      n++;
      if (self.onRequest?.(note, counts.get(note)!) === "hold") {
        held.push(res);
        return;
      }
      const calls = reply(body, note);
      const toolCalls = calls?.map((c, i) => ({ id: `call_${n}_${i}`, type: "function", function: { name: c.name, arguments: JSON.stringify(c.arguments) } }));
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: `chatcmpl-${n}`,
          object: "chat.completion",
          created: 0,
          model: body.model ?? "scripted",
          choices: [
            {
              index: 0,
              message: { role: "assistant", content: toolCalls ? null : "Wrote the note.", ...(toolCalls ? { tool_calls: toolCalls } : {}) },
              finish_reason: toolCalls ? "tool_calls" : "stop",
            },
          ],
          usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  self.baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return self;
}
