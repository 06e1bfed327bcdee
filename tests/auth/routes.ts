import fs from "node:fs";
import path from "node:path";
import type { World } from "./fixtures";

/*
 * The route list: every route handler under app/ found on disk, with what it takes to reach it in the fixture world
 * (dynamic parameters, sample bodies and queries). Shared by the authorization matrix and the fuzz test, so a new route
 * is covered by both (or fails in both) without anyone editing them.
 */

export const ROOT = path.resolve(import.meta.dirname, "../..");
export const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;
export const MUTATIONS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** Routes that answer without a user, and why that is safe. */
export const PUBLIC_ROUTES: Record<string, string> = {
  "app/api/health/route.ts": "liveness probe for load balancers and the e2e web server; reports no project or run data",
  "app/api/auth/[...nextauth]/route.ts": "Auth.js's own endpoints must work before sign-in; Auth.js checks its CSRF token",
  "app/api/inngest/route.ts": "Inngest serve endpoint: the SDK runs in signed mode and verifies X-Inngest-Signature (embedded: the signing key made from the executor key; Inngest: INNGEST_SIGNING_KEY)",
  "app/e/[key]/route.ts": "Inngest event ingestion for the embedded executor, keyed by the event key in the path",
  "app/api/github/webhook/route.ts": "GitHub App webhooks, verified by HMAC with GITHUB_APP_WEBHOOK_SECRET",
  "app/api/slack/commands/route.ts": "Slack slash commands: verified by Slack's v0 signature (HMAC-SHA256 with SLACK_SIGNING_SECRET, timestamps over 5 minutes refused); a chat account acts only as the user it is linked to, under that user's roles",
  "app/api/slack/interactions/route.ts": "Slack button presses and modals: verified by Slack's v0 signature; a press acts only as the linked user, under that user's roles",
  "app/api/telegram/webhook/[channelId]/route.ts": "Telegram updates for a project's bot: verified by X-Telegram-Bot-Api-Secret-Token (derived per channel); a press acts only as the linked user, under that user's roles",
  "app/v1/checkpoint/[runId]/async/route.ts": "Inngest's checkpoint API for the embedded executor: the app authenticates with the executor key as its bearer",
};

/** Bodies a mutation needs to get past input parsing (parsing comes before the role check). */
export function sampleBodies(key: string, w: World): unknown[] {
  const specific: Record<string, unknown> = {
    "POST /api/runs": { projectId: w.project.id, request: "matrix: a new run" },
    "POST /api/projects": { name: "matrix: another project", repository: { type: "local", path: w.repoPath } },
    "POST /api/projects/[id]/members": { email: "matrix-invitee@example.com", role: "approver" },
    "PATCH /api/projects/[id]/members/[userId]": { role: "approver" },
    "POST /api/mermaid/validate": { source: "flowchart TD\n  A --> B" },
    "POST /api/runs/[id]/ask-back": { question: "matrix: why this order?" },
    "POST /api/runs/[id]/budget": { action: "finish_task" },
    "POST /api/inbox/[itemId]": { action: "read" },
    "PUT /api/projects/[id]/notifications/[kind]": {
      config: { url: "http://127.0.0.1:9/matrix" },
      secret: `whsec_${Buffer.alloc(32, 7).toString("base64")}`,
    },
    "PUT /api/me/notifications/[channel]": { config: { address: "matrix-me@example.com" } },
    "PUT /api/projects/[id]/mcp-servers/[name]": { server: { url: "https://mcp.example.com/mcp", headers: { authorization: "Bearer matrix-token" } } },
  };
  const generic = [undefined, {}, { feedback: "matrix" }, { decision: "retry" }, { response: "matrix" }, { role: "viewer" }, { name: "matrix" }];
  return key in specific ? [specific[key]] : generic;
}

/** Query strings a GET needs to get past parsing. */
export function sampleQuery(key: string, w: World): string {
  const queries: Record<string, string> = { "GET /api/run-costs": `?ids=${w.runId}` };
  return queries[key] ?? "";
}

/** Where each dynamic segment points in the fixture world. */
export function paramValue(previous: string, name: string, w: World): { value: string; project: boolean } {
  if (previous === "runs" && name === "id") return { value: w.runId, project: true };
  if (previous === "run-groups" && name === "id") return { value: w.groupId, project: true };
  if (previous === "projects" && name === "id") return { value: w.project.id, project: true };
  if (previous === "clarifications" && name === "id") return { value: w.clarificationId, project: true };
  if (previous === "members" && name === "userId") return { value: w.target.id, project: true };
  if (previous === "tokens" && name === "id") return { value: w.approver.tokenId, project: false };
  // An inbox item is the fixture run's gate: deciding people of the project may mark it, a viewer 403, others 404.
  if (previous === "inbox" && name === "itemId") return { value: w.gateId, project: true };
  if (previous === "checkpoint" && name === "runId") return { value: w.runId, project: false };
  if (previous === "invitations" && name === "invitationId") return { value: w.invitationId, project: true };
  if (previous === "invitations" && name === "id") return { value: w.invitationId, project: false };
  // A project's channel kind; the redelivery of the fixture's failed delivery; the caller's own channel.
  if (previous === "notifications" && name === "kind") return { value: "webhook", project: true };
  if (previous === "deliveries" && name === "deliveryId") return { value: w.deliveryId, project: true };
  if (previous === "notifications" && name === "channel") return { value: "email", project: false };
  // The caller's own chat link (someone else's id answers 404); a project's Telegram channel (a public route).
  if (previous === "chat-links" && name === "id") return { value: "chatlink_matrix", project: false };
  if (previous === "webhook" && name === "channelId") return { value: "channel_matrix", project: true };
  // A project's MCP server, by name.
  if (previous === "mcp-servers" && name === "name") return { value: "matrix", project: true };
  throw new Error(`No fixture for the route parameter [${name}] after /${previous}/: add one to paramValue() in ${"tests/auth/routes.ts"}`);
}

function findRouteFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return findRouteFiles(full);
    return /^route\.(ts|tsx|js)$/.test(entry.name) ? [full] : [];
  });
}

export type Handler = ((request: Request, context: { params: Promise<unknown> }) => Promise<Response>) & { guarded?: boolean };
export type RouteCase = { file: string; method: string; pattern: string; key: string; handler: Handler };

const files = findRouteFiles(path.join(ROOT, "app")).map((f) => path.relative(ROOT, f).split(path.sep).join("/")).sort();

export async function loadCases(): Promise<RouteCase[]> {
  const cases: RouteCase[] = [];
  for (const file of files) {
    const mod = (await import(path.join(ROOT, file))) as Record<string, unknown>;
    const pattern = "/" + file.replace(/^app\//, "").replace(/\/route\.(ts|tsx|js)$/, "").replace(/\([^)]+\)\//g, "");
    for (const method of METHODS) {
      const handler = mod[method] as Handler | undefined;
      if (typeof handler === "function") cases.push({ file, method, pattern, key: `${method} ${pattern}`, handler });
    }
  }
  return cases;
}

export function target(c: RouteCase, w: World) {
  const params: Record<string, string> = {};
  let projectScoped = false;
  const segments = c.pattern.split("/").filter(Boolean);
  const urlPath = segments
    .map((segment, i) => {
      const match = /^\[(\w+)\]$/.exec(segment);
      if (!match) return segment;
      const { value, project } = paramValue(segments[i - 1] ?? "", match[1]!, w);
      params[match[1]!] = value;
      projectScoped ||= project;
      return value;
    })
    .join("/");
  return { params, path: `/${urlPath}${sampleQuery(c.key, w)}`, projectScoped };
}

