import { expect, it } from "vitest";
import { POINTS, runChaos } from "../../scripts/chaos/run";

/*
 * The short form of `npm run chaos`: one trial at each of the five kill points (a model call in flight, a git commit,
 * a sandbox command, a human wait, delivery). The server (scripts/chaos/server.ts: the API routes and the embedded
 * executor in one process) is killed with SIGKILL, started again on the same database and data directory, and every
 * run is driven to its end over the HTTP API; then nothing may have happened twice.
 */

it("kill -9 at each of the five points: every run finishes, nothing is committed, recorded, called or opened twice", { timeout: 600_000 }, async () => {
  const lines: string[] = [];
  const results = await runChaos({ trials: 1, log: (line) => lines.push(line) });
  expect(results.map((r) => r.point)).toEqual([...POINTS]);
  for (const r of results) {
    expect({ point: r.point, failures: r.failures, lines }).toEqual({ point: r.point, failures: [], lines });
    expect(r).toMatchObject({ trials: 1, finished: 1, inconsistent: 0, duplicates: { commits: 0, events: 0, modelCalls: 0, pullRequests: 0 } });
  }
});
