import { AppError } from "@/lib/errors";
import { getProject } from "@/lib/projects/queries";
import { listEvents } from "@/lib/db/event-store";
import { DIFF_SAFE, git, resolveCommit } from "@/lib/git";
import { redact } from "@/lib/redact";
import type { SessionUser } from "@/lib/auth/guard";
import { getVisibleRun } from "./service";

const MAX_DIFF_BYTES = 2_000_000;

/**
 * The run branch's changes against the commit it started from, without Gatehouse's own .autonomous/ records:
 * what a reviewer reads. Capped, redacted.
 */
export async function getRunDiff({ user, runId }: { user: SessionUser; runId: string }) {
  const run = await getVisibleRun({ user, runId });
  const project = await getProject({ id: run.projectId });
  if (!project || project.repository.type !== "local" || !run.branch) return { diff: "", base: null, head: null, truncated: false };
  const repoPath = project.repository.path;
  const head = await resolveCommit(repoPath, `refs/heads/${run.branch}`);
  if (!head) return { diff: "", base: null, head: null, truncated: false };
  const events = await listEvents({ runId, limit: 50 });
  const created = events.find((e) => e.type === "BRANCH_CREATED");
  const base = created?.type === "BRANCH_CREATED" ? (created.payload.baseSha ?? null) : null;
  if (!base) throw new AppError("not_found:git", "The run's branch has no recorded starting point yet.");
  const out = await git(repoPath, ["diff", "--no-color", ...DIFF_SAFE, `${base}..${head}`, "--", ".", ":(exclude).autonomous"], {
    allowFailure: true,
  });
  const truncated = out.stdout.length > MAX_DIFF_BYTES;
  const diff = redact(truncated ? out.stdout.slice(0, MAX_DIFF_BYTES) : out.stdout);
  return { diff, base, head, truncated };
}
