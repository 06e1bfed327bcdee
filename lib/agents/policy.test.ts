import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { checkCommand, checkWrite, DEFAULT_POLICY, destructive, matchesGlob, type Policy } from "./policy";
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
  const call = (ctx: ToolContext, name: "write_file" | "run_command", input: Record<string, unknown>) =>
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
});
