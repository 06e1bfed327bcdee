import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { eq, sql } from "drizzle-orm";
import * as projectsRoute from "@/app/api/projects/route";
import * as tokensRoute from "@/app/api/tokens/route";
import * as healthRoute from "@/app/api/health/route";
import * as inngestRoute from "@/app/api/inngest/route";
import * as eventsRoute from "@/app/e/[key]/route";
import * as answerRoute from "@/app/api/clarifications/[id]/answer/route";
import { getDb, write } from "@/lib/db";
import { projects, workflowEvents } from "@/lib/db/schema";
import { getEnv, resetEnvCache } from "@/lib/env";
import { errorResponse } from "@/lib/http";
import { getExecutorKey } from "@/lib/security/executor-key";
import { resetRateLimits } from "@/lib/security/rate-limit";
import { call, makeWorld, type World } from "../auth/fixtures";
import { makeRepo } from "../api/helpers";

/* Finding 6: the smaller holes, one test each. */

let world: World;

beforeAll(async () => {
  world = await makeWorld();
});

afterEach(() => {
  delete process.env.GATEHOUSE_RATE_LIMIT_CREATIONS;
  resetEnvCache();
  resetRateLimits();
  vi.restoreAllMocks();
});

describe("finding 6: smaller ones", () => {
  it("POST /api/projects refuses an invalid defaultConfig with a 400 naming the field, and stores nothing", async () => {
    const db = await getDb();
    const count = async () => (await db.select({ n: sql<number>`count(*)` }).from(projects))[0]!.n;
    const before = await count();
    for (const defaultConfig of [{ trustMode: { planning: "sometimes" } }, { maxClarifications: -1 }, { surprise: true }]) {
      const res = await call(projectsRoute.POST, {
        method: "POST",
        headers: world.owner.headers,
        body: { name: "bad defaults", repository: { type: "local", path: world.repoPath }, defaultConfig },
      });
      expect(res.status, JSON.stringify(defaultConfig)).toBe(400);
      expect(res.json.error.message).toMatch(/^defaultConfig\./);
    }
    expect(await count()).toBe(before);
    const ok = await call(projectsRoute.POST, {
      method: "POST",
      headers: world.owner.headers,
      // A repository of its own: world.repoPath is already bound, and a second binding is a 409 (issue #12).
      body: { name: "good defaults", repository: { type: "local", path: makeRepo() }, defaultConfig: { trustMode: { planning: "auto" } } },
    });
    expect(ok.status).toBe(201);
  });

  it("token creation and project creation are rate limited per user (429 with Retry-After)", async () => {
    process.env.GATEHOUSE_RATE_LIMIT_CREATIONS = "3";
    resetEnvCache();
    resetRateLimits();
    const token = () => call(tokensRoute.POST, { method: "POST", headers: world.stranger.headers, body: { name: "burst" } });
    // Only an instance administrator may bind a local path, and each repository once: the owner binds fresh ones.
    const project = () =>
      call(projectsRoute.POST, { method: "POST", headers: world.owner.headers, body: { name: "burst", repository: { type: "local", path: makeRepo() } } });
    for (const create of [token, project]) {
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push(await create());
      expect(statuses.map((r) => r.status)).toEqual([201, 201, 201, 429, 429]);
      expect(Number(statuses[3]!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    }
    // Another user's budget is untouched.
    expect((await call(tokensRoute.POST, { method: "POST", headers: world.viewer.headers, body: { name: "mine" } })).status).toBe(201);
  });

  it("the database, its WAL and shared-memory files are 0600 and the data directory 0700", async () => {
    await write(async (tx) => {
      await tx.update(projects).set({ updatedAt: new Date() }).where(eq(projects.id, world.project.id));
    });
    const env = getEnv();
    const file = env.databaseUrl.slice("file:".length);
    expect(fs.statSync(env.dataDir).mode & 0o777).toBe(0o700);
    for (const f of [file, `${file}-wal`, `${file}-shm`]) {
      expect(fs.existsSync(f), f).toBe(true);
      expect(fs.statSync(f).mode & 0o777, f).toBe(0o600);
    }
  });

  it("a file answer whose contentBase64 is not base64 is a 400 naming the field", async () => {
    for (const contentBase64 of ["not base64!", "aGVsbG8", "aGVs\u0000bG8=", "../../etc/passwd"]) {
      const res = await call(answerRoute.POST, {
        method: "POST",
        headers: world.approver.headers,
        params: { id: world.clarificationId },
        body: { response: { fileName: "spec.txt", contentBase64 } },
      });
      expect(res.status, contentBase64).toBe(400);
      expect(res.json.error.message, contentBase64).toMatch(/contentBase64: must be base64/);
    }
  });

  it("/api/health and GET /api/inngest tell an anonymous caller only {ok}; signed-in callers see the details", async () => {
    const anonymous = await call(healthRoute.GET, { path: "/api/health" });
    expect(anonymous.status).toBe(200);
    expect(anonymous.json).toEqual({ ok: true });
    const signedIn = await call(healthRoute.GET, { path: "/api/health", headers: world.viewer.headers });
    expect(signedIn.json).toMatchObject({ ok: true, db: { ok: true }, executor: expect.any(Object), sandbox: expect.any(Object) });

    const intro = await call(inngestRoute.GET as never, { path: "/api/inngest" });
    expect(intro.json).toEqual({ ok: true });
    const introSigned = await call(inngestRoute.GET as never, { path: "/api/inngest", headers: world.viewer.headers });
    expect(JSON.stringify(introSigned.json)).toMatch(/function_count|functionsFound|mode/i);
  });

  it("a Drizzle 'Failed query' error is logged without its parameters (request text)", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(String(line)));
    const db = await getDb();
    const secretText = "confidential customer request text";
    const failure = await db
      .insert(workflowEvents)
      .values({ id: "evt_dup", workflowRunId: "run_does_not_exist", type: "X", payload: { secretText }, timestamp: new Date(), sequence: 1 })
      .then(() => db.insert(workflowEvents).values({ id: "evt_dup", workflowRunId: "run_x", type: "X", payload: { secretText }, timestamp: new Date(), sequence: 1 }))
      .then(() => null, (error: unknown) => error);
    expect(String(failure)).toContain(secretText);
    errorResponse(failure);
    expect(lines.join("\n")).toContain("Failed query");
    expect(lines.join("\n")).not.toContain(secretText);
  });

  it("/e/:key takes only the executor key, in the Next route and in the worker (npm run worker)", async () => {
    const event = JSON.stringify([{ name: "gatehouse/health.ping", data: {} }]);
    const post = (key: string) =>
      eventsRoute.POST(new Request(`http://127.0.0.1:3000/e/${key}`, { method: "POST", body: event }), { params: Promise.resolve({ key }) });
    expect((await post("guess")).status).toBe(401);
    expect((await post(getExecutorKey())).status).toBe(200);

    const worker = await startWorker();
    try {
      const wrong = await fetch(`${worker.origin}/e/guess`, { method: "POST", body: event });
      expect(wrong.status).toBe(401);
      const right = await fetch(`${worker.origin}/e/${getExecutorKey()}`, { method: "POST", body: event });
      expect(right.status).toBe(200);
      const health = await (await fetch(`${worker.origin}/health`)).json();
      expect(health).toEqual({ ok: true });
    } finally {
      worker.child.kill("SIGTERM");
    }
  });
});

const workers: ChildProcess[] = [];
afterAll(() => {
  for (const w of workers) if (w.exitCode === null) w.kill("SIGKILL");
});

/** `npm run worker` on this test's data directory, driving an app that does not exist (only its event API is tested). */
async function startWorker(): Promise<{ origin: string; child: ChildProcess }> {
  const root = path.resolve(import.meta.dirname, "../..");
  const child = spawn(
    process.execPath,
    ["--import", "tsx", path.join("scripts", "worker.ts"), "--app", "http://127.0.0.1:9/api/inngest", "--port", "0", "--poll-ms", "200"],
    { cwd: root, env: { ...process.env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  workers.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`worker did not start: ${out}`)), 45_000);
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /READY (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    child.on("exit", (code) => reject(new Error(`worker exited ${code}: ${out}`)));
  });
  return { origin: `http://127.0.0.1:${port}`, child };
}
