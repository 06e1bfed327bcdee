import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { git, gitOut } from "@/lib/git/run";

/** A fresh repository with `main` checked out and one commit (identity from Gatehouse's env, not global config). */
export async function makeRepo(files: Record<string, string> = { "README.md": "# demo\n", "src/app.ts": "export const a = 1;\n" }) {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "gatehouse-repo-")));
  await git(dir, ["init", "-q", "-b", "main"]);
  await writeFiles(dir, files);
  await git(dir, ["add", "-A"]);
  await git(dir, ["commit", "-q", "-m", "initial"]);
  return dir;
}

export async function writeFiles(dir: string, files: Record<string, string>) {
  for (const [file, content] of Object.entries(files)) {
    await fs.mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await fs.writeFile(path.join(dir, file), content);
  }
}

export async function commitAll(dir: string, message: string) {
  await git(dir, ["add", "-A"]);
  await git(dir, ["commit", "-q", "-m", message]);
  return gitOut(dir, ["rev-parse", "HEAD"]);
}

export const show = (repo: string, spec: string) => gitOut(repo, ["show", spec]);
