import { and, eq } from "drizzle-orm";
import type { SessionUser } from "@/lib/auth/guard";
import { getDb } from "@/lib/db";
import { accounts, type RepositoryBinding } from "@/lib/db/schema";
import { AppError } from "@/lib/errors";
import { appOctokit, githubConfigured, isGitHubAuthError, repoOctokit } from "./app";

type GitHubBinding = Extract<RepositoryBinding, { type: "github" }>;

/** Roles on a GitHub repository that may push to it. */
const WRITE_ROLES = new Set(["admin", "maintain", "write"]);

const statusOf = (error: unknown) => (error as { status?: unknown })?.status;

/** The GitHub account (numeric id) the user signed in with, from the Auth.js accounts table. */
async function githubAccountId(userId: string): Promise<string | null> {
  const db = await getDb();
  const row = await db.query.accounts.findFirst({ where: and(eq(accounts.userId, userId), eq(accounts.provider, "github")) });
  return row?.providerAccountId ?? null;
}

/**
 * A GitHub binding is allowed when the GitHub App's installation covers the repository (asked with an installation
 * token narrowed to it) and the user's GitHub identity may write to it (collaborator permission write, maintain or
 * admin). Instance administrators skip the second check: they run the server and its App. The binding stored carries
 * GitHub's repository id, canonical names and the installation that covers it.
 *
 * Without a GitHub App nothing can be checked: only an instance administrator may then bind, unverified.
 */
export async function verifyGitHubBinding({
  user,
  ref,
  admin,
}: {
  user: Pick<SessionUser, "id">;
  ref: GitHubBinding;
  admin: boolean;
}): Promise<GitHubBinding> {
  const full = `${ref.owner}/${ref.repo}`;
  if (!githubConfigured()) {
    if (admin) return { type: "github", owner: ref.owner, repo: ref.repo, ...(ref.installationId ? { installationId: ref.installationId } : {}) };
    throw new AppError(
      "forbidden:github",
      `The GitHub App is not configured on this server, so your access to ${full} cannot be checked; ask an instance administrator to bind it.`,
    );
  }
  const notCovered = () =>
    new AppError("forbidden:github", `The GitHub App is not installed on ${full} (or the repository does not exist); install it on the repository first.`);
  try {
    // Asked fresh (not from the token cache), so a stale or caller-supplied installation id is never trusted.
    const installation = await appOctokit()
      .request("GET /repos/{owner}/{repo}/installation", { owner: ref.owner, repo: ref.repo })
      .catch((error) => {
        if (statusOf(error) === 404) throw notCovered();
        throw error;
      });
    const installationId = installation.data.id;
    if (ref.installationId && ref.installationId !== installationId) throw notCovered();
    const octokit = repoOctokit({ owner: ref.owner, repo: ref.repo, installationId });
    const repository = await octokit.request("GET /repos/{owner}/{repo}", { owner: ref.owner, repo: ref.repo }).catch((error) => {
      if ([403, 404, 422].includes(statusOf(error) as number)) throw notCovered();
      throw error;
    });
    if (!admin) await requireWriteAccess({ user, octokit, ref, full });
    return {
      type: "github",
      owner: repository.data.owner.login,
      repo: repository.data.name,
      installationId,
      repositoryId: Number(repository.data.id),
    };
  } catch (error) {
    if (isGitHubAuthError(error)) throw new AppError("unavailable:github", error.message);
    // GitHub down or unreachable (retries exhausted): say so instead of a bare 500, and bind nothing.
    if (!(error instanceof AppError) && ((statusOf(error) as number) >= 500 || statusOf(error) === undefined)) {
      throw new AppError("unavailable:github", `GitHub did not answer while checking ${full}; try again in a moment.`, { cause: error });
    }
    throw error;
  }
}

async function requireWriteAccess({
  user,
  octokit,
  ref,
  full,
}: {
  user: Pick<SessionUser, "id">;
  octokit: ReturnType<typeof repoOctokit>;
  ref: GitHubBinding;
  full: string;
}) {
  const accountId = await githubAccountId(user.id);
  if (!accountId) {
    throw new AppError(
      "forbidden:github",
      `Sign in with GitHub first: binding ${full} needs your GitHub account's write access to it, and this account has no GitHub identity.`,
    );
  }
  // By the account's id, which never changes (a login can be renamed and reused).
  const login = await octokit
    .request("GET /user/{account_id}", { account_id: Number(accountId) })
    .then((r) => r.data.login)
    .catch((error) => {
      if (statusOf(error) === 404) return null;
      throw error;
    });
  const noWrite = () =>
    new AppError("forbidden:github", `Your GitHub account${login ? ` @${login}` : ""} has no write access to ${full}; binding needs write, maintain or admin.`);
  if (!login) throw noWrite();
  const permission = await octokit
    .request("GET /repos/{owner}/{repo}/collaborators/{username}/permission", { owner: ref.owner, repo: ref.repo, username: login })
    .then((r) => r.data as { permission?: string; role_name?: string })
    .catch((error) => {
      if (statusOf(error) === 404 || statusOf(error) === 403) return null;
      throw error;
    });
  // role_name is exact (maintain, triage …); the legacy `permission` folds maintain into write.
  if (!WRITE_ROLES.has(permission?.role_name ?? "") && !WRITE_ROLES.has(permission?.permission ?? "")) throw noWrite();
}
