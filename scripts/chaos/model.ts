import { scriptedImplementer, startModelServer as startScriptedServer, type Reply } from "../../tests/workflow/model-server";

/**
 * The implementer's model for chaos runs (the planner and validator stay the demo model): the tests' scripted
 * OpenAI-compatible server (tests/workflow/model-server.ts), implementing the demo plan's one task T1 by writing the
 * note the plan names (read from each request, so several runs can use it at once), with a way to learn that a
 * request is in flight and hold its reply, so the server can be killed while it waits.
 */
export type ModelServer = {
  baseURL: string;
  /**
   * Called on every request with the note it is about (the run's, e.g. docs/requests/chaos-model-3.md) and its number
   * for that note (from 1 since the last reset); "hold" leaves it unanswered until the next reset.
   */
  onRequest: ((note: string, n: number) => "answer" | "hold") | null;
  reset(): void;
  close(): Promise<void>;
};

/** The demo planner's note for a request without files: docs/requests/<slug of the title>.md, named in the task. */
const NOTE = /docs\/requests\/[a-z0-9-]+\.md/;

export async function startModelServer(): Promise<ModelServer> {
  const server = await startScriptedServer();
  const counts = new Map<string, number>();
  // A held request answers (with an error its client, killed meanwhile, never reads) when reset.
  const held: Array<() => void> = [];
  const self: ModelServer = {
    baseURL: server.baseURL,
    onRequest: null,
    reset() {
      counts.clear();
      for (const release of held.splice(0)) release();
    },
    close: () => server.close(),
  };
  server.respond((body) => {
    const note = NOTE.exec(JSON.stringify(body))?.[0] ?? "docs/requests/note.md";
    const n = (counts.get(note) ?? 0) + 1;
    counts.set(note, n);
    if (self.onRequest?.(note, n) === "hold") return new Promise<Reply>((resolve) => held.push(() => resolve({ status: 503 })));
    return scriptedImplementer(note)(body);
  });
  return self;
}
