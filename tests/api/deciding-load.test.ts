import { expect, it } from "vitest";
import { runDecidingLoad } from "../../scripts/chaos/deciding";

/*
 * Load on decisions at a reduced scale (`npm run bench -- deciding` runs 1,000 waiting, 50 running, 20 people):
 * runs waiting at their plan gate, runs computing meanwhile, and 20 people approving over HTTP at once, every gate by
 * two of them at the same moment.
 */
it("20 people approving at once, each gate by two: every gate applied exactly once, the other refused, none lost, every run moves on", { timeout: 300_000 }, async () => {
  const result = await runDecidingLoad({ waiting: 10, running: 2, deciders: 20 });
  expect(result.errors).toEqual([]);
  expect({ applied: result.applied, refused: result.refused }).toEqual({ applied: 10, refused: 10 });
  expect({ twice: result.appliedTwice, lost: result.lost, notTaken: result.notTaken }).toEqual({ twice: 0, lost: 0, notTaken: 0 });
});
