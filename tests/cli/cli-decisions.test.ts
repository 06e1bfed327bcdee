import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git, newProject } from "../workflow/harness";
import { startApiServer } from "./server";
import { cli, freshHome } from "./helpers";

let server: Awaited<ReturnType<typeof startApiServer>>;
let env: Record<string, string>;
let project: { id: string; name: string };
let repo: string;

beforeAll(async () => {
  server = await startApiServer();
  const home = freshHome();
  env = { HOME: home, XDG_CONFIG_HOME: path.join(home, ".config"), GATEHOUSE_URL: server.url, GATEHOUSE_TOKEN: process.env.GATEHOUSE_ADMIN_TOKEN! };
  ({ project, repo } = await newProject(server.user));
});
afterAll(async () => {
  await server?.close();
});

function configFile(config: unknown): string {
  const file = path.join(env.HOME!, `config-${Math.random().toString(36).slice(2)}.json`);
  fs.writeFileSync(file, JSON.stringify(config));
  return file;
}

async function start(request: string, config: unknown): Promise<string> {
  const out = await cli(["--json", "run", request, "--project", project.id, "--config", configFile(config)], { env });
  expect(out.code, out.stderr).toBe(0);
  return JSON.parse(out.stdout).run.id;
}

/** An $EDITOR: a shell script run on the plan file. */
function editor(script: string): string {
  const file = path.join(env.HOME!, `editor-${Math.random().toString(36).slice(2)}.sh`);
  fs.writeFileSync(file, `#!/bin/sh\n${script}\n`, { mode: 0o755 });
  return file;
}

const noteOf = (branch: string) => {
  const note = git(repo, "ls-tree", "-r", "--name-only", branch).split("\n").find((f) => f.startsWith("docs/requests/"))!;
  return git(repo, "show", `${branch}:${note}`);
};

describe("gatehouse CLI: every kind of decision, against the real API", () => {
  it("reject --feedback re-plans; edit refuses invalid Mermaid (nothing sent) and approves a valid edit as a new spec version", async () => {
    const runId = await start("Write a note", { trustMode: { planning: "manual" } });
    expect((await cli(["watch", runId, "--stop-when-waiting"], { env })).code).toBe(10);

    const rejected = await cli(["reject", runId, "--feedback", "Mention the reviewer"], { env });
    expect(rejected.code).toBe(0);
    const replanned = await cli(["watch", runId, "--stop-when-waiting"], { env });
    expect(replanned.code).toBe(10);
    expect(replanned.stdout).toContain("✗ rejected: Mention the reviewer");
    expect(replanned.stdout).toMatch(/plan v2/);

    const broken = await cli(["edit", runId], { env: { ...env, EDITOR: editor(`printf 'flowchart TD\\n  A[x] --> B{{{\\n' > "$1"`) } });
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/The edited plan was refused by the server's Mermaid check:\nInvalid Mermaid on line 2: /);
    expect(broken.stderr).toMatch(/gatehouse: The plan was not sent: fix the Mermaid on line 2\. Your edit is kept in \S+\.mmd; retry with npx gatehouse edit run_\w+ --file \S+\.mmd/);
    const still = JSON.parse((await cli(["--json", "show", runId], { env })).stdout);
    expect(still.run.status).toBe("awaiting_approval");
    expect(still.gates.filter((g: { status: string }) => g.status === "pending")).toHaveLength(1);

    // $VISUAL wins over $EDITOR; this one adds a node to the diagram.
    const edited = await cli(["edit", runId, "--notes", "added a review step"], {
      env: { ...env, EDITOR: "false", VISUAL: editor(`printf '  R[Reviewed from the CLI]\\n' >> "$1"`) },
    });
    expect(edited.code, edited.stderr).toBe(0);
    expect(edited.stdout).toContain(`Approved ${runId} with your edited plan`);

    const done = await cli(["watch", runId], { env });
    expect(done.code).toBe(0);
    expect(done.stdout).toMatch(/plan edited → v3/);
    const detail = JSON.parse((await cli(["--json", "show", runId], { env })).stdout);
    expect(detail.run.planVersion).toBe(3);
    const specLog = git(repo, "log", "--format=%s", detail.run.branch, "--", ".autonomous/specs");
    expect(specLog.split("\n").filter((l) => l.startsWith("Plan v"))).toHaveLength(3);
    const spec = git(repo, "ls-tree", "-r", "--name-only", detail.run.branch).split("\n").find((f) => f.startsWith(".autonomous/specs/"))!;
    expect(git(repo, "show", `${detail.run.branch}:${spec}`)).toContain("R[Reviewed from the CLI]");
  });

  it("typed prompts: a multiple choice by numbers and a file answer by path reach the implementer", async () => {
    const multi = await start("Pick letters [ask-multi: Which letters? | a | b | c]", { trustMode: { planning: "auto" } });
    const file = await start("Follow the spec [ask-file: Upload the spec]", { trustMode: { planning: "auto" } });

    expect((await cli(["watch", multi, "--stop-when-waiting"], { env })).code).toBe(10);
    const bad = await cli(["answer", multi], { env, input: "4\n9\nz\n" });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("No valid answer after three tries; nothing was sent.");
    const picked = await cli(["answer", multi], { env, input: "1, 3\n" });
    expect(picked.code, picked.stderr).toBe(0);
    expect(picked.stderr).toContain("Choose any (numbers separated by commas, e.g. 1,3):");

    expect((await cli(["watch", file, "--stop-when-waiting"], { env })).code).toBe(10);
    const spec = path.join(env.HOME!, "spec.md");
    fs.writeFileSync(spec, "# Spec\nThe API returns JSON.\n");
    const uploaded = await cli(["answer", file], { env, input: `${spec}\n` });
    expect(uploaded.code, uploaded.stderr).toBe(0);
    expect(uploaded.stderr).toContain("Path of the file to upload:");

    for (const id of [multi, file]) expect((await cli(["watch", id], { env })).code).toBe(0);
    const branchOf = async (id: string) => JSON.parse((await cli(["--json", "show", id], { env })).stdout).run.branch as string;
    expect(noteOf(await branchOf(multi))).toContain("- **Which letters?** — a, c\n");
    const fileNote = noteOf(await branchOf(file));
    expect(fileNote).toContain("spec.md");
    expect(fileNote).toContain("The API returns JSON.");
  });

  it("fix accept after a failed validation delivers the work; watch --json streams one JSON object per line and ends with the outcome", async () => {
    const runId = await start("Write a note [fail-validation: 1]", { trustMode: { planning: "auto", fixes: "manual" } });
    const waiting = await cli(["watch", runId, "--stop-when-waiting"], { env });
    expect(waiting.code).toBe(10);
    expect(waiting.stdout).toContain(`validation failed, waiting for your decision: npx gatehouse fix ${runId} retry|accept|cancel`);

    const accepted = await cli(["fix", runId, "accept", "--notes", "good enough"], { env });
    expect(accepted.code, accepted.stderr).toBe(0);

    const watched = await cli(["--json", "watch", runId], { env });
    expect(watched.code).toBe(0);
    const lines = watched.stdout.trim().split("\n").map((l) => JSON.parse(l));
    const types = lines.filter((l) => l.event).map((l) => l.event.type);
    expect(types).toEqual(expect.arrayContaining(["VALIDATION_FAILED", "FIX_DECISION_MADE", "RUN_COMPLETED"]));
    expect(lines.at(-1)).toEqual({ end: { status: "completed", cost: expect.objectContaining({ calls: expect.any(Number) }) } });

    const logs = await cli(["--json", "logs", runId, "--after", "3"], { env });
    const events = JSON.parse(logs.stdout).events as Array<{ sequence: number }>;
    expect(events[0]!.sequence).toBe(4);
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 4));
  });

  it("a paused run (two invalid plans in a row) says to retry; retry resumes it to completion", async () => {
    const runId = await start("Write a note [invalid-mermaid: 2]", { trustMode: { planning: "auto" } });
    const paused = await cli(["watch", runId, "--stop-when-waiting"], { env });
    expect(paused.code).toBe(10);
    expect(paused.stdout).toMatch(new RegExp(`⏸ paused \\(.+\\): npx gatehouse retry ${runId}`));
    const retried = await cli(["retry", runId], { env });
    expect(retried.code, retried.stderr).toBe(0);
    // On a terminal, watch draws a progress line (spinner, status, stage) between event lines and clears it at the end.
    const live = await cli(["watch", runId], { env, tty: true });
    expect(live.code).toBe(0);
    expect(live.stdout).toMatch(/\r\x1b\[K[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] \w+( \[\d\/4 \w+\])? · \d+s/);
    expect(live.stdout).toContain("● completed");
    expect(live.stdout.endsWith("\r\x1b[K")).toBe(true);
    expect((await cli(["retry", runId], { env })).code).toBe(5);
  });

  it("run --approaches 2 --watch starts two runs and follows the first to the end; --json keeps one object per line", async () => {
    const out = await cli(["--json", "run", "Write a note", "--project", project.name, "--config", configFile({ trustMode: { planning: "auto" } }), "--approaches", "2", "--watch"], { env });
    expect(out.code, out.stderr).toBe(0);
    const lines = out.stdout.trim().split("\n").map((l) => JSON.parse(l));
    const runs = lines[0].runs as Array<{ id: string; originalRequest: string }>;
    expect(runs).toHaveLength(2);
    expect(new Set(runs.map((r) => r.id)).size).toBe(2);
    // One group from one API call; each run is told which approach it is.
    expect(lines[0].groupId).toMatch(/^grp_/);
    expect(runs.map((r) => r.originalRequest)).toEqual(["Write a note\n\nApproach 1 of 2", "Write a note\n\nApproach 2 of 2"]);
    expect(lines.at(-1).end.status).toBe("completed");
    expect((await cli(["watch", runs[1]!.id], { env })).code).toBe(0);
  });
});
