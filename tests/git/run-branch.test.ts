import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProject } from "@/lib/projects/queries";
import { createRun } from "@/lib/db/queries/runs";
import { appendEvents, listEvents } from "@/lib/db/event-store";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import {
  buildRunContext,
  commitCheckpoint,
  commitRunRecords,
  commitSpec,
  createRunBranch,
  parseEvents,
  parseSpec,
  readMemory,
  readProjectConfig,
  rollbackToCheckpoint,
  runContextSchema,
  squashMerge,
  updateMemory,
} from "@/lib/git";
import { gitOut } from "@/lib/git/run";
import type { NewRunEvent } from "@/lib/workflow";
import { createSandbox, type RunSandbox } from "@/lib/sandbox";
import { commitAll, makeRepo, show, writeFiles } from "./helpers";

let repo: string;
let projectId: string;
let userId: string;
const sandboxes: RunSandbox[] = [];

beforeAll(async () => {
  repo = await makeRepo({
    "README.md": "# demo\n",
    "src/app.ts": "export const a = 1;\n",
    ".gitignore": "node_modules\n",
    ".autonomous/config.json": JSON.stringify({
      excludePaths: ["secrets", "*.log"],
      trustMode: { planning: "auto" },
      maxClarifications: 1,
      somethingElse: true,
    }),
  });
  userId = (await ensureLocalOwner()).id;
  projectId = (await createProject({ name: "demo", ownerId: userId, repository: { type: "local", path: repo } })).id;
});

afterAll(async () => {
  for (const s of sandboxes) await s.destroy();
});

async function startRun(request: string) {
  const run = await createRun({ projectId, userId, request, config: { git: { baseBranch: "main" } } });
  const { branch, baseSha } = await createRunBranch({ repoPath: repo, runId: run.id, request, baseBranch: "main" });
  const project = await readProjectConfig({ repoPath: repo, ref: branch });
  const sandbox = await createSandbox({ runId: run.id, repoPath: repo, ref: branch, branch, diffBase: baseSha, kind: "local", excludePaths: project.excludePaths });
  sandboxes.push(sandbox);
  return { run, branch, baseSha, sandbox };
}

const log = (ref: string, format = "%s") => gitOut(repo, ["log", `--format=${format}`, ref]).then((t) => t.split("\n"));

describe("a run's branch", () => {
  it("reads .autonomous/config.json as project defaults and excludePaths", async () => {
    const config = await readProjectConfig({ repoPath: repo, ref: "main" });
    expect(config).toEqual({ defaults: { trustMode: { planning: "auto" }, maxClarifications: 1 }, excludePaths: ["secrets", "*.log"], allowInternet: false });
  });

  it("holds the spec (one commit per version), one checkpoint per task, context.json, the report and events.jsonl", async () => {
    const request = "Add a greeting module";
    const { run, branch, baseSha, sandbox } = await startRun(request);
    expect(branch).toBe(`autonomous/${run.id}-add-a-greeting-module`);
    expect(await gitOut(repo, ["merge-base", branch, "main"])).toBe(baseSha);

    const plan = { repoPath: repo, branch, runId: run.id, title: request, request, tasks: [
      { id: "T1", title: "Create greet()", acceptanceCriteria: ["greet returns a string"] },
      { id: "T2", title: "Export it", dependsOn: ["T1"] },
    ] };
    const v1 = await commitSpec({ ...plan, version: 1, mermaid: "flowchart TD\n  T1 --> T2" });
    const v2 = await commitSpec({ ...plan, version: 2, status: "edited", mermaid: "flowchart TD\n  T1 --> T2\n  T2 --> Done" });
    expect(v1.path).toBe(".autonomous/specs/001-add-a-greeting-module.md");
    expect(v2.path).toBe(v1.path);
    const spec = parseSpec(await show(repo, `${branch}:${v2.path}`));
    expect(spec.frontMatter).toMatchObject({ run: run.id, version: 2, status: "edited", tasks: 2 });
    expect(spec.mermaid).toBe("flowchart TD\n  T1 --> T2\n  T2 --> Done");
    expect(parseSpec(await show(repo, `${v1.sha}:${v1.path}`)).frontMatter.version).toBe(1);
    // The spec commit reached the checked-out worktree without disturbing it.
    expect(await sandbox.readFile(v2.path)).toContain("T2 --> Done");

    await sandbox.writeFile("src/greet.ts", "export const greet = () => 'hi';\n");
    await sandbox.writeFile("secrets/token.txt", "do-not-commit");
    await sandbox.writeFile("debug.log", "noise");
    await sandbox.writeFile("src/deep/trace.log", "noise");
    const t1 = await commitCheckpoint({ sandbox, runId: run.id, taskId: "T1", title: "Create greet()" });
    await sandbox.writeFile("src/index.ts", "export * from './greet';\n");
    const t2 = await commitCheckpoint({ sandbox, runId: run.id, taskId: "T2", title: "Export it" });
    expect(await gitOut(repo, ["rev-parse", branch])).toBe(t2.sha);

    const subjects = await log(`main..${branch}`);
    expect(subjects).toEqual([
      `Task T2: Export it (run ${run.id})`,
      `Task T1: Create greet() (run ${run.id})`,
      `Plan v2: ${request} (run ${run.id})`,
      `Plan v1: ${request} (run ${run.id})`,
    ]);
    expect(new Set(await log(`main..${branch}`, "%an <%ae>|%cn"))).toEqual(new Set(["Gatehouse <gatehouse@localhost>|Gatehouse"]));
    expect(await gitOut(repo, ["log", "-1", "--format=%B", t1.sha])).toContain("Gatehouse-Task: T1");
    const t1Files = await gitOut(repo, ["diff-tree", "--no-commit-id", "--name-only", "-r", t1.sha]);
    expect(t1Files.split("\n")).toEqual(["src/greet.ts"]);
    const diff = await sandbox.diff();
    expect(diff).toContain("src/greet.ts");
    expect(diff).not.toContain("do-not-commit");
    expect(diff).not.toContain(".autonomous/specs");

    // Records at the end: built from the stored event log, validated, committed together.
    const lifecycle: NewRunEvent[] = [
      { type: "RUN_STARTED", payload: {} },
      { type: "STAGE_STARTED", payload: { stage: "planning" } },
      { type: "PLAN_CREATED", payload: { version: 1, path: v1.path, commitSha: v1.sha } },
      { type: "PLAN_EDITED", payload: { version: 2, by: userId, path: v2.path, commitSha: v2.sha } },
      { type: "STAGE_STARTED", payload: { stage: "implementation" } },
      { type: "TASK_COMPLETED", payload: { taskId: "T1", commitSha: t1.sha } },
      { type: "TASK_COMPLETED", payload: { taskId: "T2", commitSha: t2.sha } },
      { type: "IMPLEMENTATION_SUCCEEDED", payload: { attempt: 1, commitSha: t2.sha } },
      { type: "STAGE_STARTED", payload: { stage: "validation" } },
      { type: "VALIDATION_PASSED", payload: { attempt: 1, score: 10 } },
      { type: "RUN_COMPLETED", payload: { summary: "done" } },
    ];
    await appendEvents(run.id, lifecycle);
    const events = await listEvents({ runId: run.id });
    const context = buildRunContext({ events, baseBranch: "main" });
    const records = await commitRunRecords({ repoPath: repo, branch, context, validationReport: "# Validation\n\nPassed: 10/10\n", events });
    expect(records.changed).toBe(true);
    const again = await commitRunRecords({ repoPath: repo, branch, context, validationReport: "# Validation\n\nPassed: 10/10\n", events });
    expect(again).toMatchObject({ sha: records.sha, changed: false });

    const dir = `.autonomous/runs/${run.id}`;
    const stored = runContextSchema.parse(JSON.parse(await show(repo, `${branch}:${dir}/context.json`)));
    expect(stored).toMatchObject({ runId: run.id, request, status: "completed", branch, baseBranch: "main" });
    expect(stored.artifacts.filter((a) => a.type === "spec").map((a) => [a.version, a.commitSha])).toEqual([[1, v1.sha], [2, v2.sha]]);
    expect(stored.artifacts.filter((a) => a.type === "checkpoint").map((a) => a.commitSha)).toEqual([t1.sha, t2.sha]);
    expect(stored.decisions).toEqual([expect.objectContaining({ kind: "other", by: userId, decision: "plan edited (v2)" })]);
    expect(await show(repo, `${branch}:${dir}/validation-report.md`)).toContain("Passed: 10/10");
    const jsonl = await show(repo, `${branch}:${dir}/events.jsonl`);
    expect(jsonl.split("\n")).toHaveLength(events.length);
    expect(Object.keys(JSON.parse(jsonl.split("\n")[0]!))).toEqual(["id", "sequence", "type", "payload", "timestamp"]);
    expect(parseEvents(run.id, jsonl)).toEqual(events as unknown[]);
    // A context.json that does not match the schema is refused.
    await expect(commitRunRecords({ repoPath: repo, branch, context: { ...context, runId: "not a run" }, events })).rejects.toMatchObject({ code: "bad_request:git" });

    // Memory: one entry per finished run, read back.
    const m1 = await updateMemory({ repoPath: repo, branch, runId: run.id, title: request, outcome: "completed", decisions: ["Put helpers in src/"], techStack: ["TypeScript"] });
    const m2 = await updateMemory({ repoPath: repo, branch, runId: run.id, title: request, outcome: "completed", decisions: ["Put helpers in src/"] });
    expect(m2).toMatchObject({ sha: m1.sha, changed: false });
    const memory = await readMemory({ repoPath: repo, ref: branch });
    expect(memory).toMatchObject({ project: path.basename(repo), techStack: ["TypeScript"] });
    expect(memory.pastDecisions).toHaveLength(1);
    expect(memory.pastDecisions[0]).toMatchObject({ runId: run.id });
    expect(memory.pastDecisions[0]!.body).toContain("- Put helpers in src/");

    // Squash merge to main: one commit, one parent, carrying the code and the records.
    const merged = await squashMerge({ repoPath: repo, branch, baseBranch: "main", runId: run.id, title: request });
    expect(merged.status).toBe("merged");
    const mainHead = await gitOut(repo, ["rev-parse", "main"]);
    expect(merged.status === "merged" && merged.sha).toBe(mainHead);
    expect((await gitOut(repo, ["rev-list", "--parents", "-n1", "main"])).split(" ")).toHaveLength(2);
    expect(await show(repo, "main:src/greet.ts")).toContain("greet");
    expect(await show(repo, `main:${dir}/context.json`)).toContain(run.id);
    expect(await show(repo, "main:.autonomous/memory.md")).toContain("## Past Decisions");
    // The user's checkout of main followed along.
    expect(await fs.readFile(path.join(repo, "src/greet.ts"), "utf8")).toContain("greet");
    await expect(fs.access(path.join(repo, "secrets/token.txt"))).rejects.toThrow();
  });

  it("a conflicting base is reported with the conflicting files and nothing is merged", async () => {
    const { run, branch, sandbox } = await startRun("Change the constant");
    await sandbox.writeFile("src/app.ts", "export const a = 2;\n");
    await sandbox.writeFile("src/new.ts", "export const b = 1;\n");
    await commitCheckpoint({ sandbox, runId: run.id, taskId: "T1", title: "Change a" });
    await writeFiles(repo, { "src/app.ts": "export const a = 3;\n" });
    const mainBefore = await commitAll(repo, "someone else changed a");
    const result = await squashMerge({ repoPath: repo, branch, baseBranch: "main", runId: run.id, title: "Change the constant" });
    expect(result).toMatchObject({ status: "conflict", files: ["src/app.ts"] });
    expect(await gitOut(repo, ["rev-parse", "main"])).toBe(mainBefore);
    expect(await fs.readFile(path.join(repo, "src/app.ts"), "utf8")).toBe("export const a = 3;\n");
  });

  it("a dirty checkout of the base is reported with whole file names and the reason", async () => {
    const { run, branch, sandbox } = await startRun("Touch a file");
    await sandbox.writeFile("src/touched.ts", "export const t = 1;\n");
    await commitCheckpoint({ sandbox, runId: run.id, taskId: "T1", title: "Touch" });
    const readme = await fs.readFile(path.join(repo, "README.md"), "utf8");
    await writeFiles(repo, { "README.md": `${readme}uncommitted\n` });
    try {
      const result = await squashMerge({ repoPath: repo, branch, baseBranch: "main", runId: run.id, title: "Touch a file" });
      expect(result.status).toBe("conflict");
      expect(result.status === "conflict" && result.files).toEqual(["README.md"]);
      expect(result.status === "conflict" && result.reason).toContain("has uncommitted changes");
    } finally {
      await writeFiles(repo, { "README.md": readme });
    }
  });

  it("a failed task rolls back to the last checkpoint", async () => {
    const { run, branch, sandbox } = await startRun("Two tasks, second fails");
    await sandbox.writeFile("src/one.ts", "export const one = 1;\n");
    const t1 = await commitCheckpoint({ sandbox, runId: run.id, taskId: "T1", title: "one" });
    await sandbox.writeFile("src/one.ts", "broken(\n");
    await sandbox.writeFile("src/two.ts", "half done");
    await sandbox.writeFile("README.md", "clobbered");
    const back = await rollbackToCheckpoint({ sandbox });
    expect(back.sha).toBe(t1.sha);
    expect(await sandbox.readFile("src/one.ts")).toBe("export const one = 1;\n");
    expect(await sandbox.readFile("README.md")).toBe("# demo\n");
    await expect(sandbox.readFile("src/two.ts")).rejects.toMatchObject({ code: "not_found:sandbox" });
    expect(await gitOut(repo, ["rev-parse", branch])).toBe(t1.sha);
    expect(await sandbox.diff()).toContain("src/one.ts");
  });
});
