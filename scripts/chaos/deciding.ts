import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { and, count, eq, inArray } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { gates, workflowEvents, workflowRuns } from "@/lib/db/schema";
import { setMember } from "@/lib/db/queries/members";
import { startApiServer } from "../../tests/cli/server";
import { makeUser } from "../../tests/auth/fixtures";
import { fileBlock, launch, newProject } from "../../tests/workflow/harness";

/*
 * Load on decisions: `waiting` runs parked at their plan gate, `running` runs computing (each runs a sandbox command),
 * and `deciders` people approving over HTTP at once, every gate approved by two of them at the same moment. Afterwards:
 * every gate was applied exactly once (one 200, one 409), no decision was lost (each run's workflow took its decision
 * and moved on). Measures the approve latency as a client sees it and the server's event-loop delay while deciding.
 * The server is the app's API routes over node:http with the embedded executor in the same process
 * (tests/cli/server.ts), so the event-loop delay is the one that serves the requests and drives the runs.
 */

export type DecidingResult = {
  waiting: number;
  running: number;
  deciders: number;
  /** Answers to the approvals: 200 (applied), 409 (already decided), anything else. */
  applied: number;
  refused: number;
  errors: string[];
  /** Gates approved more than once in the events, or never. */
  appliedTwice: number;
  lost: number;
  /** Runs whose workflow had not taken its decision within the time allowed. */
  notTaken: number;
  latencyMs: number[];
  /** Requests whose connection was reset and sent again. */
  resets: number;
  loopDelayMs: { p50: number; p99: number; max: number };
  decideMs: number;
  /** Starting the waiting runs and driving them to their gate. */
  setUpMs: number;
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runDecidingLoad({
  waiting,
  running,
  deciders,
  takeTimeoutMs = 300_000,
  launchWindow = 50,
  setUpBudgetMs = Infinity,
  onProgress,
}: {
  waiting: number;
  running: number;
  deciders: number;
  takeTimeoutMs?: number;
  /** Waiting runs on their way to the gate at once during the set-up. */
  launchWindow?: number;
  /** No waiting run is started after this long (the load then runs with those parked; `waiting` in the result says how many). */
  setUpBudgetMs?: number;
  /** Called as waiting runs park at their gate (every fifty): how many so far, and the time taken. */
  onProgress?: (parked: number, ms: number) => void;
}): Promise<DecidingResult> {
  const api = await startApiServer();
  try {
    const { project } = await newProject(api.user);
    const people = [];
    for (let i = 0; i < deciders; i++) {
      const person = await makeUser(`Decider ${i}`);
      await setMember({ projectId: project.id, userId: person.id, role: "approver" });
      people.push(person);
    }
    const db = await getDb();
    // The waiting runs, real ones driven by the workflow to their plan gate, `launchWindow` of them on their way at a
    // time (one at a time took over 17 minutes for 1,000). Only this set-up's runs have gates in this database. With a
    // set-up budget, no run is started after it; those started are waited for, and the load runs with the ones parked.
    const setUpStarted = performance.now();
    const launched: string[] = [];
    const parked = async () => (await db.select({ n: count() }).from(gates).where(eq(gates.status, "pending")))[0]!.n;
    let done = 0;
    const launching = new Set<Promise<void>>();
    for (let i = 0; i < waiting && performance.now() - setUpStarted < setUpBudgetMs; i++) {
      while (launched.length + launching.size - done >= launchWindow) {
        const now = await parked();
        if (Math.floor(now / 50) > Math.floor(done / 50)) onProgress?.(now, performance.now() - setUpStarted);
        done = now;
        if (launched.length + launching.size - done >= launchWindow) await sleep(100);
      }
      const p: Promise<void> = launch(api.user, project.id, `Waiting ${i}`, { trustMode: { planning: "manual" } }).then((r) => {
        launched.push(r.id);
        launching.delete(p);
      });
      launching.add(p);
    }
    await Promise.all(launching);
    while ((done = await parked()) < launched.length) await sleep(100);
    onProgress?.(done, performance.now() - setUpStarted);
    const ids = launched;
    waiting = ids.length;
    const setUpMs = performance.now() - setUpStarted;
    // The computing runs, started now so that they run while people decide.
    for (let i = 0; i < running; i++) {
      await launch(api.user, project.id, [`Running ${i}`, "[run: sleep 3]", "", fileBlock(`src/r${i}.txt`, `r ${i}`)].join("\n"), { trustMode: { planning: "auto" } });
    }

    // Every gate by two people at once: decider d approves the runs i with i % n == d and i % n == d - 1.
    const latencyMs: number[] = [];
    let applied = 0;
    let refused = 0;
    let resets = 0;
    const errors: string[] = [];
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const started = performance.now();
    await Promise.all(
      people.map(async (person, d) => {
        const mine = ids.filter((_, i) => i % deciders === d || i % deciders === (d + deciders - 1) % deciders);
        for (const id of mine) {
          const t0 = performance.now();
          let res: Response | null = null;
          // A connection reset under load is sent again, as a client would: a decision is stored once per gate, so a
          // repeat is at worst a 409.
          for (let attempt = 0; !res; attempt++) {
            try {
              res = await fetch(`${api.url}/api/runs/${id}/approve`, { method: "POST", headers: { ...person.headers, "content-type": "application/json" }, body: "{}" });
              await res.arrayBuffer();
            } catch (error) {
              res = null;
              resets++;
              if (attempt >= 3) throw error;
            }
          }
          const ms = performance.now() - t0;
          if (res.status === 200) {
            applied++;
            latencyMs.push(ms);
          } else if (res.status === 409) refused++;
          else errors.push(`${id}: ${res.status}`);
        }
      }),
    );
    const decideMs = performance.now() - started;
    loop.disable();

    // Each gate approved exactly once, by the events; and each run's workflow took its decision (it left the gate).
    const granted = await db
      .select({ runId: workflowEvents.workflowRunId })
      .from(workflowEvents)
      .where(and(inArray(workflowEvents.workflowRunId, ids), eq(workflowEvents.type, "APPROVAL_GRANTED")));
    const perRun = new Map<string, number>();
    for (const g of granted) perRun.set(g.runId, (perRun.get(g.runId) ?? 0) + 1);
    const end = Date.now() + takeTimeoutMs;
    let notTaken = waiting;
    for (;;) {
      const rows = await db.select({ id: workflowRuns.id }).from(workflowRuns).where(and(inArray(workflowRuns.id, ids), eq(workflowRuns.status, "awaiting_approval")));
      notTaken = rows.length;
      if (notTaken === 0 || Date.now() > end) break;
      await sleep(250);
    }
    const ms = (n: number) => n / 1e6;
    return {
      waiting,
      running,
      deciders,
      applied,
      refused,
      errors,
      appliedTwice: [...perRun.values()].filter((n) => n > 1).length,
      lost: ids.filter((id) => !perRun.has(id)).length,
      notTaken,
      latencyMs,
      resets,
      loopDelayMs: { p50: ms(loop.percentile(50)), p99: ms(loop.percentile(99)), max: ms(loop.max) },
      decideMs,
      setUpMs,
    };
  } finally {
    await api.close();
  }
}
