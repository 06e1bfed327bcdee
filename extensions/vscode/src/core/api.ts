import { ApiClient } from "../../../../cli/client";
import { CliError, EXIT } from "../../../../cli/errors";
import type { Answer, Clarification, Gate, Plan, Project, Run, RunDetail, RunEvent } from "../../../../cli/types";

/*
 * The extension's API client: the CLI's client (bearer token, error bodies turned into messages, SSE with Last-Event-ID
 * reconnects) reused as it is, plus the typed calls the extension makes. Nothing here imports `vscode`, so it is tested
 * with vitest against the real route handlers (tests/vscode).
 */

export type { Answer, Clarification, Gate, Plan, Project, Run, RunDetail, RunEvent };
export type FixDecision = "retry" | "accept" | "cancel";
export type Diff = { diff: string; base: string | null; head: string | null; truncated: boolean };
export type Validation = { valid: true } | { valid: false; error: { message: string; line: number | null } };

/** What the extension says when a call fails: the server's message, without the CLI's "run `gatehouse …`" advice. */
export function errorMessage(error: unknown): string {
  if (!(error instanceof CliError)) return error instanceof Error ? error.message : String(error);
  const message = error.message.replace(/ ?(Check|See|Create|run|Run)[^.]*`(npx )?gatehouse[^`]*`[^.]*\.?/g, "").trim();
  // The editor's way to fix a refused token, in place of the CLI's `gatehouse login`.
  return error.exitCode === EXIT.auth && message.startsWith("The server refused the token")
    ? `${message} Create a token in the dashboard and run “Gatehouse: Set API Token”.`
    : message;
}

const runPath = (id: string) => `/api/runs/${encodeURIComponent(id)}`;

export class GatehouseApi {
  readonly client: ApiClient;

  constructor({ url, token }: { url: string; token: string }) {
    this.client = new ApiClient({ url: url.replace(/\/+$/, ""), token });
  }

  get url(): string {
    return this.client.url;
  }

  async projects(): Promise<Project[]> {
    return (await this.client.get<{ projects: Project[] }>("/api/projects")).projects;
  }

  /** The newest runs the token can see (one page; the tree shows recent work, the dashboard has the archive). */
  async runs({ limit = 100 }: { limit?: number } = {}): Promise<Run[]> {
    return (await this.client.get<{ runs: Run[] }>(`/api/runs?limit=${limit}`)).runs;
  }

  async run({ id }: { id: string }): Promise<RunDetail> {
    return this.client.get<RunDetail>(runPath(id));
  }

  async events({ id, after = 0 }: { id: string; after?: number }): Promise<RunEvent[]> {
    const out: RunEvent[] = [];
    let cursor = after;
    for (;;) {
      const { events } = await this.client.get<{ events: RunEvent[] }>(`${runPath(id)}/events?after=${cursor}&limit=2000`);
      out.push(...events);
      if (events.length < 2000) return out;
      cursor = events.at(-1)!.sequence;
    }
  }

  async diff({ id }: { id: string }): Promise<Diff> {
    return this.client.get<Diff>(`${runPath(id)}/diff`);
  }

  async approve({ id, gateId, notes, editedPlan }: { id: string; gateId?: string; notes?: string; editedPlan?: Plan }) {
    return this.client.post<{ gate: Gate }>(`${runPath(id)}/approve`, { gateId, notes, editedPlan });
  }

  async reject({ id, gateId, feedback }: { id: string; gateId?: string; feedback: string }) {
    return this.client.post<{ gate: Gate }>(`${runPath(id)}/reject`, { gateId, feedback });
  }

  async fix({ id, decision, notes }: { id: string; decision: FixDecision; notes?: string }) {
    return this.client.post<{ gate: Gate }>(`${runPath(id)}/fix-decision`, { decision, notes });
  }

  async answer({ clarificationId, response }: { clarificationId: string; response: Answer }) {
    return this.client.post<unknown>(`/api/clarifications/${encodeURIComponent(clarificationId)}/answer`, { response });
  }

  /** Start a run, or `approaches` runs of one request ("Explore N approaches", 2 to 5) under one group. */
  async startRun({ projectId, request, approaches }: { projectId: string; request: string; approaches?: number }) {
    return this.client.post<{ run: Run; runs?: Run[]; groupId?: string }>("/api/runs", { projectId, request, ...(approaches ? { approaches } : {}) });
  }

  /** How many gates and questions wait for this token's user (the inbox's open count). */
  async waitingCount(): Promise<number> {
    return (await this.client.get<{ open: number }>("/api/inbox?filter=open&limit=1")).open;
  }

  async validateMermaid({ source }: { source: string }): Promise<Validation> {
    return this.client.post<Validation>("/api/mermaid/validate", { source });
  }

  /** Follow a run's live event log (SSE, resumed after `after`); resolves when the run ends or `signal` aborts. */
  async follow({ id, after, signal, onEvent }: { id: string; after: number; signal: AbortSignal; onEvent: (event: RunEvent) => Promise<void> | void }) {
    return this.client.stream({
      path: `${runPath(id)}/stream`,
      after,
      signal,
      onEvent: async ({ event, data }) => {
        if (event === "run-event") await onEvent(data as RunEvent);
      },
    });
  }
}
