import { expect, it } from "vitest";
import { runChaos } from "../../scripts/chaos/run";

/*
 * Delivery is the one point whose trials differ by trial (scripts/chaos/run.ts): the push, the pull request's creation
 * or its merge is held by the GitHub emulator while the server is killed. The short form in chaos.test.ts meets only
 * the first; here one batch of three meets all three (in a file of its own: a database of its own for its projects).
 */
it("kill -9 while delivery's push, its pull request's creation and its merge are each in flight: the delivery step run again commits no second run record, and nothing else happens twice", { timeout: 900_000 }, async () => {
  const lines: string[] = [];
  // Three trials of one batch: the rotation holds the push, the pull request's creation and the merge.
  const [r] = await runChaos({ trials: 3, batchSize: 3, points: ["delivery"], log: (line) => lines.push(line) });
  expect({ failures: r!.failures, lines }).toEqual({ failures: [], lines });
  expect(r).toMatchObject({ point: "delivery", trials: 3, finished: 3, inconsistent: 0, duplicates: { commits: 0, events: 0, modelCalls: 0, pullRequests: 0 } });
});
