import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { checkCommand, checkWrite, DEFAULT_POLICY, deleteTargets, destructive, matchesGlob, type Policy } from "./policy";
import { implementerTools, type ToolContext } from "./tools";
import { createTempSandbox } from "@/tests/agents/helpers/temp-sandbox";

describe("policy: what is risky", () => {
  it("recognises destructive commands, also inside sh -c", () => {
    for (const [cmd, args, why] of [
      ["git", ["push", "--force", "origin", "main"], /force-push/],
      ["git", ["push", "origin", "+main"], /force-push/],
      ["git", ["reset", "--hard", "HEAD~3"], /reset --hard/],
      ["git", ["rebase", "-i", "main"], /rewrites history/],
      ["git", ["clean", "-fdx"], /git clean -f/],
      ["rm", ["-rf", "src"], /recursively/],
      ["/bin/rm", ["--recursive", "x"], /recursively/],
      ["sh", ["-c", "npm test && rm -r dist"], /recursively/],
      ["bash", ["-c", "psql -c 'DROP TABLE users'"], /drops data/],
    ] as const) {
      expect(destructive(cmd, [...args]), `${cmd} ${args.join(" ")}`).toMatch(why);
    }
    for (const [cmd, args] of [["git", ["push", "origin", "main"]], ["rm", ["file.txt"]], ["npm", ["test"]], ["sh", ["-c", "echo drop tables of contents"]]] as const) {
      expect(destructive(cmd, [...args]), `${cmd} ${args.join(" ")}`).toBeNull();
    }
  });

  it("matches protected path globs: ** any depth, * one segment", () => {
    expect(matchesGlob(".github/workflows/ci.yml", ".github/**")).toBe(true);
    expect(matchesGlob("web/package-lock.json", "**/package-lock.json")).toBe(true);
    expect(matchesGlob("package-lock.json", "**/package-lock.json")).toBe(true);
    expect(matchesGlob("db/migrations/001.sql", "**/migrations/**")).toBe(true);
    expect(matchesGlob("src/migrations.ts", "**/migrations/**")).toBe(false);
    expect(matchesGlob("src/a/b.ts", "src/*.ts")).toBe(false);
    expect(checkWrite("write_file", "drizzle/0001.sql", DEFAULT_POLICY)).toMatchObject({ fingerprint: "write:drizzle/0001.sql" });
    expect(checkWrite("write_file", "src/app.ts", DEFAULT_POLICY)).toBeNull();
  });

  it("deny list first, then the allow list, then risky → ask", () => {
    const policy: Policy = { ...DEFAULT_POLICY, commands: { allow: ["npm test", "git"], deny: ["git push"] } };
    expect(checkCommand("git", ["push", "origin"], policy)).toMatchObject({ verdict: "deny", reason: expect.stringMatching(/deny list/) });
    expect(checkCommand("npm", ["install"], policy)).toMatchObject({ verdict: "deny", reason: expect.stringMatching(/Only these commands/) });
    expect(checkCommand("npm", ["test", "--", "-u"], policy)).toEqual({ verdict: "allow" });
    expect(checkCommand("git", ["reset", "--hard"], policy)).toMatchObject({ verdict: "ask", action: { summary: "git reset --hard" } });
  });
});

describe("policy: deletes against the plan's scope", () => {
  const scope = ["src/", "build/tmp.txt", "docs/*.md"];

  it("names a delete's targets relative to its working directory, through sh -c and git rm", () => {
    expect(deleteTargets("rm", ["-rf", "a", "--", "-b"], "sub")).toEqual(["sub/a", "sub/-b"]);
    expect(deleteTargets("git", ["rm", "-r", "x"])).toEqual(["x"]);
    expect(deleteTargets("ls", ["-la"])).toBeNull();
  });

  it("outside the scope a delete (recursive or plain) is risky; inside it is not", () => {
    for (const [cmd, args] of [
      ["rm", ["-rf", "old"]],
      ["rm", ["README.md"]],
      ["rm", ["-rf", "src/../lib"]],
      ["rm", ["-rf", "src/*"]],
      ["rm", ["-rf", "."]],
      ["sh", ["-c", "npm test && rm -rf /"]],
      ["git", ["rm", "package.json"]],
      ["rmdir", ["build"]],
    ] as const) {
      expect(destructive(cmd, [...args], { scope }), `${cmd} ${args.join(" ")}`).toMatch(/outside the plan's scope/);
    }
    for (const [cmd, args] of [["rm", ["-rf", "src/cache"]], ["rm", ["build/tmp.txt"]], ["rm", ["docs/a.md"]], ["sh", ["-c", "rm -rf src/x && echo ok"]]] as const) {
      expect(destructive(cmd, [...args], { scope }), `${cmd} ${args.join(" ")}`).toBeNull();
    }
    expect(destructive("rm", ["-rf", "cache"], { scope, cwd: "src" })).toBeNull();
    expect(checkCommand("rm", ["-rf", "old"], DEFAULT_POLICY, { scope })).toMatchObject({
      verdict: "ask",
      action: { summary: "rm -rf old", reason: expect.stringMatching(/deletes old, outside the plan's scope/), fingerprint: "run_command:rm -rf old", paths: ["old"] },
    });
    // What an approval would let it change, also through sh -c (a glob names nothing for sure).
    expect(checkCommand("sh", ["-c", "rm -rf old build/* && rm x.txt"], DEFAULT_POLICY, { scope })).toMatchObject({ action: { paths: ["old", "x.txt"] } });
    // Without a scope, only a recursive delete asks (as before).
    expect(destructive("rm", ["-rf", "old"])).toMatch(/recursively/);
    expect(destructive("rm", ["old"])).toBeNull();
  });
});

describe("policy in the tools", () => {
  let sandbox: Awaited<ReturnType<typeof createTempSandbox>>;
  beforeEach(async () => {
    sandbox = await createTempSandbox({ "README.md": "# x\n" });
  });
  afterEach(() => sandbox.destroy());

  const context = (policy: Policy, approved: string[] = []): ToolContext => ({
    sandbox,
    todos: [{ id: "T1", title: "t", status: "in_progress" }],
    filesChanged: [],
    progress: false,
    policy,
    approved,
    hold: null,
    taskFiles: {},
  });
  const call = (ctx: ToolContext, name: "write_file" | "run_command" | "update_todo", input: Record<string, unknown>) =>
    (implementerTools(ctx)[name] as unknown as { execute: (i: unknown, o: unknown) => Promise<unknown> }).execute(input, { abortSignal: undefined, toolCallId: "t", messages: [] });

  it("a held write is not written and holds the turn; an approval lets exactly that write through, once", async () => {
    const ctx = context(DEFAULT_POLICY);
    expect(await call(ctx, "write_file", { path: ".github/ci.yml", content: "x" })).toMatch(/^Needs a person's approval first/);
    expect(ctx.hold).toMatchObject({ fingerprint: "write:.github/ci.yml" });
    await expect(sandbox.readFile(".github/ci.yml")).rejects.toBeTruthy();

    const approved = context(DEFAULT_POLICY, ["write:.github/ci.yml"]);
    expect(await call(approved, "write_file", { path: ".github/ci.yml", content: "x" })).toMatch(/^Wrote/);
    expect(approved.approved).toEqual([]);
    expect(await call(approved, "write_file", { path: ".github/ci.yml", content: "y" })).toMatch(/^Needs a person's approval first/);
  });

  it("refuses a file past maxFilesPerTask or maxFilesPerRun, writing nothing", async () => {
    const ctx = context({ ...DEFAULT_POLICY, maxFilesPerTask: 2, maxFilesPerRun: 3 });
    await call(ctx, "write_file", { path: "a.txt", content: "a" });
    await call(ctx, "write_file", { path: "b.txt", content: "b" });
    await call(ctx, "write_file", { path: "a.txt", content: "a2" });
    await expect(call(ctx, "write_file", { path: "c.txt", content: "c" })).rejects.toThrow(/at most 2 files \(policy\.maxFilesPerTask\)/);
    ctx.todos = [{ id: "T1", title: "t", status: "done" }, { id: "T2", title: "u", status: "in_progress" }];
    await call(ctx, "write_file", { path: "c.txt", content: "c" });
    await expect(call(ctx, "write_file", { path: "d.txt", content: "d" })).rejects.toThrow(/at most 3 files \(policy\.maxFilesPerRun\)/);
    await expect(sandbox.readFile("d.txt")).rejects.toBeTruthy();
  });

  const restoreFrom = (ctx: ToolContext) => async (paths: string[]) => {
    // The test sandbox's checkpoint is its first commit.
    for (const p of paths) {
      const out = await ctx.sandbox.exec("git", ["show", `HEAD:${p}`]);
      if (out.exitCode === 0) await ctx.sandbox.writeFile(p, out.stdout);
      else await ctx.sandbox.exec("rm", ["-f", "--", p]);
    }
  };

  it("files a command creates count toward the caps: past one, the command's new files are undone and the refusal is recorded", async () => {
    const ctx = context({ ...DEFAULT_POLICY, maxFilesPerRun: 2 });
    ctx.refusals = [];
    ctx.restore = restoreFrom(ctx);
    await call(ctx, "write_file", { path: "a.txt", content: "a" });
    expect(await call(ctx, "run_command", { command: "sh", args: ["-c", "echo b > b.txt"] })).toMatchObject({ exitCode: 0 });
    expect(ctx.filesChanged).toEqual(["a.txt", "b.txt"]);
    expect(ctx.taskFiles).toEqual({ T1: ["a.txt", "b.txt"] });
    await expect(call(ctx, "run_command", { command: "sh", args: ["-c", "echo c > c.txt && echo b2 > b.txt"] })).rejects.toThrow(
      /at most 2 files \(policy\.maxFilesPerRun\); c\.txt would make 3.*put back/,
    );
    await expect(sandbox.readFile("c.txt")).rejects.toBeTruthy();
    expect(ctx.refusals).toEqual([{ tool: "run_command", summary: "sh -c echo c > c.txt && echo b2 > b.txt", reason: expect.stringMatching(/maxFilesPerRun/) }]);
    // A deny-list refusal is recorded too.
    const denied = context({ ...DEFAULT_POLICY, commands: { allow: [], deny: ["touch"] } });
    denied.refusals = [];
    await expect(call(denied, "run_command", { command: "touch", args: ["x"] })).rejects.toThrow(/deny list/);
    expect(denied.refusals).toEqual([{ tool: "run_command", summary: "touch x", reason: expect.stringMatching(/deny list/) }]);
  });

  it("a command that changes a protected path is undone and held; approved, the same command keeps its change", async () => {
    const ctx = context(DEFAULT_POLICY);
    ctx.restore = restoreFrom(ctx);
    const input = { command: "sh", args: ["-c", "mkdir -p .github && echo ci > .github/ci.yml && echo n > notes.txt"] };
    expect(await call(ctx, "run_command", input)).toMatch(/^Needs a person's approval first: The command changed protected paths: \.github\/ci\.yml \(\.github\/\*\*\)\. Its changes were undone\./);
    expect(ctx.hold).toMatchObject({ tool: "run_command", fingerprint: "run_command:sh -c mkdir -p .github && echo ci > .github/ci.yml && echo n > notes.txt" });
    await expect(sandbox.readFile(".github/ci.yml")).rejects.toBeTruthy();
    await expect(sandbox.readFile("notes.txt")).rejects.toBeTruthy();

    const approved = context(DEFAULT_POLICY, [ctx.hold!.fingerprint]);
    expect(await call(approved, "run_command", input)).toMatchObject({ exitCode: 0 });
    expect(await sandbox.readFile(".github/ci.yml")).toBe("ci\n");
    expect(approved.filesChanged).toEqual([".github/ci.yml", "notes.txt"]);
  });

  it("a delete inside the plan's scope runs; outside it is held", async () => {
    const ctx = context(DEFAULT_POLICY);
    ctx.scope = ["tmp/"];
    await call(ctx, "run_command", { command: "sh", args: ["-c", "mkdir -p tmp/c old && echo x > tmp/c/y && echo x > old/y"] });
    expect(await call(ctx, "run_command", { command: "rm", args: ["-rf", "tmp/c"] })).toMatchObject({ exitCode: 0 });
    expect(ctx.hold).toBeNull();
    expect(await call(ctx, "run_command", { command: "rm", args: ["-rf", "old"] })).toMatch(/^Needs a person's approval first: The command deletes old, outside the plan's scope \(tmp\/\)/);
    expect(await sandbox.readFile("old/y")).toBe("x\n");
  });
});
