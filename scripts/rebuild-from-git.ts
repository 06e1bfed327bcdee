import fs from "node:fs";
import path from "node:path";
import { closeDb } from "@/lib/db";
import { rebuildFromGit } from "@/lib/git/rebuild";

/**
 * `npm run rebuild-from-git -- <repo path>`: after the database is lost, rebuild runs, events, clarifications, gates,
 * model calls (costs) and artifacts from
 * the `.autonomous/` records on the repository's branches (run branches and the base branch).
 */
const repo = process.argv[2];
if (!repo || !fs.existsSync(path.join(repo, ".git")) && !fs.existsSync(path.join(repo, "HEAD"))) {
  console.error("Usage: npm run rebuild-from-git -- <path to a git repository>");
  process.exit(2);
}
const started = Date.now();
const result = await rebuildFromGit({ repoPath: path.resolve(repo) });
closeDb();
console.log(
  `Rebuilt ${result.runs} run(s), ${result.events} event(s), ${result.clarifications} clarification(s), ${result.gates} gate(s), ${result.modelCalls} model call(s) in ${Date.now() - started} ms.`,
);
for (const e of result.errors) console.error(`  skipped ${e.runId}: ${e.message}`);
process.exit(result.errors.length ? 1 : 0);
