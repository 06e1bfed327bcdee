import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { PathEscapeError, type ExecOptions, type ExecResult, type FileEntry, type Sandbox } from "@/lib/sandbox/types";

const run = promisify(execFile);

/**
 * A test Sandbox over a temp git repository: real files, real child processes, `git diff` against the first commit,
 * and the same confinement rules as the real sandboxes (including symlinks that point out).
 */
export async function createTempSandbox(files: Record<string, string> = {}): Promise<Sandbox & { root: string; execCalls: string[][] }> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "gatehouse-sbx-")));
  const git = (...args: string[]) => run("git", ["-c", "user.email=t@example.com", "-c", "user.name=t", ...args], { cwd: root });
  await git("init", "-q");
  for (const [p, content] of Object.entries({ "README.md": "# test repo\n", ...files })) {
    await fs.mkdir(path.dirname(path.join(root, p)), { recursive: true });
    await fs.writeFile(path.join(root, p), content);
  }
  await git("add", "-A");
  await git("commit", "-q", "-m", "initial");

  async function resolve(p: string): Promise<string> {
    if (path.isAbsolute(p)) throw new PathEscapeError(p);
    const full = path.resolve(root, p);
    if (full !== root && !full.startsWith(root + path.sep)) throw new PathEscapeError(p);
    // Follow symlinks of the longest existing prefix.
    let existing = full;
    while (existing !== root) {
      try {
        await fs.lstat(existing);
        break;
      } catch {
        existing = path.dirname(existing);
      }
    }
    const real = await fs.realpath(existing);
    if (real !== root && !real.startsWith(root + path.sep)) throw new PathEscapeError(p);
    return full;
  }

  const execCalls: string[][] = [];
  return {
    id: path.basename(root),
    kind: "local",
    isolated: false,
    root,
    execCalls,
    async readFile(p) {
      return fs.readFile(await resolve(p), "utf8");
    },
    async writeFile(p, content) {
      const full = await resolve(p);
      await fs.mkdir(path.dirname(full), { recursive: true });
      await fs.writeFile(full, content);
    },
    async listFiles(p = ".", options = {}): Promise<FileEntry[]> {
      const base = await resolve(p);
      const out: FileEntry[] = [];
      async function walk(dir: string) {
        for (const e of await fs.readdir(dir, { withFileTypes: true })) {
          if (e.name === ".git") continue;
          const full = path.join(dir, e.name);
          const rel = path.relative(root, full);
          out.push({ path: rel, type: e.isDirectory() ? "dir" : "file" });
          if (e.isDirectory() && options.recursive) await walk(full);
        }
      }
      await walk(base);
      return out.sort((a, b) => a.path.localeCompare(b.path));
    },
    async exec(command: string, args: string[], options: ExecOptions = {}): Promise<ExecResult> {
      execCalls.push([command, ...args]);
      const started = Date.now();
      try {
        const r = await run(command, args, { cwd: await resolve(options.cwd ?? "."), timeout: options.timeoutMs ?? 30_000 });
        return { exitCode: 0, stdout: r.stdout, stderr: r.stderr, timedOut: false, truncated: false, durationMs: Date.now() - started };
      } catch (error) {
        const e = error as { code?: number | string; stdout?: string; stderr?: string; killed?: boolean; message: string };
        return {
          exitCode: typeof e.code === "number" ? e.code : 127,
          stdout: e.stdout ?? "",
          stderr: e.stderr ?? e.message,
          timedOut: Boolean(e.killed),
          truncated: false,
          durationMs: Date.now() - started,
        };
      }
    },
    async diff() {
      await git("add", "-A", "--intent-to-add");
      const { stdout } = await git("diff", "--no-color");
      return stdout;
    },
    async destroy() {
      await fs.rm(root, { recursive: true, force: true });
    },
  };
}
