import { createHash } from "node:crypto";
import { Inngest } from "inngest";
import { serve } from "inngest/edge";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Executor, handleEventRequest, sendEvents, type FetchHandler } from "@/lib/executor";
import { bearerCarriesKey, checkpointingFetch, checkpointStats, handleCheckpointRequest, MAX_RUN_STATE_BYTES } from "@/lib/executor/checkpoint";
import { query, tx } from "@/lib/executor/store";
import { waitFor, waitForRuns } from "./harness";

/** Inngest's async checkpoint endpoint: what it stores, what it refuses, and how the executor treats a fenced dispatch. */

const post = (runId: string, body: unknown) =>
  handleCheckpointRequest(new Request(`http://x/v1/checkpoint/${runId}/async`, { method: "POST", body: JSON.stringify(body) }));

async function runningRun(id: string, { generation = 3, owner = "w1" } = {}) {
  await tx((t) =>
    t.execute({
      sql: `INSERT INTO executor_runs (id, fn_id, app_url, event, events, status, attempt, lease_owner, lease_until, generation, watermark, created_at)
            VALUES (?, 'app-fn', 'http://app', '{}', '[]', 'running', 2, ?, ?, ?, 0, ?)`,
      args: [id, owner, Date.now() + 60_000, generation, Date.now()],
    }),
  );
}

const stepRun = (id: string, data: unknown) => ({ id, op: "StepRun", name: id, data, hashedId: id, promise: {}, fulfilled: true });
const envelope = (runId: string, steps: unknown[], qi = "w1/3") => ({ run_id: runId, fn_id: "app-fn", qi_id: qi, generation_id: Number(qi.split("/")[1]), steps, ts: Date.now() });

describe("POST /v1/checkpoint/{runId}/async", () => {
  it("stores each StepRun as a 206 would (appended to the stack), resets the attempt counter, and answers 200 empty", async () => {
    await runningRun("cp-ok");
    const res = await post("cp-ok", envelope("cp-ok", [stepRun("h1", { a: 1 }), stepRun("h2", null), stepRun("h1", "dup")]));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("");
    const steps = await query<{ hashed_id: string; result: string }>("SELECT hashed_id, result FROM executor_steps WHERE run_id = 'cp-ok' ORDER BY seq");
    expect(steps).toEqual([
      { hashed_id: "h1", result: JSON.stringify({ data: { a: 1 } }) },
      { hashed_id: "h2", result: JSON.stringify({ data: null }) },
    ]);
    const [run] = await query<{ attempt: number; status: string }>("SELECT attempt, status FROM executor_runs WHERE id = 'cp-ok'");
    expect(run).toEqual({ attempt: 0, status: "running" });
  });

  it("answers 409 to a dispatch whose lease or generation has moved on, and stores nothing", async () => {
    await runningRun("cp-stale", { generation: 4 });
    expect((await post("cp-stale", envelope("cp-stale", [stepRun("h1", 1)], "w1/3"))).status).toBe(409);
    expect((await post("cp-stale", envelope("cp-stale", [stepRun("h1", 1)], "w2/4"))).status).toBe(409);
    expect(await query("SELECT 1 FROM executor_steps WHERE run_id = 'cp-stale'")).toHaveLength(0);
  });

  it("answers 413 above 4 MiB of step output or 32 MiB of run state", async () => {
    await runningRun("cp-big");
    const big = await post("cp-big", envelope("cp-big", [stepRun("h1", "x".repeat(4 * 1024 * 1024 + 1))]));
    expect(big.status).toBe(413);
    expect((await big.json()).error).toMatch(/step output limit/);
    // A run whose memoized results already hold all but 10 bytes of the limit (as recorded by earlier steps).
    await tx(async (t) => {
      await t.execute({
        sql: "INSERT INTO executor_steps (run_id, hashed_id, result, created_at) VALUES ('cp-big', 'old', printf('%.*c', ?, 'x'), 0)",
        args: [MAX_RUN_STATE_BYTES - 10],
      });
      await t.execute({ sql: "UPDATE executor_runs SET state_bytes = ? WHERE id = 'cp-big'", args: [MAX_RUN_STATE_BYTES - 10] });
    });
    const full = await post("cp-big", envelope("cp-big", [stepRun("h2", "more than ten bytes")]));
    expect(full.status).toBe(413);
    expect((await full.json()).error).toMatch(/run state limit/);
    expect(await query("SELECT 1 FROM executor_steps WHERE run_id = 'cp-big' AND hashed_id <> 'old'")).toHaveLength(0);
  });

  it("refuses what it cannot store with a 4xx that says why", async () => {
    await runningRun("cp-bad");
    expect((await post("nope", envelope("nope", [stepRun("h", 1)]))).status).toBe(404);
    const mismatch = await post("cp-bad", envelope("other", [stepRun("h", 1)]));
    expect(mismatch.status).toBe(400);
    expect((await mismatch.json()).error).toMatch(/does not match/);
    const sleep = await post("cp-bad", envelope("cp-bad", [{ id: "s", op: "Sleep", name: "1s" }]));
    expect(sleep.status).toBe(400);
    expect((await sleep.json()).error).toMatch(/cannot checkpoint opcode Sleep/);
    const notJson = await handleCheckpointRequest(new Request("http://x/v1/checkpoint/cp-bad/async", { method: "POST", body: "{" }));
    expect(notJson.status).toBe(400);
    const noQi = await post("cp-bad", { run_id: "cp-bad", fn_id: "app-fn", steps: [] });
    expect((await noQi.json()).error).toMatch(/qi_id/);
  });

  it("accepts the executor key as the SDK sends a signing key (hashed) or plain, and nothing else", () => {
    const key = "ab".repeat(32);
    const eq = (a: string, b: string) => a === b;
    // What inngest-js sends for INNGEST_SIGNING_KEY=signkey-dev-<key>: the prefix plus sha256 of the hex-decoded key.
    const hashed = `signkey-dev-${createHash("sha256").update(Buffer.from(key, "hex")).digest("hex")}`;
    expect(bearerCarriesKey(`Bearer ${hashed}`, key, eq)).toBe(true);
    expect(bearerCarriesKey(`Bearer ${key}`, key, eq)).toBe(true);
    expect(bearerCarriesKey("Bearer ", key, eq)).toBe(false);
    expect(bearerCarriesKey(`Bearer signkey-dev-${"00".repeat(32)}`, key, eq)).toBe(false);
    expect(bearerCarriesKey(null, key, eq)).toBe(false);
  });
});

/** An in-process app whose client routes checkpoints (and events) to this process's handlers. */
const executions: Record<string, number> = {};
const ran = (k: string) => (executions[k] = (executions[k] ?? 0) + 1);
let releaseS2 = false;
let s2Started = 0;

function buildApp(id: string, clientCheckpointing: boolean) {
  const inngest = new Inngest({
    id,
    isDev: true,
    baseUrl: `http://${id}.local`,
    checkpointing: clientCheckpointing,
    fetch: checkpointingFetch(async (input, init) => handleEventRequest(new Request(input, init))),
  });
  const functions = [
    inngest.createFunction({ id: "fenced", retries: 0, triggers: [{ event: `${id}/fenced` }] }, async ({ step }) => {
      const a = await step.run("s1", () => ran(`${id}-s1`));
      const b = await step.run("s2", async () => {
        ran(`${id}-s2`);
        s2Started++;
        while (!releaseS2) await new Promise((r) => setTimeout(r, 10));
        return 2;
      });
      const c = await step.run("s3", () => ran(`${id}-s3`));
      return [a, b, c];
    }),
    inngest.createFunction({ id: "shapes", retries: 0, triggers: [{ event: `${id}/shapes` }] }, async ({ step }) => {
      const [a, b] = await Promise.all([step.run("a", () => "a"), step.run("b", () => "b")]);
      const c = await step.run("c", () => "c");
      const d = await step.run("d", () => "d");
      await step.sleep("nap", "100ms");
      const e = await step.run("e", () => "e");
      const f = await step.run("f", () => "f");
      return [a, b, c, d, e, f].join("");
    }),
  ];
  const handler = serve({ client: inngest, functions }) as FetchHandler;
  return { url: `http://${id}.local/api/inngest`, handler, checkpointing: true };
}

let executor: Executor;
beforeAll(async () => {
  executor = new Executor({ apps: [buildApp("cpa", true), buildApp("classic", false)], pollMs: 50, leaseMs: 2000, backoff: () => 20, log: () => {} });
  await executor.start();
});
afterAll(async () => {
  await executor?.stop();
});

describe("checkpointed runs", () => {
  it("a stale dispatch gets 409, its reply is ignored, and the run is not failed: it continues under a new dispatch", async () => {
    releaseS2 = false;
    s2Started = 0;
    const staleBefore = checkpointStats.stale;
    await sendEvents({ name: "cpa/fenced", data: {} });
    await waitFor(async () => s2Started === 1, { what: "s2 to start" });
    // Another dispatch takes the run over while s2 runs (as after a lease expiry): this call's checkpoints are stale.
    await tx((t) => t.execute("UPDATE executor_runs SET lease_owner = 'ghost', lease_until = 0, generation = generation + 1 WHERE fn_id = 'cpa-fenced'"));
    releaseS2 = true;
    const [run] = await waitForRuns("fenced", { where: (r) => r.fn_id === "cpa-fenced" });
    expect(checkpointStats.stale).toBeGreaterThan(staleBefore);
    expect(run?.status).toBe("completed");
    expect(run?.output).toEqual([1, 2, 1]);
    // s1 was checkpointed before the takeover and never ran again; s2's stale result was not stored, so it ran again.
    expect(executions).toMatchObject({ "cpa-s1": 1, "cpa-s2": 2, "cpa-s3": 1 });
  });

  it("checkpointing resumes after the last parallel step and after a sleep (disable_immediate_execution cleared)", async () => {
    const before = checkpointStats.stored;
    await sendEvents({ name: "cpa/shapes", data: {} });
    const [run] = await waitForRuns("shapes", { where: (r) => r.fn_id === "cpa-shapes" });
    expect(run?.output).toBe("abcdef");
    // a and b run as targeted (classic) calls; c, d, e and f are checkpointed.
    expect(checkpointStats.stored - before).toBe(4);
  });

  it("an app with checkpointing: false keeps the classic path and produces the same output", async () => {
    const before = checkpointStats.stored;
    await sendEvents({ name: "classic/shapes", data: {} });
    const [run] = await waitForRuns("shapes", { where: (r) => r.fn_id === "classic-shapes" });
    expect(run?.output).toBe("abcdef");
    expect(checkpointStats.stored).toBe(before);
  });
});
