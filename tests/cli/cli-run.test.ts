import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fileBlock, git, newProject } from "../workflow/harness";
import { startApiServer } from "./server";
import { cli, freshHome, Transcript, type CliResult } from "./helpers";

let server: Awaited<ReturnType<typeof startApiServer>>;
const TOKEN = process.env.GATEHOUSE_ADMIN_TOKEN!;

beforeAll(async () => {
  server = await startApiServer();
});
afterAll(async () => {
  await server?.close();
});

describe("gatehouse CLI: a full run driven only through the CLI, against the real API and SSE stream", () => {
  it("login → projects → run → watch → approve → answer (typed prompt) → watch to completion; the branch holds the work", async () => {
    const { project, repo } = await newProject(server.user);
    const home = freshHome();
    // After login the CLI runs on the stored config alone: no URL or token in its environment.
    const env = { HOME: home, XDG_CONFIG_HOME: path.join(home, ".config") };
    const transcript = new Transcript();
    const step = async (args: string[], input?: string): Promise<CliResult> => {
      const result = await cli(args, { env, input });
      transcript.add(args, result, input);
      return result;
    };

    const login = await cli(["login", "--url", server.url, "--token", TOKEN], { env });
    expect(login.code).toBe(0);
    const configFile = path.join(home, ".config", "gatehouse", "config.json");
    expect(fs.statSync(configFile).mode & 0o777).toBe(0o600);
    expect(JSON.parse(fs.readFileSync(configFile, "utf8"))).toEqual({ url: server.url, token: TOKEN });
    transcript.add(["login", "--url", server.url, "--token", "<token>"], login);

    const projects = await step(["projects"]);
    expect(projects.code).toBe(0);
    expect(projects.stdout).toContain(project.id);

    const configPath = path.join(home, "run-config.json");
    fs.writeFileSync(configPath, JSON.stringify({ trustMode: { planning: "manual" } }));
    const request = `Add a greeting [ask: Which language? | English | French]\n\n${fileBlock("src/greet.txt", "hello")}`;
    const started = await step(["run", request, "--project", project.name, "--config", configPath]);
    expect(started.code).toBe(0);
    const runId = /Started (run_[a-z0-9]+)/.exec(started.stdout)![1]!;

    // A plain `watch` follows the run through both human waits to the end, in parallel with the decisions below.
    const follower = cli(["watch", runId], { env });

    const toApproval = await step(["watch", runId, "--stop-when-waiting"]);
    expect(toApproval.code).toBe(10);
    expect(toApproval.stdout).toContain(`waiting for your approval: npx gatehouse approve ${runId}`);
    expect(toApproval.stdout).toMatch(/plan v1 · 2 tasks/);

    const approved = await step(["approve", runId, "--notes", "Looks right"]);
    expect(approved.code).toBe(0);
    expect(approved.stdout).toContain("Approved plan gate #1");

    const toQuestion = await step(["watch", runId, "--stop-when-waiting"]);
    expect(toQuestion.code).toBe(10);
    const clarificationId = /gatehouse answer (clr_[a-z0-9]+)/.exec(toQuestion.stdout)![1]!;

    // The typed prompt: a single choice, answered with the option's number.
    const answered = await step(["answer", clarificationId], "2\n");
    expect(answered.code).toBe(0);
    expect(answered.stderr).toContain("implementation asks: Which language?");
    expect(answered.stderr).toContain("  2) French");

    const finished = await step(["watch", runId]);
    expect(finished.code).toBe(0);
    expect(finished.stdout).toMatch(/● completed/);
    expect(finished.stdout).toMatch(new RegExp(`${runId} completed · \\$\\d+\\.\\d{4} · \\d+ model calls`));
    expect(finished.stdout).toContain("[4/4 delivery] started");
    expect(finished.stdout.match(/cost so far: \$\d+\.\d{4} · \d+ model calls/g)?.length).toBeGreaterThanOrEqual(2);

    const followed = await follower;
    expect(followed.code).toBe(0);
    const lines = followed.stdout;
    for (const expected of ["⏸ plan gate #1 waits", "✓ approved: Looks right", "? implementation asks: Which language?", "✓ answered", "● completed"]) {
      expect(lines).toContain(expected);
    }
    expect(lines.indexOf("✓ approved")).toBeLessThan(lines.indexOf("✓ answered"));

    const diff = await step(["diff", runId]);
    expect(diff.code).toBe(0);
    expect(diff.stdout).toContain("+++ b/src/greet.txt");

    const listed = await step(["runs", "--status", "completed"]);
    expect(listed.stdout).toContain(runId);

    // The answer chosen at the prompt reached the implementer: it is in the note on the run's branch.
    const json = await cli(["--json", "show", runId], { env });
    const branch = JSON.parse(json.stdout).run.branch as string;
    const note = git(repo, "ls-tree", "-r", "--name-only", branch).split("\n").find((f) => f.startsWith("docs/requests/"))!;
    expect(git(repo, "show", `${branch}:${note}`)).toContain("French");

    // A decision that no longer fits: the gate was decided and the run is over.
    const again = await step(["approve", runId]);
    expect(again.code).toBe(5);
    expect(again.stderr).toMatch(/^gatehouse: Conflict: /);
    const reanswer = await step(["answer", clarificationId, "--choice", "English"]);
    expect(reanswer.code).toBe(5);

    fs.writeFileSync(path.join(server.dataDir, "cli-session.txt"), transcript.toString());
    console.log(`CLI session transcript: ${path.join(server.dataDir, "cli-session.txt")}\n${transcript}`);
  });
});
