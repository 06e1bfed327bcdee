import type { PlanDocument } from "@/lib/workflow";
import { repoOctokit, type RepositoryRef } from "./app";

/*
 * The run's pull request: rendered from the run's record, opened as a draft until validation passes, then marked
 * ready (GraphQL: the REST API cannot un-draft) and squash-merged when the config allows.
 */

export type PullRequestFacts = {
  runId: string;
  runUrl: string;
  request: string;
  plan: PlanDocument | null;
  /** Task id → done or not, from the run's TASK_COMPLETED events. */
  completedTasks: string[];
  /** The plan's diagram coloured by task status (lib/mermaid/plan-diagram.ts), when it is a flowchart that maps to tasks. */
  diagram?: string | null;
  validation: { status: "passed" | "failed" | "pending"; score?: number | null; report?: string | null };
  costUsd: number;
};

const MAX_BODY = 60_000;

/** Title from the plan's summary (the request's first line when there is no plan). */
export function pullRequestTitle(facts: Pick<PullRequestFacts, "plan" | "request">): string {
  const source = facts.plan?.summary?.trim() || facts.request;
  const line = (source.split("\n").find((l) => l.trim()) ?? "Gatehouse run").trim();
  return line.length > 120 ? `${line.slice(0, 117)}…` : line;
}

function quote(text: string): string {
  return text
    .trim()
    .split("\n")
    .map((l) => `> ${l}`)
    .join("\n");
}

/** A fence longer than any backtick run inside, so the content can never close it early. */
function fence(content: string, info: string): string {
  const longest = Math.max(2, ...[...content.matchAll(/`+/g)].map((m) => m[0].length));
  const ticks = "`".repeat(longest + 1);
  return `${ticks}${info}\n${content.trim()}\n${ticks}`;
}

export function pullRequestBody(facts: PullRequestFacts): string {
  const done = new Set(facts.completedTasks);
  const parts: string[] = [];
  parts.push(`Opened by [Gatehouse run \`${facts.runId}\`](${facts.runUrl}).`);
  parts.push(`## Request\n\n${quote(facts.request.slice(0, 10_000))}`);
  if (facts.plan) {
    if (facts.plan.summary) parts.push(`## Plan\n\n${facts.plan.summary.trim()}`);
    else parts.push("## Plan");
    parts.push(fence(facts.diagram ?? facts.plan.mermaid, "mermaid"));
    if (facts.diagram) parts.push("<sub>Tasks on the diagram: green done · blue running · grey pending · red failed · dashed skipped.</sub>");
    if (facts.plan.tasks.length) {
      const lines = facts.plan.tasks.map((t) => `- [${done.has(t.id) ? "x" : " "}] **${t.id}** ${t.title}`);
      parts.push(`### Tasks\n\n${lines.join("\n")}`);
    }
  }
  const v = facts.validation;
  const heading =
    v.status === "passed" ? "✅ passed" : v.status === "failed" ? "❌ did not pass (accepted by a reviewer)" : "⏳ pending — this pull request is a draft until it passes";
  const score = typeof v.score === "number" ? ` (alignment score ${v.score}/10)` : "";
  const report = v.report?.trim() ? `\n\n<details><summary>Validation report</summary>\n\n${v.report.trim().slice(0, 20_000)}\n\n</details>` : "";
  parts.push(`## Validation\n\n${heading}${score}${report}`);
  parts.push(`## Cost\n\nModel usage: $${facts.costUsd.toFixed(4)}`);
  parts.push(`---\n[View the run in Gatehouse](${facts.runUrl})`);
  const body = parts.join("\n\n");
  return body.length > MAX_BODY ? `${body.slice(0, MAX_BODY - 40)}\n\n… (truncated; see the run page)` : body;
}

export type PullRequestInfo = { number: number; url: string; nodeId: string; draft: boolean; state: string; merged: boolean; mergeSha: string | null };

function toInfo(data: {
  number: number;
  html_url: string;
  node_id: string;
  draft?: boolean;
  state: string;
  merged?: boolean | null;
  merged_at?: string | null;
  merge_commit_sha?: string | null;
}): PullRequestInfo {
  return {
    number: data.number,
    url: data.html_url,
    nodeId: data.node_id,
    draft: !!data.draft,
    state: data.state,
    merged: !!data.merged || !!data.merged_at,
    mergeSha: data.merge_commit_sha ?? null,
  };
}

/** The run branch's pull request, if one exists (open or closed): a retried step finds the one it already opened. */
export async function findPullRequest(ref: RepositoryRef, branch: string): Promise<PullRequestInfo | null> {
  const { data } = await repoOctokit(ref).request("GET /repos/{owner}/{repo}/pulls", {
    owner: ref.owner,
    repo: ref.repo,
    head: `${ref.owner}:${branch}`,
    state: "all",
    per_page: 10,
  });
  const found = data.find((p) => p.head.ref === branch);
  return found ? toInfo(found) : null;
}

export async function getPullRequest(ref: RepositoryRef, number: number): Promise<PullRequestInfo> {
  const { data } = await repoOctokit(ref).request("GET /repos/{owner}/{repo}/pulls/{pull_number}", { owner: ref.owner, repo: ref.repo, pull_number: number });
  return toInfo(data);
}

export async function openPullRequest(
  ref: RepositoryRef,
  { branch, baseBranch, title, body, draft }: { branch: string; baseBranch: string; title: string; body: string; draft: boolean },
): Promise<PullRequestInfo> {
  const { data } = await repoOctokit(ref).request("POST /repos/{owner}/{repo}/pulls", {
    owner: ref.owner,
    repo: ref.repo,
    head: branch,
    base: baseBranch,
    title,
    body,
    draft,
  });
  return toInfo(data);
}

export async function updatePullRequest(ref: RepositoryRef, number: number, { title, body }: { title: string; body: string }) {
  await repoOctokit(ref).request("PATCH /repos/{owner}/{repo}/pulls/{pull_number}", { owner: ref.owner, repo: ref.repo, pull_number: number, title, body });
}

/** Draft → ready for review. Only GraphQL can do this. */
export async function markReadyForReview(ref: RepositoryRef, nodeId: string) {
  await repoOctokit(ref).graphql("mutation($id: ID!) { markPullRequestReadyForReview(input: { pullRequestId: $id }) { pullRequest { isDraft } } }", {
    id: nodeId,
  });
}

export type MergeOutcome = { merged: true; sha: string } | { merged: false; reason: string };

/** Squash-merge; 405 (not mergeable: conflicts, required checks, still a draft) and 409 (head moved) are reported, not thrown. */
export async function squashMergePullRequest(ref: RepositoryRef, { number, title, sha }: { number: number; title: string; sha?: string }): Promise<MergeOutcome> {
  try {
    const { data } = await repoOctokit(ref).request("PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge", {
      owner: ref.owner,
      repo: ref.repo,
      pull_number: number,
      merge_method: "squash",
      commit_title: `${title} (#${number})`,
      ...(sha ? { sha } : {}),
    });
    return { merged: true, sha: data.sha };
  } catch (error) {
    const status = (error as { status?: number }).status;
    if (status === 405 || status === 409 || status === 422) {
      return { merged: false, reason: (error as Error).message.slice(0, 500) };
    }
    throw error;
  }
}

export type ReviewComment = { path: string; line: number | null; body: string };

/**
 * The inline comments of one pull request review (file, line, body), in the order GitHub lists them. `line` is the
 * line in the pull request's head; null for a comment on a line the diff no longer shows (GitHub reports it as
 * outdated) or on the whole file.
 */
export async function listReviewComments(ref: RepositoryRef, { number, reviewId }: { number: number; reviewId: number }): Promise<ReviewComment[]> {
  // One page of 100: a follow-up's request shows at most 50 of them anyway.
  const { data: comments } = await repoOctokit(ref).request("GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/comments", {
    owner: ref.owner,
    repo: ref.repo,
    pull_number: number,
    review_id: reviewId,
    per_page: 100,
  });
  return comments.map((c) => {
    const line = (c as { line?: number | null }).line ?? (c as { original_line?: number | null }).original_line ?? null;
    return { path: c.path, line: typeof line === "number" ? line : null, body: c.body ?? "" };
  });
}
