import { getProject } from "@/lib/projects/queries";
import { squashMergePreview, type LandingFile } from "@/lib/git/merge-preview";
import { redact } from "@/lib/redact";
import type { SessionUser } from "@/lib/auth/guard";
import { getVisibleRun } from "./service";

/** Gatehouse's own records on the run branch (plan, context, events, reports, memory): they land with the merge too. */
const RECORDS = ".autonomous/";

export type MergePreviewDto = {
  /** "local": the squash commit's files below; "pull_request": GitHub merges the pull request (its page lists them). */
  kind: "local" | "pull_request";
  base: string;
  branch: string | null;
  status: "ready" | "up_to_date" | "conflict" | "missing";
  reason: string | null;
  /** The run's own changes (what the Diff tab shows). */
  changes: LandingFile[];
  /** .autonomous/ records. */
  records: LandingFile[];
  added: number;
  removed: number;
};

/**
 * What "Merge into <base>" would land, before a person decides it: every file of the squash commit, the run's
 * .autonomous/ records apart from its changes, and the line counts. Nothing is changed.
 */
export async function getMergePreview({ user, runId }: { user: SessionUser; runId: string }): Promise<MergePreviewDto> {
  const run = await getVisibleRun({ user, runId });
  const base = ((run.config as { git?: { baseBranch?: string } }).git?.baseBranch ?? "main") as string;
  const project = await getProject({ id: run.projectId });
  const empty = { base, branch: run.branch, changes: [], records: [], added: 0, removed: 0 };
  if (project?.repository.type !== "local") return { kind: "pull_request", status: "ready", reason: null, ...empty };
  if (!run.branch) return { kind: "local", status: "missing", reason: "The run has no branch.", ...empty };
  const preview = await squashMergePreview({ repoPath: project.repository.path, branch: run.branch, baseBranch: base });
  const files = preview.files.map((f) => ({ ...f, path: redact(f.path) }));
  const sum = (key: "added" | "removed") => files.reduce((n, f) => n + (f[key] ?? 0), 0);
  return {
    kind: "local",
    base,
    branch: run.branch,
    status: preview.status,
    reason: "reason" in preview ? redact(preview.reason) : null,
    changes: files.filter((f) => !f.path.startsWith(RECORDS)),
    records: files.filter((f) => f.path.startsWith(RECORDS)),
    added: sum("added"),
    removed: sum("removed"),
  };
}
