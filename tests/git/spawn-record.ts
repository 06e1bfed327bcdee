import type * as Spawner from "@/lib/git/spawner";

/*
 * Tests that count the processes a piece of work spawns replace the git helper's `runChild` with one that records each
 * request first. vi.mock's factory must stay in each test file (it is hoisted there), so this is what it calls:
 *   vi.mock("@/lib/git/spawner", async (importOriginal) =>
 *     (await import("../git/spawn-record")).recordingSpawner(await importOriginal(), (request) => …));
 */

export type SpawnRequest = Parameters<typeof Spawner.runChild>[0];

/** A command as the tests compare it: the program, then its arguments without the hardened `-c name=value` pairs. */
export function commandOf(request: SpawnRequest): string[] {
  return [request.file, ...request.args.filter((a, i, all) => a !== "-c" && all[i - 1] !== "-c")];
}

/** The spawner module whose `runChild` calls `record` with each request before running it. */
export function recordingSpawner(original: typeof Spawner, record: (request: SpawnRequest) => void): typeof Spawner {
  return {
    ...original,
    runChild: (request: SpawnRequest) => {
      record(request);
      return original.runChild(request);
    },
  };
}
