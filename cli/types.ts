import type { RunDto } from "../lib/runs/dto";

/* The API's response shapes, as far as the CLI reads them (DESIGN.md §5). Types only: nothing of the server runs here. */

export type Run = RunDto;

export type Project = {
  id: string;
  name: string;
  repository: { type: "local"; path: string } | { type: "github"; owner: string; repo: string };
  role?: string;
};

export type PlanTask = { id: string; title: string; description?: string; dependsOn?: string[]; files?: string[] };
export type Plan = { summary?: string; mermaid: string; tasks?: PlanTask[] };

export type Gate = {
  id: string;
  kind: string;
  status: string;
  gateNumber: number;
  context: { plan?: Plan; version?: number; [key: string]: unknown } | null;
};

export type Clarification = {
  id: string;
  workflowRunId: string;
  stage: string;
  question: string;
  context: string | null;
  options: string[] | null;
  responseType: "text" | "single_choice" | "multiple_choice" | "file";
  status: string;
  response: unknown;
};

export type Cost = { usd: number; tokensIn: number; tokensOut: number; calls: number };

export type RunDetail = { run: Run; gates: Gate[]; clarifications: Clarification[]; artifacts: unknown[]; cost: Cost };

export type RunEvent = { sequence: number; type: string; payload: Record<string, unknown>; timestamp: string };

export type FileAnswer = { fileName: string; contentBase64: string; contentType?: string };
export type Answer = string | string[] | FileAnswer;
