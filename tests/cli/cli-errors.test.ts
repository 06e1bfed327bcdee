import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setMember } from "@/lib/db/queries/members";
import { makeUser } from "../auth/fixtures";
import { newProject } from "../workflow/harness";
import { startApiServer } from "./server";
import { cli, freshHome } from "./helpers";

let server: Awaited<ReturnType<typeof startApiServer>>;
let env: Record<string, string>;
let projectName: string;
let projectId: string;
const TOKEN = process.env.GATEHOUSE_ADMIN_TOKEN!;
const ROOT = path.resolve(import.meta.dirname, "../..");

beforeAll(async () => {
  server = await startApiServer();
  const home = freshHome();
  env = { HOME: home, XDG_CONFIG_HOME: path.join(home, ".config"), GATEHOUSE_URL: server.url, GATEHOUSE_TOKEN: TOKEN };
  ({ name: projectName, id: projectId } = (await newProject(server.user)).project);
});
afterAll(async () => {
  await server?.close();
});

/** The real launcher (`npx gatehouse` runs this file) as a separate process. */
function launcher(args: string[], childEnv: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, "bin/gatehouse.mjs"), ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH!, ...childEnv } as Record<string, string | undefined> as NodeJS.ProcessEnv,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("gatehouse CLI: errors say what to fix and exit with the documented code", () => {
  it("a bad token exits 3 from the real launcher process, saying how to log in again", async () => {
    const out = await launcher(["projects"], { ...env, GATEHOUSE_TOKEN: "not-a-real-token-0000" });
    expect(out.code).toBe(3);
    expect(out.stderr).toMatch(/^gatehouse: The server refused the token \(.+\)\. .*npx gatehouse login/);
    expect(out.stdout).toBe("");
    // The same launcher with the right token lists the project: the failure above was the token, nothing else.
    const ok = await launcher(["projects"], env);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(projectName);
  });

  it("login with a refused token exits 3 and stores nothing; without a login every command exits 3", async () => {
    const home = freshHome();
    const bare = { HOME: home, XDG_CONFIG_HOME: path.join(home, ".config") };
    const refused = await cli(["login", "--url", server.url, "--token", "wrong-token-123456"], { env: bare });
    expect(refused.code).toBe(3);
    expect(fs.existsSync(path.join(home, ".config", "gatehouse", "config.json"))).toBe(false);
    const notLoggedIn = await cli(["runs"], { env: bare });
    expect(notLoggedIn.code).toBe(3);
    expect(notLoggedIn.stderr).toContain("Not logged in: run `npx gatehouse login --url <server> --token <api token>`");
    // The token typed at the prompt (piped here) is accepted the same way.
    const prompted = await cli(["login"], { env: bare, input: `${server.url}\n${TOKEN}\n` });
    expect(prompted.code).toBe(0);
    expect(fs.statSync(path.join(home, ".config", "gatehouse", "config.json")).mode & 0o777).toBe(0o600);
  });

  it("404: an unknown run, question or project exits 4 with the server's message; --json puts the error code on stderr", async () => {
    for (const args of [["watch", "run_doesnotexist"], ["approve", "run_doesnotexist"], ["diff", "run_doesnotexist"], ["cancel", "run_doesnotexist"]]) {
      const out = await cli(args, { env });
      expect(out.code, args.join(" ")).toBe(4);
      expect(out.stderr, args.join(" ")).toMatch(/^gatehouse: Not found: .+ Check the id with `npx gatehouse runs`/);
    }
    const answer = await cli(["answer", "clr_doesnotexist", "--text", "yes"], { env });
    expect(answer.code).toBe(4);
    const project = await cli(["run", "do it", "--project", "no-such-project"], { env });
    expect(project.code).toBe(4);
    expect(project.stderr).toContain(`No project "no-such-project" among yours`);

    const json = await cli(["--json", "show", "run_doesnotexist"], { env });
    expect(json.code).toBe(4);
    expect(json.stdout).toBe("");
    expect(JSON.parse(json.stderr)).toEqual({ error: { code: expect.stringMatching(/^not_found:/), message: expect.any(String), exitCode: 4 } });
  });

  it("409: deciding on a run whose state does not fit exits 5; a cancelled run's watch exits 1", async () => {
    const configFile = path.join(env.HOME!, "manual.json");
    fs.writeFileSync(configFile, JSON.stringify({ trustMode: { planning: "manual" } }));
    const started = await cli(["--json", "run", "Write a note", "--project", projectName, "--config", configFile], { env });
    expect(started.code).toBe(0);
    const runId = JSON.parse(started.stdout).run.id as string;
    expect((await cli(["watch", runId, "--stop-when-waiting"], { env })).code).toBe(10);

    const notAFix = await cli(["fix", runId, "retry"], { env });
    expect(notAFix.code).toBe(5);
    expect(notAFix.stderr).toMatch(/^gatehouse: Conflict: /);

    expect((await cli(["cancel", runId, "--reason", "changed my mind"], { env })).code).toBe(0);
    const watched = await cli(["watch", runId], { env });
    expect(watched.code).toBe(1);
    expect(watched.stdout).toContain("● cancelled: changed my mind");

    const twice = await cli(["cancel", runId], { env });
    expect(twice.code).toBe(5);
    expect(twice.stderr).toContain("nothing to cancel");
    expect((await cli(["approve", runId], { env })).code).toBe(5);
    expect((await cli(["answer", runId, "--text", "x"], { env })).code).toBe(5);
  });

  it("roles: a viewer may look but not decide (403 → exit 3, naming the role to ask for); a stranger does not see the run (exit 4)", async () => {
    const viewer = await makeUser("Viewer");
    const stranger = await makeUser("Stranger");
    await setMember({ projectId, userId: viewer.id, role: "viewer" });
    const started = await cli(["--json", "run", "Write a note", "--project", projectId], { env });
    const runId = JSON.parse(started.stdout).run.id as string;
    const asViewer = { ...env, GATEHOUSE_TOKEN: viewer.token };
    expect((await cli(["show", runId], { env: asViewer })).code).toBe(0);
    const refused = await cli(["approve", runId], { env: asViewer });
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/^gatehouse: Not allowed: .* Ask a project owner for the approver role\./);
    expect((await cli(["cancel", runId], { env: asViewer })).code).toBe(3);
    expect((await cli(["cancel", runId], { env })).code).toBe(0);

    const asStranger = { ...env, GATEHOUSE_TOKEN: stranger.token };
    expect((await cli(["show", runId], { env: asStranger })).code).toBe(4);
    expect((await cli(["projects", "--json"], { env: asStranger })).stdout).toContain('"projects": []');
  });

  it("bad input exits 2 and names what to fix, before or from the server (400)", async () => {
    const cases: Array<[string[], RegExp]> = [
      [["runs", "--status", "bogus"], /--status: bogus is not a run status; use any of: queued, running/],
      [["run", "x", "--approaches", "9"], /--approaches: "9" is not a whole number from 1 to 5/],
      [["run", "x", "--config", "/nonexistent/config.json"], /--config: cannot read \/nonexistent\/config.json \(ENOENT\)/],
      [["reject", "run_x"], /required option '--feedback <text>' not specified/],
      [["fix", "run_x", "maybe"], /Allowed choices are retry, accept, replan, cancel/],
      [["frobnicate"], /unknown command 'frobnicate'/],
    ];
    for (const [args, message] of cases) {
      const out = await cli(args, { env });
      expect(out.code, args.join(" ")).toBe(2);
      expect(out.stderr, args.join(" ")).toMatch(message);
    }
    // The server's own 400 (an unknown config key) comes back as a usage error with its message.
    const configFile = path.join(env.HOME!, "bad.json");
    fs.writeFileSync(configFile, JSON.stringify({ trustMode: { planning: "sometimes" } }));
    const refused = await cli(["run", "x", "--project", projectName, "--config", configFile], { env });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^gatehouse: .*trustMode\.planning/);
  });
});
