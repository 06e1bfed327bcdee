import http from "node:http";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { simpleParser, type ParsedMail } from "mailparser";
import { setMember } from "@/lib/db/queries/members";
import { createProject } from "@/lib/projects/queries";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { getDb } from "@/lib/db";
import { users } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import type { SessionUser } from "@/lib/auth/guard";
import { makeRepo, runAtPlanGate } from "../api/helpers";
import type { DecisionDeadlineInfo } from "@/lib/workflow";

/*
 * Real protocol endpoints for the channel tests: an HTTP receiver (webhooks, Slack's Web API, Telegram's Bot API) that
 * records every request, and an in-process SMTP server whose messages are parsed with mailparser.
 */

export type Received = { method: string; path: string; headers: http.IncomingHttpHeaders; body: string };

export async function startHttpReceiver(respond: (req: Received) => { status: number; json?: unknown }) {
  const requests: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const received = { method: req.method ?? "", path: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString("utf8") };
      requests.push(received);
      const answer = respond(received);
      res.writeHead(answer.status, { "content-type": "application/json" });
      res.end(JSON.stringify(answer.json ?? {}));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, requests, close: () => new Promise<void>((r) => server.close(() => r())) };
}

export async function startSmtp({ username, password }: { username: string; password: string }) {
  const messages: Array<{ mail: ParsedMail; envelopeTo: string[] }> = [];
  const logins: Array<{ username: string; password: string }> = [];
  const server = new SMTPServer({
    // Plain SMTP on loopback: the AUTH exchange is what the test checks (no TLS certificate to make).
    disabledCommands: ["STARTTLS"],
    allowInsecureAuth: true,
    authMethods: ["PLAIN", "LOGIN"],
    logger: false,
    onAuth(auth, _session, callback) {
      logins.push({ username: auth.username ?? "", password: auth.password ?? "" });
      if (auth.username === username && auth.password === password) return callback(null, { user: username });
      return callback(new Error("Invalid username or password"));
    },
    onData(stream, session, callback) {
      simpleParser(stream)
        .then((mail) => {
          messages.push({ mail, envelopeTo: session.envelope.rcptTo.map((r) => r.address) });
          callback();
        })
        .catch(callback);
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.server.address() as AddressInfo;
  return { port, messages, logins, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** A project (owner + an approver + a viewer) with a run waiting at a plan gate. */
export async function gateWorld({ deadline }: { deadline?: DecisionDeadlineInfo } = {}) {
  const owner = await ensureLocalOwner();
  const user: SessionUser = { id: owner.id, name: owner.name, via: "admin-token" };
  const project = await createProject({ name: "notify", ownerId: owner.id, repository: { type: "local", path: makeRepo() } });
  const db = await getDb();
  const person = async (name: string, role: "approver" | "viewer") => {
    const id = newId("usr");
    await db.insert(users).values({ id, name, email: `${name.toLowerCase()}-${id}@example.com` });
    await setMember({ projectId: project.id, userId: id, role });
    return { id, name, via: "api-token" as const };
  };
  const approver = await person("Approver", "approver");
  const viewer = await person("Viewer", "viewer");
  const { runId, gateId } = await runAtPlanGate({ projectId: project.id, userId: owner.id, request: "Add a changelog entry", deadline });
  return { owner: user, approver, viewer, project, runId, gateId };
}

/** A random Standard Webhooks secret. */
export function webhookSecret(): string {
  return `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}`;
}
