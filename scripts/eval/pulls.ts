/*
 * `--from-history <GitHub project id>`: the project's merged pull requests are the candidates (their title and body the
 * request, their merge commit the change). Listed through any Octokit-shaped client: the app's installation client in
 * the CLI, a plain one against a local receiver in the tests.
 */

export type PullRequest = { number: number; title: string; body: string; mergeCommit: string; mergedAt: string };

type RequestClient = {
  request: (route: string, params: Record<string, unknown>) => Promise<{ data: unknown }>;
};

type PullRow = { number: number; title: string; body: string | null; merged_at: string | null; merge_commit_sha: string | null };

/** Merged pull requests into `base`, most recently updated first, merged at or after `since`; at most `limit`. */
export async function mergedPullRequests({
  client,
  owner,
  repo,
  base,
  since,
  limit = 100,
}: {
  client: RequestClient;
  owner: string;
  repo: string;
  base: string;
  since?: string;
  limit?: number;
}): Promise<PullRequest[]> {
  const after = since ? Date.parse(since) : null;
  if (after !== null && Number.isNaN(after)) throw new Error(`--since ${since} is not a date`);
  const found: PullRequest[] = [];
  for (let page = 1; page <= 10 && found.length < limit; page++) {
    const { data } = await client.request("GET /repos/{owner}/{repo}/pulls", {
      owner,
      repo,
      base,
      state: "closed",
      sort: "updated",
      direction: "desc",
      per_page: 100,
      page,
    });
    const rows = data as PullRow[];
    for (const pr of rows) {
      if (!pr.merged_at || !pr.merge_commit_sha) continue;
      if (after !== null && Date.parse(pr.merged_at) < after) continue;
      found.push({ number: pr.number, title: pr.title, body: pr.body ?? "", mergeCommit: pr.merge_commit_sha, mergedAt: pr.merged_at });
    }
    if (rows.length < 100) break;
  }
  return found.sort((a, b) => (a.mergedAt < b.mergedAt ? 1 : -1)).slice(0, limit);
}
