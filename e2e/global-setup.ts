import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

/** A real git repository for e2e projects to bind to. */
export const E2E_REPO = path.join(import.meta.dirname, ".artifacts", "repo");

export default function globalSetup() {
  fs.rmSync(E2E_REPO, { recursive: true, force: true });
  fs.mkdirSync(E2E_REPO, { recursive: true });
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=E2E", "-c", "user.email=e2e@example.com", ...args], { cwd: E2E_REPO });
  git("init", "-q", "-b", "main");
  fs.writeFileSync(path.join(E2E_REPO, "README.md"), "# e2e fixture repository\n");
  git("add", "README.md");
  git("commit", "-q", "-m", "initial commit");
}
