import { AppError } from "@/lib/errors";
import { getProject } from "@/lib/projects/queries";
import { listEvents } from "@/lib/db/event-store";
import { git, resolveCommit } from "@/lib/git";
import { boundedDiff } from "@/lib/git/diff";
import { redact } from "@/lib/redact";
import type { SessionUser } from "@/lib/auth/guard";
import { getVisibleRun } from "./service";

/**
 * The run branch's changes against the commit it started from, without Gatehouse's own .autonomous/ records:
 * what a reviewer reads. Read as a stream and bounded (lib/git/diff.ts DIFF_LIMITS): a file over the size limit is left
 * out with a note ("<path>: 200 MB, left out of the diff"), and the diff is cut at the byte cap (`truncated`). Redacted.
 */
export async function getRunDiff({ user, runId }: { user: SessionUser; runId: string }) {
  const run = await getVisibleRun({ user, runId });
  const project = await getProject({ id: run.projectId });
  const none = { diff: "", base: null, head: null, truncated: false, notes: [] as string[] };
  if (!project || project.repository.type !== "local" || !run.branch) return none;
  const repoPath = project.repository.path;
  const head = await resolveCommit(repoPath, `refs/heads/${run.branch}`);
  if (!head) return none;
  const events = await listEvents({ runId, limit: 50 });
  const created = events.find((e) => e.type === "BRANCH_CREATED");
  const base = created?.type === "BRANCH_CREATED" ? (created.payload.baseSha ?? null) : null;
  if (!base) throw new AppError("not_found:git", "The run's branch has no recorded starting point yet.");
  const out = await boundedDiff({
    cwd: repoPath,
    args: [`${base}..${head}`, "--", ".", ":(exclude).autonomous"],
    sizeOf: async (p) => {
      const size = await git(repoPath, ["cat-file", "-s", `${head}:${p}`], { allowFailure: true });
      return size.code === 0 ? Number(size.stdout.trim()) : null;
    },
  });
  return { diff: redact(out.diff), base, head, truncated: out.truncated, notes: out.notes.map((n) => redact(n)) };
}
