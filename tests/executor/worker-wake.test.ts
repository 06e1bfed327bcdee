import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { Inngest } from "inngest";
import { serve } from "inngest/edge";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FetchHandler } from "@/lib/executor";
import { query } from "@/lib/executor/store";
import { checkpointing, listRuns, startServer, waitFor, waitForRuns } from "./harness";

/*
 * The product's split set-up: a web server without an executor (GATEHOUSE_EMBEDDED_WORKER=false) stores the events its
 * routes send, and `npm run worker` in another process drives the runs, sharing only the database file. The worker
 * polls every 10 minutes here: it must be woken by the other process's commit (lib/db/commit-watch.ts), not find the
 * runs at its next poll. This test process plays the web server: its events go to the executor's event API here, with
 * no executor running in this process.
 */

const POLL_MS = 600_000;

function buildApp(origin: string) {
  const inngest = new Inngest({ id: "wake", isDev: true, baseUrl: origin });
  const gate = inngest.createFunction({ id: "gate", retries: 0, triggers: [{ event: "wake/start" }] }, async ({ event, step }) => {
    await step.run("before", () => 1);
    const got = await step.waitForEvent("approve", { event: "wake/approve", match: "data.k", timeout: "1h" });
    await step.run("after", () => 2);
    return { k: event.data.k, approved: got?.data.k ?? null };
  });
  return { inngest, functions: [gate] };
}

let server: Awaited<ReturnType<typeof startServer>>;
let app: ReturnType<typeof buildApp>;
let worker: ChildProcess | undefined;

beforeAll(async () => {
  server = await startServer();
  app = buildApp(server.origin);
  server.setHandler(serve({ client: app.inngest, functions: app.functions }) as FetchHandler);
  worker = spawn(
    process.execPath,
    ["--import", "tsx", path.join("scripts", "worker.ts"), "--app", server.serveUrl, "--port", "0", "--poll-ms", String(POLL_MS), ...(checkpointing() ? ["--checkpointing"] : [])],
    { env: { ...process.env, GATEHOUSE_TEST_KEEP_ENV: "1" }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker did not start: ${output}`)), 30_000);
    worker!.stdout!.on("data", (d: Buffer) => {
      output += d.toString();
      if (output.includes("READY")) {
        clearTimeout(timer);
        resolve();
      }
    });
    worker!.stderr!.on("data", (d: Buffer) => (output += d.toString()));
    worker!.on("exit", (code) => reject(new Error(`worker exited with ${code}: ${output}`)));
  });
});

afterAll(async () => {
  if (worker && worker.exitCode === null) worker.kill("SIGKILL");
  await server?.close();
});

describe("a worker in another process", () => {
  it("is woken by an event another process stores: a new run starts and a waiting run resumes before any poll", { timeout: 60_000 }, async () => {
    // Well inside the worker's first poll after its start-up one.
    const waitMs = 20_000;
    await app.inngest.send({ name: "wake/start", data: { k: "a" } });
    const [started] = await waitFor(async () => {
      const runs = await listRuns("gate");
      return runs.length === 1 && runs[0]!.status === "waiting" ? runs : null;
    }, { what: "the run to start in the worker and park at its wait", timeoutMs: waitMs });

    await app.inngest.send({ name: "wake/approve", data: { k: "a" } });
    const [done] = await waitForRuns("gate", { timeoutMs: waitMs });
    expect(done).toMatchObject({ id: started!.id, status: "completed", output: { k: "a", approved: "a" } });
    // The worker drove it: this process has no executor (the run's lease owner was the worker).
    const steps = await query<{ n: number }>("SELECT count(*) AS n FROM executor_steps WHERE run_id = ?", [done!.id]);
    expect(Number(steps[0]!.n)).toBe(3);
  });
});
