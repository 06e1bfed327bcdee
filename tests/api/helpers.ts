import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { write } from "@/lib/db";
import { createRun } from "@/lib/db/queries/runs";
import { appendEventsTx } from "@/lib/db/event-store";
import { gates } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import type { DecisionDeadlineInfo } from "@/lib/workflow";

export const ORIGIN = "http://127.0.0.1:3000";
export const ADMIN = { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}` };

type Handler = (request: Request, context: { params: Promise<any> }) => Promise<Response>;

/** Call a route handler as Next would, with a real Request. */
export async function call(
  handler: Handler,
  {
    method = "GET",
    path: urlPath = "/",
    params = {},
    headers = {},
    body,
    rawBody,
  }: {
    method?: string;
    path?: string;
    params?: Record<string, string>;
    headers?: Record<string, string>;
    body?: unknown;
    rawBody?: string;
  } = {},
) {
  const init: RequestInit = { method, headers: { ...headers } };
  if (rawBody !== undefined) init.body = rawBody;
  else if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)["content-type"] = "application/json";
  }
  const response = await handler(new Request(`${ORIGIN}${urlPath}`, init), { params: Promise.resolve(params) });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: text ? JSON.parse(text) : null };
}

/** A real git repository in a temp dir. */
export function makeRepo(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-repo-"));
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=T", "-c", "user.email=t@example.com", ...args], { cwd: dir });
  git("init", "-q", "-b", "main");
  fs.writeFileSync(path.join(dir, "README.md"), "# test\n");
  git("add", ".");
  git("commit", "-q", "-m", "init");
  return dir;
}

/** A run waiting at a plan gate, opened as the workflow opens one: the gate row and its events in one transaction. */
export async function runAtPlanGate({
  projectId,
  userId,
  request,
  deadline,
}: {
  projectId: string;
  userId: string;
  request: string;
  deadline?: DecisionDeadlineInfo;
}): Promise<{ runId: string; gateId: string }> {
  const run = await createRun({ projectId, userId, request, config: {} });
  const gateId = newId("gate");
  await write(async (tx) => {
    await appendEventsTx(tx, run.id, [
      { type: "RUN_STARTED", payload: {} },
      { type: "STAGE_STARTED", payload: { stage: "planning" } },
    ] as never);
    await tx.insert(gates).values({ id: gateId, workflowRunId: run.id, gateNumber: 1, kind: "plan" });
    await appendEventsTx(tx, run.id, [{ type: "APPROVAL_REQUESTED", payload: { gateId, gateNumber: 1, kind: "plan", ...(deadline ? { deadline } : {}) } }] as never);
  });
  return { runId: run.id, gateId };
}
