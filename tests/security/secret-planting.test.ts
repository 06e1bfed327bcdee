import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { and, eq } from "drizzle-orm";
import * as runsRoute from "@/app/api/runs/route";
import * as runRoute from "@/app/api/runs/[id]/route";
import * as eventsRoute from "@/app/api/runs/[id]/events/route";
import * as streamRoute from "@/app/api/runs/[id]/stream/route";
import * as diffRoute from "@/app/api/runs/[id]/diff/route";
import * as modelCallsRoute from "@/app/api/runs/[id]/model-calls/route";
import * as answerRoute from "@/app/api/clarifications/[id]/answer/route";
import { getClient, getDb } from "@/lib/db";
import { clarificationRequests } from "@/lib/db/schema";
import { resetEnvCache } from "@/lib/env";
import * as retryRoute from "@/app/api/runs/[id]/retry/route";
import { git, makeRepo, newProject, until, waitForStatus } from "../workflow/harness";
import { listEvents } from "@/lib/db/event-store";
import { useScriptedWorkflow, type Reply } from "../workflow/model-server";
import { FAKE } from "./fake-secrets";

/*
 * The proof for finding 2: fake keys configured in env, then planted in the request, in the model's output (tool calls
 * and text), in command output, in a file of the repository and in an uploaded file. Afterwards not one of them — nor a
 * prefix of a configured one, nor a base64 / URL-encoded form — is in any database table, the logs, any git object the
 * run added to its branch, or the API and SSE responses about the run.
 */

/** Configured secrets; their first 8 characters are unlike anything else in the test, so a prefix leak is visible. */
const CONFIGURED = {
  GITHUB_APP_CLIENT_SECRET: "Qx7pL2mZ-client-secret-4471",
  GATEHOUSE_ADMIN_PASSWORD: "Vb3nK9tR-owner-password",
  DEEPSEEK_API_KEY: "Hj5sW1cY-deepseek-key-9090",
};
const UNCONFIGURED = [FAKE.openai, FAKE.anthropic, FAKE.github, FAKE.privateKey];

const t = useScriptedWorkflow();
const logLines: string[] = [];
/** Every request the implementer's model received (its prompts, including its own earlier turns and tool results). */
const prompts: string[] = [];

beforeAll(() => {
  Object.assign(process.env, CONFIGURED);
  resetEnvCache();
  for (const method of ["log", "info", "warn", "error"] as const) {
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void logLines.push(args.map(String).join(" ")));
  }
});
afterAll(() => {
  vi.restoreAllMocks();
  for (const name of Object.keys(CONFIGURED)) delete process.env[name];
  resetEnvCache();
});

const b64 = (s: string) => Buffer.from(s).toString("base64");
const cfg = Object.values(CONFIGURED);

/** What must never appear: configured values and an 8-character prefix, their encodings; the bodies of key shapes. */
function needles(): Array<{ what: string; text: string }> {
  const out: Array<{ what: string; text: string }> = [];
  for (const s of cfg) {
    out.push({ what: `prefix of ${s}`, text: s.slice(0, 8) });
    for (let a = 0; a < 3; a++) {
      const enc = Buffer.from("x".repeat(a) + s).toString("base64").slice(4, 16);
      out.push({ what: `base64@${a} of ${s}`, text: enc }, { what: `base64url@${a} of ${s}`, text: enc.replace(/\+/g, "-").replace(/\//g, "_") });
    }
    out.push({ what: `url-encoded ${s}`, text: encodeURIComponent(`${s}`).slice(0, 12) });
  }
  for (const s of UNCONFIGURED) {
    const body = s.includes("PRIVATE KEY") ? s.split("\n")[1]!.slice(0, 24) : s.slice(8, 24);
    out.push({ what: `key shape ${s.slice(0, 12)}…`, text: body });
  }
  return out;
}

function count(haystack: string, needle: string): number {
  let n = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + 1)) n++;
  return n;
}

/** The scripted implementer: reads the leaky file, runs leaky commands, tries to write secrets, asks for a file, says a key. */
function leakyImplementer(body: { messages?: Array<{ role: string; content?: unknown; tool_calls?: unknown[] }> }): Reply {
  prompts.push(JSON.stringify(body));
  const turn = (body.messages ?? []).filter((m) => m.role === "assistant" && m.tool_calls?.length).length;
  const firstUser = String((body.messages ?? []).find((m) => m.role === "user")?.content ?? "");
  const note = /"files":\["([^"]+)"/.exec(firstUser)?.[1] ?? "docs/requests/planted.md";
  if (turn === 0) {
    return {
      toolCalls: [
        { name: "update_todo", arguments: { id: "T1", status: "in_progress" } },
        { name: "read_file", arguments: { path: "config/leak.txt" } },
        { name: "run_command", arguments: { command: "cat", args: ["config/leak.txt"] } },
        { name: "run_command", arguments: { command: "sh", args: ["-c", `echo ${FAKE.github} > leaked.txt`] } },
        { name: "write_file", arguments: { path: note, content: `# note\n\nkey: ${CONFIGURED.DEEPSEEK_API_KEY}\n${FAKE.privateKey}\n` } },
        { name: "write_file", arguments: { path: `${note}.b64`, content: b64(`client=${CONFIGURED.GITHUB_APP_CLIENT_SECRET}`) } },
        { name: "write_file", arguments: { path: note, content: "# note\n\nWritten without secrets.\n" } },
      ],
    };
  }
  if (turn === 1) {
    return {
      toolCalls: [
        { name: "request_clarification", arguments: { question: `Upload the key file (the old one was ${FAKE.openai})`, responseType: "file" } },
      ],
    };
  }
  if (turn === 2) return { toolCalls: [{ name: "update_todo", arguments: { id: "T1", status: "done" } }] };
  return { text: `Done. For the record the keys are ${CONFIGURED.DEEPSEEK_API_KEY.slice(0, 20)} and ${FAKE.anthropic}.` };
}

const admin = { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}` };
const req = (url: string, init: RequestInit = {}) => new Request(`http://127.0.0.1:3000${url}`, { ...init, headers: { ...admin, ...init.headers } });

async function readSse(runId: string): Promise<string> {
  const controller = new AbortController();
  const res = await streamRoute.GET(req(`/api/runs/${runId}/stream`, { signal: controller.signal }), { params: Promise.resolve({ id: runId }) });
  const reader = res.body!.getReader();
  let text = "";
  const deadline = Date.now() + 2_000;
  while (Date.now() < deadline) {
    const next = await Promise.race([reader.read(), new Promise<null>((r) => setTimeout(() => r(null), 300))]);
    if (!next || next.done) break;
    text += new TextDecoder().decode(next.value);
  }
  controller.abort();
  await reader.cancel().catch(() => {});
  return text;
}

async function everyTable(): Promise<string> {
  const client = await getClient();
  const names = (await client.execute("select name from sqlite_master where type = 'table' and name not like 'sqlite_%'")).rows.map((r) =>
    String(r.name),
  );
  const dumps: string[] = [];
  for (const name of names) {
    const rows = await client.execute(`select * from "${name}"`);
    dumps.push(`== ${name}\n${JSON.stringify(rows.rows, (_k, v) => (typeof v === "bigint" ? String(v) : v instanceof ArrayBuffer ? Buffer.from(v).toString("utf8") : v))}`);
  }
  return dumps.join("\n");
}

function branchObjects(repo: string, branch: string): string {
  const objects = git(repo, "rev-list", "--objects", `main..${branch}`)
    .split("\n")
    .filter(Boolean)
    .map((line) => line.split(" ")[0]!);
  return [branch, ...objects.map((sha) => git(repo, "cat-file", "-p", sha))].join("\n");
}

/** A repository whose base branch holds a key file, and a run on it with the scripted implementer. */
async function runOnKeyFile(request: string) {
  const repo = makeRepo();
  fs.mkdirSync(path.join(repo, "config"));
  fs.writeFileSync(path.join(repo, "config/leak.txt"), `client=${CONFIGURED.GITHUB_APP_CLIENT_SECRET}\n${FAKE.privateKey}\n`);
  git(repo, "add", ".");
  git(repo, "commit", "-qm", "a key file in the base branch");
  const { project } = await newProject(t.h.user, repo);
  const created = await runsRoute.POST(
    req("/api/runs", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        projectId: project.id,
        request,
        config: { trustMode: { planning: "auto" }, modelRouting: { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" } },
      }),
    }),
    { params: Promise.resolve({}) },
  );
  const { run } = (await created.json()) as { run: { id: string } };
  return { repo, run };
}

describe("finding 2: planted secrets", () => {
  it("appear nowhere: every DB table, the logs, the run branch's git objects, API and SSE responses (count printed, must be 0)", async () => {
    t.model.respond(leakyImplementer);
    const repo = makeRepo();
    fs.mkdirSync(path.join(repo, "config"));
    fs.writeFileSync(
      path.join(repo, "config/leak.txt"),
      `client=${CONFIGURED.GITHUB_APP_CLIENT_SECRET}\nopenai=${FAKE.openai}\n${FAKE.privateKey}\nb64=${b64(CONFIGURED.DEEPSEEK_API_KEY)}\n`,
    );
    git(repo, "add", ".");
    git(repo, "commit", "-qm", "a file with secrets in the base branch");
    const { project } = await newProject(t.h.user, repo);

    const request = [
      `Deploy with ${CONFIGURED.GITHUB_APP_CLIENT_SECRET} and ${FAKE.openai} (owner password ${CONFIGURED.GATEHOUSE_ADMIN_PASSWORD}).`,
      `Encoded: ${b64(`key=${CONFIGURED.DEEPSEEK_API_KEY}`)} and ${encodeURIComponent(`x ${CONFIGURED.DEEPSEEK_API_KEY}`)}.`,
      "[check: cat config/leak.txt]",
    ].join("\n");
    const created = await runsRoute.POST(
      req("/api/runs", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          projectId: project.id,
          request,
          config: {
            trustMode: { planning: "auto" },
            modelRouting: { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" },
          },
        }),
      }),
      { params: Promise.resolve({}) },
    );
    expect(created.status).toBe(201);
    const { run } = (await created.json()) as { run: { id: string; branch: string } };

    await waitForStatus(run.id, ["awaiting_clarification"]);
    const db = await getDb();
    const question = await until(
      async () =>
        (await db.select().from(clarificationRequests).where(and(eq(clarificationRequests.workflowRunId, run.id), eq(clarificationRequests.status, "pending"))))[0],
      "the file question",
    );
    const file = `OPENAI=${FAKE.openai}\nCLIENT=${CONFIGURED.GITHUB_APP_CLIENT_SECRET}\n${FAKE.privateKey}\n`;
    const answered = await answerRoute.POST(
      req(`/api/clarifications/${question.id}/answer`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ response: { fileName: "keys.env", contentBase64: b64(file) } }),
      }),
      { params: Promise.resolve({ id: question.id }) },
    );
    expect(answered.status).toBe(200);
    const done = await waitForStatus(run.id, ["completed", "failed", "paused"], 120_000);
    expect(done.status).toBe("completed");

    const params = { params: Promise.resolve({ id: run.id }) };
    const sources: Record<string, string> = {
      database: await everyTable(),
      logs: logLines.join("\n"),
      "model prompts": prompts.join("\n"),
      git: branchObjects(repo, done.branch!),
      "GET /api/runs/:id": await (await runRoute.GET(req(`/api/runs/${run.id}`), params)).text(),
      "GET /api/runs/:id/events": await (await eventsRoute.GET(req(`/api/runs/${run.id}/events`), params)).text(),
      "GET /api/runs/:id/diff": await (await diffRoute.GET(req(`/api/runs/${run.id}/diff`), params)).text(),
      "GET /api/runs/:id/model-calls": await (await modelCallsRoute.GET(req(`/api/runs/${run.id}/model-calls`), params)).text(),
      "GET /api/runs/:id/stream (SSE)": await readSse(run.id),
    };
    // The scripted model really did see the redacted forms, and the run really did its work.
    expect(sources.git).toContain("Written without secrets.");
    expect(sources["GET /api/runs/:id/stream (SSE)"]).toContain("RUN_COMPLETED");
    expect(sources.database).toContain("Secret detected");
    expect(prompts.length).toBeGreaterThanOrEqual(4);

    const found: string[] = [];
    for (const [where, text] of Object.entries(sources)) {
      for (const n of needles()) {
        const c = count(text, n.text);
        if (c) found.push(`${where}: ${c}× ${n.what}`);
      }
    }
    const total = found.reduce((sum, f) => sum + Number(/: (\d+)×/.exec(f)![1]), 0);
    process.stdout.write(
      `\nplanted secrets: ${cfg.length} configured + ${UNCONFIGURED.length} key shapes, ${needles().length} forms, searched in ` +
        `${Object.keys(sources).join(", ")} (${Object.values(sources).reduce((n, s) => n + s.length, 0)} characters) → found ${total}\n` +
        found.map((f) => `  ${f}\n`).join(""),
    );
    if (found.length && process.env.PLANT_DEBUG) {
      const db = sources.database!;
      for (const n of needles()) for (let at = db.indexOf(n.text); at !== -1; at = db.indexOf(n.text, at + 1)) {
        const table = db.lastIndexOf("== ", at);
        process.stdout.write(`${db.slice(table, db.indexOf("\n", table))} … ${db.slice(Math.max(0, at - 300), at + 60)}\n\n`);
      }
    }
    expect(found).toEqual([]);
  }, 180_000);

  it("a secret a command copies into a file pauses the run with 'secret detected' instead of being committed; retry redoes the turn", async () => {
    let sawNote = false;
    t.model.respond((body) => {
      const messages = (body.messages ?? []) as Array<{ role: string; content?: unknown; tool_calls?: unknown[] }>;
      const told = messages.some((m) => m.role === "user" && String(m.content).includes("Secret detected"));
      const firstUser = String(messages.find((m) => m.role === "user")?.content ?? "");
      const note = /"files":\["([^"]+)"/.exec(firstUser)?.[1] ?? "docs/requests/copy.md";
      const turns = messages.filter((m) => m.role === "assistant" && m.tool_calls?.length).length;
      if (!told) {
        return {
          toolCalls: [
            { name: "update_todo", arguments: { id: "T1", status: "in_progress" } },
            { name: "run_command", arguments: { command: "sh", args: ["-c", `mkdir -p "$(dirname ${note})" && cp config/leak.txt ${note}`] } },
            { name: "update_todo", arguments: { id: "T1", status: "done" } },
          ],
        };
      }
      if (!sawNote) {
        sawNote = true;
        return {
          toolCalls: [
            { name: "update_todo", arguments: { id: "T1", status: "in_progress" } },
            { name: "write_file", arguments: { path: note, content: "# note\n\nThe key is read from the environment.\n" } },
            { name: "update_todo", arguments: { id: "T1", status: "done" } },
          ],
        };
      }
      return turns > 0 ? { text: "Done without secrets." } : { toolCalls: [{ name: "update_todo", arguments: { id: "T1", status: "done" } }] };
    });
    const { repo, run } = await runOnKeyFile("Copy the config into the note");
    const paused = await waitForStatus(run.id, ["paused", "completed", "failed", "awaiting_fix_decision"], 120_000);
    expect(paused.status).toBe("paused");
    expect(paused.pauseReason).toMatchObject({ reason: "secret_detected", stage: "implementation" });
    expect(paused.pauseReason!.message).toMatch(/^Secret detected in docs\/requests\/.+\.md: the changes since the last checkpoint were not committed/);
    expect(git(repo, "log", "--format=%s", `main..${paused.branch}`)).not.toMatch(/T1/);

    const retried = await retryRoute.POST(req(`/api/runs/${run.id}/retry`, { method: "POST" }), { params: Promise.resolve({ id: run.id }) });
    expect(retried.status).toBe(200);
    const done = await waitForStatus(run.id, ["completed", "failed"], 120_000);
    expect(done.status).toBe("completed");
    const added = branchObjects(repo, done.branch!);
    expect(added).toContain("The key is read from the environment.");
    expect(added).not.toContain(CONFIGURED.GITHUB_APP_CLIENT_SECRET.slice(0, 8));
    expect(added).not.toContain("PRIVATE KEY");
  }, 180_000);

  it("a secret a command copies into a file before a wait is left out of the work-in-progress commit (SECRET_WITHHELD); the rest of the work is kept", async () => {
    const asked = { done: false };
    t.model.respond((body) => {
      const messages = (body.messages ?? []) as Array<{ role: string; content?: unknown; tool_calls?: unknown[] }>;
      const turns = messages.filter((m) => m.role === "assistant" && m.tool_calls?.length).length;
      if (turns === 0) {
        return {
          toolCalls: [
            { name: "update_todo", arguments: { id: "T1", status: "in_progress" } },
            // The file name has glob characters, so only a literal exclusion leaves exactly it out.
            { name: "run_command", arguments: { command: "sh", args: ["-c", "mkdir -p notes && cp config/leak.txt 'notes/co[p]y*.txt' && echo kept-work > notes/keep.txt"] } },
          ],
        };
      }
      if (!asked.done) {
        asked.done = true;
        return { toolCalls: [{ name: "request_clarification", arguments: { question: "Keep the copy?", responseType: "text" } }] };
      }
      const firstUser = String(messages.find((m) => m.role === "user")?.content ?? "");
      const note = /"files":\["([^"]+)"/.exec(firstUser)?.[1] ?? "docs/requests/copy.md";
      return turns < 4
        ? {
            toolCalls: [
              { name: "write_file", arguments: { path: note, content: "# note\n\nThe copy was not kept.\n" } },
              { name: "update_todo", arguments: { id: "T1", status: "done" } },
            ],
          }
        : { text: "Done." };
    });
    // The kept work (notes/) is declared in the plan: a file outside it would go to a plan gate about scope.
    const { repo, run } = await runOnKeyFile("Copy the config, then ask\n\n[scope: notes/]");
    const waiting = await waitForStatus(run.id, ["awaiting_clarification", "completed", "failed", "paused"], 120_000);
    expect(waiting.status).toBe("awaiting_clarification");

    // The wait's work-in-progress commit holds the harmless file, not the copied key.
    const parked = branchObjects(repo, waiting.branch!);
    expect(parked).toContain("kept-work");
    expect(parked).not.toContain(CONFIGURED.GITHUB_APP_CLIENT_SECRET.slice(0, 8));
    expect(parked).not.toContain("PRIVATE KEY");
    const withheld = (await listEvents({ runId: run.id, limit: 1000 })).filter((e) => e.type === "SECRET_WITHHELD");
    expect(withheld).toHaveLength(1);
    expect(withheld[0]!.payload).toMatchObject({ files: ["notes/co[p]y*.txt"], when: "waiting for an answer" });

    const db = await getDb();
    const question = await until(
      async () =>
        (await db.select().from(clarificationRequests).where(and(eq(clarificationRequests.workflowRunId, run.id), eq(clarificationRequests.status, "pending"))))[0],
      "the question",
    );
    const answered = await answerRoute.POST(
      req(`/api/clarifications/${question.id}/answer`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ response: "no" }) }),
      { params: Promise.resolve({ id: question.id }) },
    );
    expect(answered.status).toBe(200);
    const done = await waitForStatus(run.id, ["completed", "failed", "paused"], 120_000);
    expect(done.status).toBe("completed");
    const added = branchObjects(repo, done.branch!);
    expect(added).toContain("kept-work");
    expect(added).not.toContain(CONFIGURED.GITHUB_APP_CLIENT_SECRET.slice(0, 8));
    expect(added).not.toContain("PRIVATE KEY");
  }, 180_000);
});
