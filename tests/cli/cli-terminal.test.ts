import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { printable } from "@/cli/format";
import { makeRepo } from "../api/helpers";
import { newProject } from "../workflow/harness";
import { startApiServer } from "./server";
import { cli, freshHome } from "./helpers";

/*
 * Finding 8 (#29): a run requested as `ANSI \e[2J\e]0;TITLE\a \e]52;c;…\a \e[8mhidden` made `show`, `logs` and `runs`
 * clear the screen, set the window title and write the clipboard; titles and names kept raw control characters; the
 * CLI crashed with EPIPE when piped into `head`.
 */

let server: Awaited<ReturnType<typeof startApiServer>>;
let env: Record<string, string>;
let projectName: string;
const TOKEN = process.env.GATEHOUSE_ADMIN_TOKEN!;
const ROOT = path.resolve(import.meta.dirname, "../..");
const HOSTILE = "ANSI \x1b[2J\x1b]0;TITLE\x07 \x1b]52;c;aGVsbG8=\x07 \x1b[8mhidden \x9b31m\u202egnp.exe";
/** Anything a terminal would act on: C0 controls but newline, DEL, C1, bidi overrides. */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

beforeAll(async () => {
  server = await startApiServer();
  const home = freshHome();
  env = { HOME: home, XDG_CONFIG_HOME: path.join(home, ".config"), GATEHOUSE_URL: server.url, GATEHOUSE_TOKEN: TOKEN };
  ({ name: projectName } = (await newProject(server.user)).project);
});
afterAll(async () => {
  await server?.close();
});

const api = async (method: string, urlPath: string, body?: unknown) => {
  const res = await fetch(`${server.url}${urlPath}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, json: (await res.json()) as any };
};

/** Start a run with the hostile request and cancel it with a hostile reason (so the event log holds one too). */
async function hostileRun(): Promise<string> {
  const configFile = path.join(env.HOME!, "manual.json");
  fs.writeFileSync(configFile, JSON.stringify({ trustMode: { planning: "manual" } }));
  const started = await cli(["--json", "run", HOSTILE, "--project", projectName, "--config", configFile], { env });
  expect(started.code).toBe(0);
  const runId = JSON.parse(started.stdout).run.id as string;
  expect((await cli(["cancel", runId, "--reason", HOSTILE], { env })).code).toBe(0);
  return runId;
}

describe("finding 8: the CLI never prints the server's control characters", () => {
  it("show, logs and runs print ESC, BEL, C1 and bidi overrides as visible escapes; --json stays exact", async () => {
    const runId = await hostileRun();
    for (const args of [["show", runId], ["logs", runId], ["runs"]]) {
      const out = await cli(args, { env });
      expect(out.code, args.join(" ")).toBe(0);
      expect(out.stdout, args.join(" ")).not.toMatch(RAW_CONTROL);
      expect(out.stdout, args.join(" ")).toContain("ANSI \\x1b[2J\\x1b]0;TITLE\\x07");
    }
    const logs = await cli(["logs", runId], { env });
    expect(logs.stdout).toContain("● cancelled: ANSI \\x1b[2J\\x1b]0;TITLE\\x07 \\x1b]52;c;aGVsbG8=\\x07 \\x1b[8mhidden \\x9b31m\\u202egnp.exe");

    const json = await cli(["--json", "show", runId], { env });
    expect(JSON.parse(json.stdout).run.originalRequest).toBe(HOSTILE);
    const jsonLogs = await cli(["--json", "logs", runId], { env });
    const cancelled = (JSON.parse(jsonLogs.stdout).events as Array<{ type: string; payload: { reason?: string } }>).find((e) => e.type === "RUN_CANCELLED");
    expect(cancelled?.payload.reason).toBe(HOSTILE);
  });

  it("an error message is escaped too", async () => {
    const out = await cli(["run", "do it", "--project", "\x1b]0;owned\x07"], { env });
    expect(out.code).toBe(4);
    expect(out.stderr).toContain('No project "\\x1b]0;owned\\x07"');
    expect(out.stderr).not.toMatch(RAW_CONTROL);
  });

  it("printable keeps newlines, tabs and CRLF line ends, and escapes a lone carriage return", () => {
    expect(printable("a\tb\nc\r\nd\re\x7f")).toBe("a\tb\nc\r\nd\\x0de\\x7f");
  });
});

describe("finding 8: titles and names lose their control characters at the server's edge", () => {
  it("a run's title, a project's name and a token's name are stored without control characters", async () => {
    const runId = await hostileRun();
    const { json: detail } = await api("GET", `/api/runs/${runId}`);
    expect(detail.run.originalRequest).toBe(HOSTILE);
    expect(detail.run.title).not.toMatch(RAW_CONTROL);
    expect(detail.run.title).toContain("ANSI [2J ]0;TITLE");

    const project = await api("POST", "/api/projects", { name: "Team\x1b[2J\x07 board\u202e", repository: { type: "local", path: makeRepo() } });
    expect(project.status).toBe(201);
    expect(project.json.project.name).toBe("Team [2J board");

    const token = await api("POST", "/api/tokens", { name: "ci\x1b]52;c;aGk=\x07 bot" });
    expect(token.status).toBe(201);
    expect(token.json.name).toBe("ci ]52;c;aGk= bot");
    const { json: tokens } = await api("GET", "/api/tokens");
    expect(tokens.tokens.find((t: { id: string }) => t.id === token.json.id).name).toBe("ci ]52;c;aGk= bot");
    expect((await api("POST", "/api/tokens", { name: "\x1b\x07" })).json.error.message).toMatch(/name.*must not be empty/);
  });
});

describe("finding 8: output into a closed pipe", () => {
  it("the real launcher, its stdout closed by the reader (| head), exits 0 without an EPIPE crash", async () => {
    const runId = await hostileRun();
    const result = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [path.join(ROOT, "bin/gatehouse.mjs"), "logs", runId], {
        cwd: ROOT,
        env: { PATH: process.env.PATH!, ...env } as Record<string, string | undefined> as NodeJS.ProcessEnv,
        stdio: ["ignore", "pipe", "pipe"],
      });
      // The reader goes away before the CLI writes a line, as `head -0` would.
      child.stdout.destroy();
      let stderr = "";
      child.stderr.on("data", (d) => (stderr += d));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code, stderr }));
    });
    expect(result.stderr).not.toMatch(/EPIPE|Error/);
    expect(result.code).toBe(0);
  });
});
