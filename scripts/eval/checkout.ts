import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { git } from "@/lib/git/run";
import { createSandbox } from "@/lib/sandbox";

/*
 * The two ways the eval touches a repository it did not make: a snapshot of one commit's tree for the agent to start
 * from (no history, so no later commit — nor the tests it added — can be read from it), and a sandboxed checkout of a
 * commit with the withheld test files written in, where a check command runs.
 */

/**
 * A fresh repository (branch `main`, one commit) holding exactly the tree of `commit` in `source`. The files are
 * copied out with a throw-away index (`read-tree` + `checkout-index`), so the source's own index and work tree are
 * never touched, and no object of the source's history reaches the new repository.
 */
export async function snapshotRepo({ source, commit, label }: { source: string; commit: string; label: string }): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `gatehouse-eval-${label}-`));
  const index = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-eval-index-")), "index");
  try {
    await git(source, ["read-tree", `${commit}^{tree}`], { env: { GIT_INDEX_FILE: index } });
    await git(source, ["checkout-index", "-a", `--prefix=${dir}${path.sep}`], { env: { GIT_INDEX_FILE: index } });
  } finally {
    fs.rmSync(path.dirname(index), { recursive: true, force: true });
  }
  await git(dir, ["init", "-q", "-b", "main"]);
  await git(dir, ["add", "-A"]);
  await git(dir, ["commit", "-q", "--allow-empty", "-m", `eval task ${label}`]);
  return dir;
}

/** Write `files` (path → content) into a new directory and make it a one-commit repository on `main`. */
export async function inlineRepo({ files, label }: { files: Record<string, string>; label: string }): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `gatehouse-eval-${label}-`));
  for (const [file, content] of Object.entries(files)) {
    const target = path.resolve(dir, file);
    if (!target.startsWith(`${dir}${path.sep}`)) throw new Error(`${label}: file path ${file} leaves the repository`);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, content);
  }
  await git(dir, ["init", "-q", "-b", "main"]);
  await git(dir, ["add", "-A"]);
  await git(dir, ["commit", "-q", "-m", `eval task ${label}`]);
  return dir;
}

export type CheckResult = { passed: boolean; exitCode: number | null; output: string };

/**
 * Run `command` (a shell line) in a sandbox on `ref` of `repoPath`, with `hiddenFiles` written into the checkout
 * first. The checkout is a throw-away worktree: nothing written or run there reaches a branch.
 */
export async function checkInSandbox({
  repoPath,
  ref,
  command,
  hiddenFiles = {},
  timeoutMs = 120_000,
}: {
  repoPath: string;
  ref: string;
  command: string;
  hiddenFiles?: Record<string, string>;
  timeoutMs?: number;
}): Promise<CheckResult> {
  const sandbox = await createSandbox({ runId: `eval_check_${randomUUID().slice(0, 12)}`, repoPath, ref, kind: "local" });
  try {
    for (const [file, content] of Object.entries(hiddenFiles)) await sandbox.writeFile(file, content);
    const r = await sandbox.exec("sh", ["-c", command], { timeoutMs });
    const output = `${r.stdout}${r.stderr}`.trim().slice(-2000);
    return { passed: r.exitCode === 0 && !r.timedOut, exitCode: r.timedOut ? null : r.exitCode, output: r.timedOut ? `timed out after ${timeoutMs} ms\n${output}` : output };
  } finally {
    await sandbox.destroy();
  }
}
