import type { ChatOrigin } from "@/lib/dashboard/timeline";
import type { RunDto } from "@/lib/runs/dto";
import type { CostBreakdown, RunCost } from "@/lib/runs/costs";
import type { EstimateReport } from "@/lib/runs/estimate-model";

/** What the browser gets from the API; errors carry the server's message, which says what to do. */
export class ApiRequestError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | null,
  ) {
    super(message);
  }
}

async function parse<T>(response: Response): Promise<T> {
  const text = await response.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON (a proxy error page): fall through to the status message.
  }
  if (!response.ok) {
    const error = (body as { error?: { code?: string; message?: string } } | null)?.error;
    const fallback =
      response.status === 401
        ? "Your session has ended: sign in again."
        : response.status >= 500
          ? `The server failed (${response.status}); try again in a moment.`
          : `Request failed (${response.status}).`;
    throw new ApiRequestError(error?.message ?? fallback, response.status, error?.code ?? null);
  }
  return body as T;
}

export async function apiGet<T>(url: string, init?: RequestInit): Promise<T> {
  return parse<T>(await fetch(url, { ...init, headers: { accept: "application/json" }, cache: "no-store" }));
}

export async function apiSend<T>(url: string, body?: unknown, method = "POST"): Promise<T> {
  return parse<T>(
    await fetch(url, {
      method,
      headers: { "content-type": "application/json", accept: "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );
}

export type Run = RunDto;
export type { CostBreakdown, RunCost };

export type Project = {
  id: string;
  name: string;
  repository: { type: "local"; path: string } | { type: "github"; owner: string; repo: string; installationId?: number };
  defaultConfig: Record<string, unknown>;
  memory: string | null;
  role?: string;
  createdAt: string;
};

/** A gate's or question's deadline (config.deadlines): epoch ms, what happens then, and how far it has gone. */
export type Deadline = {
  at: number;
  reminders: number[];
  onTimeout: { action: "escalate"; to: { role: string } | { userId: string } } | { action: "default"; answer: string } | { action: "cancel" };
  reminded: number;
  timedOut: boolean;
  escalated: { to: { role: string } | { userId: string }; recipients: string[] } | null;
  escalatesToName?: string | null;
};

export type Gate = {
  id: string;
  gateNumber: number;
  kind: string;
  status: string;
  artifactVersion: number | null;
  context: Record<string, unknown> | null;
  decision: string | null;
  decidedBy: string | null;
  decidedAt: string | null;
  notes: string | null;
  deadline?: Deadline | null;
};

export type Clarification = {
  id: string;
  stage: string;
  question: string;
  context: string | null;
  options: string[] | null;
  responseType: "text" | "single_choice" | "multiple_choice" | "file" | string;
  status: string;
  response: unknown;
  answeredAt: string | null;
  deadline?: Deadline | null;
};

export type RunDetail = {
  run: Run;
  gates: Gate[];
  clarifications: Clarification[];
  artifacts: Array<Record<string, unknown>>;
  cost: RunCost & { byStage?: CostBreakdown[]; byModel?: CostBreakdown[]; byTask?: CostBreakdown[] };
  /** How this server isolates agent commands; `warning` is a sentence when isolation is missing or weaker than full. */
  sandbox: { isolated: boolean; warning: string | null };
  /** The plan gate's cost estimate beside the actuals per stage (lib/runs/estimate.ts); null when none was made. */
  estimate?: EstimateReport | null;
  /** Display names of the user ids that appear in the run. */
  people: Record<string, string>;
  /** Decisions made from Slack or Telegram (who, on what, when): the timeline says "by Ann from Slack". */
  chatOrigins?: ChatOrigin[];
  /** The repository instructions (AGENTS.md …) the stages' prompts quoted, with their sizes and sha256. */
  instructions?: Array<{ path: string; bytes: number; sha: string; cut: boolean; stages: string[] }>;
};

export type ModelCall = {
  id: string;
  stage: string;
  model: string;
  tokensIn: number;
  tokensOut: number;
  costUsd: number;
  latencyMs: number;
  status: string;
  attempt: number;
  error: string | null;
  createdAt: string;
};

export const runKeys = {
  list: (query: string) => ["runs", query] as const,
  detail: (id: string) => ["run", id] as const,
  events: (id: string) => ["run", id, "events"] as const,
  modelCalls: (id: string) => ["run", id, "model-calls"] as const,
  diff: (id: string) => ["run", id, "diff"] as const,
  inbox: ["inbox"] as const,
  projects: ["projects"] as const,
};
