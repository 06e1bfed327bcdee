import fs from "node:fs/promises";
import path from "node:path";
import { isInstanceAdmin } from "@/lib/auth/admin";
import type { SessionUser } from "@/lib/auth/guard";
import type { RepositoryBinding } from "@/lib/db/schema";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { verifyGitHubBinding } from "@/lib/github/binding";

/**
 * Who may bind what. A local path: only an instance administrator, and only an existing git repository (inside
 * GATEHOUSE_REPOSITORIES_ROOT when set) that is neither Gatehouse's data directory nor its own checkout, stored as its
 * realpath. A GitHub repository: checked with the GitHub App (see verifyGitHubBinding). Returns the binding to store.
 */
export async function checkRepositoryBinding({
  user,
  repository,
}: {
  user: Pick<SessionUser, "id">;
  repository: RepositoryBinding;
}): Promise<RepositoryBinding> {
  const admin = await isInstanceAdmin({ user });
  if (repository.type === "github") return verifyGitHubBinding({ user, ref: repository, admin });
  // Before touching the filesystem, so that nobody else can learn anything about it from the answers.
  if (!admin) {
    throw new AppError(
      "forbidden:project",
      "Only an instance administrator (the local owner, or an email in GATEHOUSE_ADMIN_EMAILS) may bind a local path; bind a GitHub repository instead.",
    );
  }
  return { type: "local", path: await resolveLocalRepository(repository.path) };
}

function isInside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel !== "" && !rel.startsWith("..") && !path.isAbsolute(rel);
}

const overlaps = (a: string, b: string) => a === b || isInside(a, b) || isInside(b, a);

const realOrResolved = async (p: string) => fs.realpath(p).catch(() => path.resolve(p));

/**
 * The realpath of a local repository, or one 400 whose text is the same whatever the reason (missing, not a
 * directory, not a git repository, outside the root, a forbidden directory), so answers never reveal what exists.
 */
export async function resolveLocalRepository(input: string): Promise<string> {
  const env = getEnv();
  const root = env.GATEHOUSE_REPOSITORIES_ROOT ? await realOrResolved(env.GATEHOUSE_REPOSITORIES_ROOT) : null;
  const refused = () =>
    new AppError(
      "bad_request:project",
      `The path on the server must be an existing git repository ${root ? `inside ${root}` : "on this server"} (not Gatehouse's own checkout or data directory).`,
    );
  // realpath follows every symlink and drops "..", "." and magic links such as /proc/self/root.
  const real = await fs.realpath(input).catch(() => null);
  if (!real || !(await fs.stat(real).catch(() => null))?.isDirectory()) throw refused();
  // A real .git directory: a .git file or symlink could point git at metadata somewhere else.
  const dotGit = await fs.lstat(path.join(real, ".git")).catch(() => null);
  if (!dotGit?.isDirectory() || !(await fs.stat(path.join(real, ".git", "HEAD")).catch(() => null))?.isFile()) throw refused();
  if (root && !isInside(real, root)) throw refused();
  for (const own of [env.dataDir, env.appDir]) {
    if (overlaps(real, await realOrResolved(own))) throw refused();
  }
  return real;
}
