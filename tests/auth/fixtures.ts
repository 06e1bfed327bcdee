import { encode } from "@auth/core/jwt";
import { write } from "@/lib/db";
import { clarificationRequests, gates, notificationDeliveries, users } from "@/lib/db/schema";
import { createRun } from "@/lib/db/queries/runs";
import { appendEventsTx } from "@/lib/db/event-store";
import { createProject } from "@/lib/projects/queries";
import { setMember } from "@/lib/db/queries/members";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { createApiToken, revokeApiToken } from "@/lib/auth/tokens";
import { inviteMember, listProjectInvitations } from "@/lib/auth/invitations";
import { getAuthSecret } from "@/lib/auth/secret";
import { startSession } from "@/lib/auth/sessions";
import { newId } from "@/lib/ids";
import type { ProjectRole } from "@/lib/db/schema";
import { makeRepo } from "../api/helpers";

export const ORIGIN = "http://127.0.0.1:3000";

type Handler = (request: Request, context: { params: Promise<any> }) => Promise<Response>;

export type Result = { status: number; headers: Headers; json: any };

/**
 * Call a route handler as Next would. Only JSON bodies are read: a stream (SSE) is cancelled so that a live endpoint
 * never hangs the test.
 */
export async function call(
  handler: Handler,
  {
    method = "GET",
    path = "/",
    params = {},
    headers = {},
    body,
    rawBody,
  }: { method?: string; path?: string; params?: Record<string, string>; headers?: Record<string, string>; body?: unknown; rawBody?: string } = {},
): Promise<Result> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (rawBody !== undefined) init.body = rawBody;
  else if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)["content-type"] = "application/json";
  }
  const response = await handler(new Request(`${ORIGIN}${path}`, init), { params: Promise.resolve(params) });
  const type = response.headers.get("content-type") ?? "";
  let json: unknown = null;
  if (type.includes("json")) json = await response.json();
  else await response.body?.cancel();
  return { status: response.status, headers: response.headers, json };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

export async function makeUser(name: string, email?: string) {
  const id = newId("usr");
  await write(async (tx) => {
    await tx.insert(users).values({ id, name, email: email ?? `${name.toLowerCase()}-${id}@example.com` });
  });
  const { token, id: tokenId } = await createApiToken({ userId: id, name: `${name}'s token` });
  return { id, name, token, tokenId, headers: bearer(token) };
}

export type TestUser = Awaited<ReturnType<typeof makeUser>>;

/** An Auth.js session cookie for a user, exactly as the sign-in callback would set it. */
export async function sessionCookie(userId: string): Promise<string> {
  const name = "authjs.session-token";
  // As a sign-in does: a recorded session whose id the JWT carries.
  const sid = await startSession({ userId });
  const value = await encode({ token: { sub: userId, name: "cookie user", sid }, secret: getAuthSecret(), salt: name });
  return `${name}=${value}`;
}

/**
 * A project owned by the local owner with one member per role, a stranger, a run waiting at a plan gate, a pending
 * clarification, a pending invitation, and a revoked token.
 */
export async function makeWorld() {
  const owner = await ensureLocalOwner();
  const ownerToken = await createApiToken({ userId: owner.id, name: "owner" });
  const repoPath = makeRepo();
  const project = await createProject({ name: "matrix", ownerId: owner.id, repository: { type: "local", path: repoPath } });
  const viewer = await makeUser("Viewer");
  const approver = await makeUser("Approver");
  const stranger = await makeUser("Stranger");
  const target = await makeUser("Target");
  const member = async (user: TestUser, role: ProjectRole) => setMember({ projectId: project.id, userId: user.id, role });
  await member(viewer, "viewer");
  await member(approver, "approver");
  await member(target, "viewer");

  const ownerUser = { id: owner.id, name: owner.name, via: "api-token" as const };
  await inviteMember({ user: ownerUser, projectId: project.id, email: "invitee@example.com", role: "viewer" });
  const [invitation] = await listProjectInvitations({ user: ownerUser, projectId: project.id });

  const revoked = await createApiToken({ userId: approver.id, name: "revoked" });
  await revokeApiToken({ id: revoked.id, userId: approver.id });

  const groupId = newId("grp");
  const run = await createRun({ projectId: project.id, userId: owner.id, request: "matrix run", config: {}, groupId });
  const gateId = newId("gate");
  const clarificationId = newId("clr");
  await write(async (tx) => {
    await appendEventsTx(tx, run.id, [
      { type: "RUN_STARTED", payload: {} },
      { type: "STAGE_STARTED", payload: { stage: "planning" } },
    ] as never);
    await tx.insert(clarificationRequests).values({
      id: clarificationId,
      workflowRunId: run.id,
      stage: "planning",
      question: "Which database?",
      responseType: "text",
    });
    await tx.insert(gates).values({ id: gateId, workflowRunId: run.id, gateNumber: 1, kind: "plan" });
    await appendEventsTx(tx, run.id, [{ type: "APPROVAL_REQUESTED", payload: { gateId, gateNumber: 1, kind: "plan" } }] as never);
  });
  // A failed decision notice in the project's delivery log (POST …/deliveries/:id/redeliver).
  const deliveryId = newId("ntf");
  await write((tx) =>
    tx.insert(notificationDeliveries).values({
      id: deliveryId,
      projectId: project.id,
      workflowRunId: run.id,
      kind: "webhook",
      target: "127.0.0.1:9",
      subjectType: "gate",
      subjectId: gateId,
      reason: "opened",
      message: { title: "matrix", url: "http://127.0.0.1:3000/" },
      status: "failed",
      messageId: "msg_matrix",
    }),
  );
  return {
    owner: { id: owner.id, token: ownerToken.token, headers: bearer(ownerToken.token) },
    project,
    repoPath,
    viewer,
    approver,
    stranger,
    target,
    revokedToken: revoked.token,
    runId: run.id,
    /** The group the fixture run was started in (GET /api/run-groups/:id). */
    groupId,
    gateId,
    clarificationId,
    /** A pending invitation of invitee@example.com (no account) to the project as a viewer. */
    invitationId: invitation!.id,
    deliveryId,
    setMember: member,
  };
}

export type World = Awaited<ReturnType<typeof makeWorld>>;
