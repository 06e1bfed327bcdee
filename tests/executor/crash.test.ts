import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { Inngest } from "inngest";
import { serve } from "inngest/edge";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FetchHandler } from "@/lib/executor";
import { query } from "@/lib/executor/store";
import { checkpointing, listRuns, startServer, waitFor, waitForRuns } from "./harness";

/**
 * Crash safety with real worker processes (`scripts/worker.ts`) on this test's database, driving an app served by the
 * test process over HTTP.
 */

const executions: Record<string, number> = {};
const run = (key: string) => (executions[key] = (executions[key] ?? 0) + 1);
let holdStep3 = true;
let step3Started = 0;
const inflight = new Set<string>();
let overlapping = 0;

function buildApp(origin: string) {
  const inngest = new Inngest({ id: "crash", isDev: true, baseUrl: origin });
  const functions = [
    inngest.createFunction({ id: "five-steps", triggers: [{ event: "crash/start" }] }, async ({ step }) => {
      const results: number[] = [];
      for (let i = 1; i <= 5; i++) {
        results.push(
          await step.run(`s${i}`, async () => {
            run(`s${i}`);
            if (i === 3) {
              step3Started++;
              while (holdStep3) await new Promise((r) => setTimeout(r, 10));
            }
            return i;
          }),
        );
      }
      return results;
    }),
    inngest.createFunction({ id: "shared", triggers: [{ event: "crash/shared" }] }, async ({ event, step }) => {
      for (const s of ["a", "b", "c"]) await step.run(s, () => run(`shared-${event.data.n}-${s}`));
      return event.data.n;
    }),
  ];
  return { inngest, functions };
}

let server: Awaited<ReturnType<typeof startServer>>;
let app: ReturnType<typeof buildApp>;
const workers: ChildProcess[] = [];

async function startWorker(id: string): Promise<ChildProcess> {
  // `node --import tsx` (not the tsx CLI, which forks): the pid we kill is the worker itself.
  const child = spawn(process.execPath, ["--import", "tsx", path.join("scripts", "worker.ts"), "--app", server.serveUrl, "--port", "0", "--lease-ms", "1000", "--poll-ms", "100", "--worker-id", id, ...(checkpointing() ? ["--checkpointing"] : [])], {
    env: { ...process.env, GATEHOUSE_TEST_KEEP_ENV: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  workers.push(child);
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker ${id} did not start: ${output}`)), 30_000);
    child.stdout!.on("data", (d: Buffer) => {
      output += d.toString();
      if (output.includes("READY")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
    child.on("exit", (code) => reject(new Error(`worker ${id} exited with ${code}: ${output}`)));
  });
  return child;
}

beforeAll(async () => {
  server = await startServer();
  app = buildApp(server.origin);
  const handler = serve({ client: app.inngest, functions: app.functions }) as FetchHandler;
  server.setHandler(async (request) => {
    const runId = request.headers.get("x-run-id");
    const track = request.method === "POST" && runId?.length && new URL(request.url).searchParams.get("fnId") === "crash-shared";
    if (!track) return handler(request);
    if (inflight.has(runId!)) overlapping++;
    inflight.add(runId!);
    try {
      return await handler(request);
    } finally {
      inflight.delete(runId!);
    }
  });
});

afterAll(async () => {
  for (const w of workers) if (w.exitCode === null) w.kill("SIGKILL");
  await server?.close();
});

describe("crash safety", () => {
  it("kill -9 a worker mid-step: a new worker continues from the last recorded step, nothing recorded twice", { timeout: 90_000 }, async () => {
    const first = await startWorker("w1");
    await app.inngest.send({ name: "crash/start", data: {} });
    await waitFor(async () => step3Started === 1, { what: "step 3 to start", timeoutMs: 30_000 });
    first.kill("SIGKILL");
    await new Promise((r) => first.once("exit", r));
    // The orphaned step 3 finishes in the app once the dead worker's lease has lapsed, so nobody records its result (a
    // checkpointing app's report of it is refused as stale).
    await new Promise((r) => setTimeout(r, 1200));
    holdStep3 = false;

    await startWorker("w2");
    const [done] = await waitForRuns("five-steps", { timeoutMs: 30_000 });
    expect(done?.status).toBe("completed");
    expect(done?.output).toEqual([1, 2, 3, 4, 5]);
    // Steps recorded before the crash never ran again; the one in flight ran again (at-least-once), once more.
    expect(executions).toMatchObject({ s1: 1, s2: 1, s3: 2, s4: 1, s5: 1 });
    const steps = await query<{ hashed_id: string }>("SELECT hashed_id FROM executor_steps WHERE run_id = ?", [done!.id]);
    expect(steps).toHaveLength(5);
    expect(new Set(steps.map((s) => s.hashed_id)).size).toBe(5);
  });

  it("two worker processes on one database never drive the same run at once", { timeout: 90_000 }, async () => {
    await startWorker("w3");
    const total = 30;
    await app.inngest.send(Array.from({ length: total }, (_, n) => ({ name: "crash/shared", data: { n } })));
    const runs = await waitForRuns("shared", { count: total, timeoutMs: 60_000 });
    expect(runs.every((r) => r.status === "completed")).toBe(true);
    expect(overlapping).toBe(0);
    for (let n = 0; n < total; n++) for (const s of ["a", "b", "c"]) expect(executions[`shared-${n}-${s}`]).toBe(1);
    expect(await listRuns("shared")).toHaveLength(total);
  });
});
