import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/*
 * Git repositories for e2e projects. They live outside the checkout (the server refuses to bind anything inside its own
 * checkout or data directory), in a directory of their own per checkout, and each project gets its own repository
 * (one project per repository).
 */
export const E2E_REPOS_ROOT = path.join(
  os.tmpdir(),
  `gatehouse-e2e-repos-${crypto.createHash("sha256").update(import.meta.dirname).digest("hex").slice(0, 10)}`,
);

/** The repository the projects page's create form binds by typing its path. */
export const E2E_REPO = path.join(E2E_REPOS_ROOT, "form-repo");

function initRepo(dir: string) {
  fs.mkdirSync(dir, { recursive: true });
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=E2E", "-c", "user.email=e2e@example.com", ...args], { cwd: dir });
  git("init", "-q", "-b", "main");
  fs.writeFileSync(path.join(dir, "README.md"), "# e2e fixture repository\n");
  git("add", "README.md");
  git("commit", "-q", "-m", "initial commit");
  return dir;
}

/** A fresh repository for one project. */
export function makeE2ERepo(): string {
  return initRepo(fs.mkdtempSync(path.join(E2E_REPOS_ROOT, "repo-")));
}

export default function globalSetup() {
  fs.rmSync(E2E_REPOS_ROOT, { recursive: true, force: true });
  initRepo(E2E_REPO);
}
