import fs from "node:fs";
import path from "node:path";
import { applyPatch, parsePatch } from "diff";
import { z } from "zod";
import { git, resolveCommit } from "@/lib/git/run";
import type { EvalTask } from "./run";
import type { Dropped } from "./report";
import { checkInSandbox } from "./checkout";
import { testCommand } from "./tests-cmd";

/*
 * `--swe-bench file.jsonl`: SWE-bench instances as eval tasks, for repositories available on this machine (nothing is
 * downloaded). The task starts at `base_commit`; the request is `problem_statement`; `test_patch` is applied (with the
 * `diff` library, in memory) to the base versions of its files, which become the hidden files; the check runs
 * FAIL_TO_PASS then PASS_TO_PASS. An instance is kept when its FAIL_TO_PASS tests fail at the base (in the sandbox).
 */

/** A list of test ids; SWE-bench's own files carry it as a JSON-encoded string. */
const testList = z.preprocess(
  (v) => {
    if (typeof v !== "string") return v;
    try {
      return JSON.parse(v) as unknown;
    } catch {
      return v;
    }
  },
  z.array(z.string(), { error: "must be a list of test ids (or a JSON string of one)" }),
);

const instanceSchema = z.object({
  instance_id: z.string().min(1),
  repo: z.string().min(1),
  base_commit: z.string().regex(/^[0-9a-f]{7,40}$/, "must be a commit sha"),
  problem_statement: z.string().min(1),
  test_patch: z.string().min(1),
  FAIL_TO_PASS: testList,
  PASS_TO_PASS: testList.default([]),
});

function slug(id: string) {
  return `swe-${id.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "")}`.slice(0, 80);
}

/** `repo` as a local directory: an existing path, else `<reposDir>/<owner>__<name>`, `<owner>/<name>` or `<name>`. */
function localRepository(repo: string, reposDir?: string): string | null {
  if (path.isAbsolute(repo) && fs.existsSync(repo)) return repo;
  if (!reposDir) return null;
  const [owner, name] = repo.split("/");
  const tries = [path.join(reposDir, repo.replace("/", "__")), path.join(reposDir, repo), ...(name ? [path.join(reposDir, name)] : [path.join(reposDir, owner!)])];
  return tries.find((p) => fs.existsSync(path.join(p, ".git")) || fs.existsSync(path.join(p, "HEAD"))) ?? null;
}

const strip = (name: string | undefined) => (!name || name === "/dev/null" ? null : name.replace(/^[ab]\//, ""));

/** The files `patch` gives when applied to their versions at `commit` (path → content), or the reason it does not apply. */
async function patchedFiles(repo: string, commit: string, patch: string): Promise<Record<string, string> | string> {
  const files: Record<string, string> = {};
  for (const file of parsePatch(patch)) {
    const oldName = strip(file.oldFileName);
    const newName = strip(file.newFileName);
    if (!newName) continue; // a deleted test file: nothing to write
    const before = oldName ? await git(repo, ["show", `${commit}:${oldName}`], { allowFailure: true }) : null;
    if (before && before.code !== 0) return `test_patch changes ${oldName}, which is not in base_commit`;
    const after = applyPatch(before?.stdout ?? "", file);
    if (after === false) return `test_patch does not apply to ${newName} at base_commit`;
    files[newName] = after;
  }
  return Object.keys(files).length ? files : "test_patch writes no file";
}

export async function importSweBench({ file, reposDir, testCommand: template }: { file: string; reposDir?: string; testCommand?: string }): Promise<{
  tasks: EvalTask[];
  dropped: Dropped[];
}> {
  const tasks: EvalTask[] = [];
  const dropped: Dropped[] = [];
  const lines = fs.readFileSync(file, "utf8").split("\n");
  for (const [i, line] of lines.entries()) {
    if (!line.trim()) continue;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      throw new Error(`${file}:${i + 1}: not a JSON object`);
    }
    const parsed = instanceSchema.safeParse(raw);
    if (!parsed.success) throw new Error(`${file}:${i + 1}: ${parsed.error.issues.map((x) => `${x.path.join(".")}: ${x.message}`).join("; ")}`);
    const inst = parsed.data;
    const id = slug(inst.instance_id);
    const drop = (reason: string) => dropped.push({ id, source: "swe-bench", commit: inst.base_commit, reason });
    const repo = localRepository(inst.repo, reposDir);
    if (!repo) {
      drop(`repository ${inst.repo} is not available locally${reposDir ? ` under ${reposDir}` : " (give --repos-dir)"}`);
      continue;
    }
    const base = await resolveCommit(repo, inst.base_commit);
    if (!base) {
      drop(`base_commit ${inst.base_commit} is not in ${repo}`);
      continue;
    }
    const hiddenFiles = await patchedFiles(repo, base, inst.test_patch);
    if (typeof hiddenFiles === "string") {
      drop(hiddenFiles);
      continue;
    }
    if (!inst.FAIL_TO_PASS.length) {
      drop("FAIL_TO_PASS is empty");
      continue;
    }
    const failToPass = `(${testCommand(inst.FAIL_TO_PASS, template)})`;
    const atBase = await checkInSandbox({ repoPath: repo, ref: base, command: failToPass, hiddenFiles });
    if (atBase.passed) {
      drop("its FAIL_TO_PASS tests already pass at base_commit");
      continue;
    }
    tasks.push({
      id,
      description: `SWE-bench ${inst.instance_id} (${inst.repo} at ${base.slice(0, 8)})`,
      source: "swe-bench",
      repo: { path: repo, commit: base },
      hiddenFiles,
      request: inst.problem_statement,
      check: inst.PASS_TO_PASS.length ? `${failToPass} && (${testCommand(inst.PASS_TO_PASS, template)})` : failToPass,
    });
  }
  return { tasks, dropped };
}
