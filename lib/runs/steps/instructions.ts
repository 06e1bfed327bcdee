import { createHash } from "node:crypto";
import { loadRepositoryInstructions } from "@/lib/agents";
import { readFileAt } from "@/lib/git";
import { append, baseShaOf, type RunContext } from "./context";

/*
 * The repository's instructions for a stage's prompt (lib/agents/instructions.ts), read from the commit the run's
 * branch started from, so that nothing the implementer writes (an AGENTS.md of its own) can instruct the validator or
 * a later stage. The files used are recorded once per stage and set of files (INSTRUCTIONS_LOADED): GET /api/runs/:id
 * lists them with their hashes.
 */

export async function stageInstructions({
  run,
  stage,
  touched = [],
}: {
  run: RunContext;
  stage: "planning" | "implementation" | "validation";
  /** The plan's files and folders: their folders' AGENTS.md files join the root's (the nearest wins). */
  touched?: string[];
}): Promise<string | undefined> {
  const ref = (await baseShaOf(run.runId)) ?? run.branch;
  const loaded = await loadRepositoryInstructions({ touched, read: (file) => readFileAt({ repoPath: run.repoPath, ref, path: file }) });
  if (loaded.files.length) {
    // Keyed by what was loaded: the same files for the same stage are recorded once, however many steps read them.
    const id = createHash("sha256").update(JSON.stringify(loaded.files)).digest("hex").slice(0, 16);
    await append(run.runId, `instructions:${stage}:${id}`, [{ type: "INSTRUCTIONS_LOADED", payload: { stage, files: loaded.files } }]);
  }
  return loaded.prompt ?? undefined;
}
