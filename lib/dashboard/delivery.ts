/**
 * What a finished run offers next, in words: the pull request to review, the merge already done, or why there is
 * neither ("PR not opened: local project") with the command that merges the branch by hand.
 */
export type Repository = { type: "local"; path: string } | { type: "github"; owner: string; repo: string };

export type DeliveryRun = {
  status: string;
  branch: string | null;
  merged: boolean;
  pullRequest: { number: number; url: string; draft: boolean; state: "open" | "merged" | "closed" } | null;
  config: { git?: { createPR?: boolean; autoMerge?: boolean; baseBranch?: string } } | Record<string, unknown>;
};

export type NextStep =
  | { kind: "merged"; title: string; detail: string; url?: string }
  | { kind: "review_pr"; title: string; detail: string; url: string }
  | { kind: "open_pr"; title: string; detail: string; url: string }
  | { kind: "merge_locally"; title: string; detail: string; command: string }
  | { kind: "none"; title: string; detail: string };

export function nextStep({ run, repository }: { run: DeliveryRun; repository: Repository | null }): NextStep | null {
  if (run.status !== "completed") return null;
  const git = ((run.config as { git?: Record<string, unknown> }).git ?? {}) as { createPR?: boolean; autoMerge?: boolean; baseBranch?: string };
  const base = git.baseBranch ?? "main";
  const pr = run.pullRequest;
  if (run.merged || pr?.state === "merged") {
    return { kind: "merged", title: `Merged into ${base}`, detail: pr ? `Pull request #${pr.number} is merged.` : `Squash-merged into ${base}.`, ...(pr ? { url: pr.url } : {}) };
  }
  if (!run.branch) return { kind: "none", title: "Nothing to deliver", detail: "The run has no branch." };
  if (pr?.state === "open") {
    return { kind: "review_pr", title: `Review and merge pull request #${pr.number}`, detail: pr.draft ? "It is still a draft." : "Automatic merge is off for this run.", url: pr.url };
  }
  if (repository?.type === "github") {
    const why = pr?.state === "closed" ? `Pull request #${pr.number} was closed without merging.` : "PR not opened: pull requests were turned off for this run.";
    return {
      kind: "open_pr",
      title: "Open a pull request",
      detail: why,
      url: `https://github.com/${repository.owner}/${repository.repo}/compare/${encodeURIComponent(base)}...${encodeURIComponent(run.branch)}?expand=1`,
    };
  }
  return {
    kind: "merge_locally",
    title: "PR not opened: local project",
    detail: `A local project has no pull requests, and automatic merge was off: the work stays on ${run.branch}. Merge it into ${base} when you are satisfied.`,
    command: `git checkout ${base} && git merge --squash ${run.branch} && git commit`,
  };
}
