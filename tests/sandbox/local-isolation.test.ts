import fs from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resetEnvCache } from "@/lib/env";
import { LocalSandbox, PathEscapeError, sandboxCapabilities } from "@/lib/sandbox";
import { bwrapArgs, bwrapStatus } from "@/lib/sandbox/bwrap";
import { makeRepo } from "../git/helpers";

const FAKE_SECRET = "sk-test-fake-secret-0123456789abcdef";
const UNLISTED_SECRET = "unlisted-app-token-value-42";

let repo: string;
const sandboxes: LocalSandbox[] = [];

async function sandbox(isolation: "none" | "auto", runId: string) {
  const s = await LocalSandbox.create({ runId, repoPath: repo, ref: "main", isolation });
  sandboxes.push(s);
  return s;
}

/** Host processes whose command line contains `marker` (the pid namespace does not hide them from the host). */
async function processesWith(marker: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await fs.readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await fs.readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    const stat = await fs.readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    if (cmdline.includes(marker) && !/\) Z /.test(stat)) pids.push(Number(entry));
  }
  return pids;
}

async function eventually(check: () => Promise<boolean>, ms = 5000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return check();
}

beforeAll(async () => {
  process.env.OPENAI_API_KEY = FAKE_SECRET;
  process.env.MY_UNLISTED_TOKEN = UNLISTED_SECRET;
  resetEnvCache();
  repo = await makeRepo();
});

afterAll(async () => {
  for (const s of sandboxes) await s.destroy();
  delete process.env.OPENAI_API_KEY;
  delete process.env.MY_UNLISTED_TOKEN;
  resetEnvCache();
});

for (const isolation of ["none", "auto"] as const) {
  describe(`local sandbox (isolation: ${isolation})`, () => {
    let s: LocalSandbox;
    beforeAll(async () => {
      s = await sandbox(isolation, `run_iso${isolation}`);
    });

    it("reports whether it is isolated: bubblewrap only where it works and is not switched off", () => {
      expect(s.isolated).toBe(isolation === "auto" && bwrapStatus().available);
    });

    it("a command cannot read the app's secrets from its environment, even when passed explicitly", async () => {
      const r = await s.exec("sh", ["-c", "env; echo \"k=$OPENAI_API_KEY\""], { env: { LEAK: FAKE_SECRET, OPENAI_API_KEY: "x", OK: "fine" } });
      expect(r.exitCode).toBe(0);
      expect(r.stdout).not.toContain(FAKE_SECRET);
      expect(r.stdout).not.toContain(UNLISTED_SECRET);
      expect(r.stdout).toContain("k=\n");
      expect(r.stdout).toContain("OK=fine");
      expect(r.stdout).toContain("PATH=");
    });

    it("refuses ../, absolute paths and .git for every file operation and for cwd", async () => {
      for (const p of ["../outside.txt", "a/../../outside.txt", "/etc/passwd", ".git/config", "src/../../x"]) {
        await expect(s.readFile(p)).rejects.toBeInstanceOf(PathEscapeError);
        await expect(s.writeFile(p, "x")).rejects.toBeInstanceOf(PathEscapeError);
        await expect(s.listFiles(p)).rejects.toBeInstanceOf(PathEscapeError);
        await expect(s.exec("true", [], { cwd: p })).rejects.toBeInstanceOf(PathEscapeError);
      }
      await expect(fs.access(path.join(path.dirname(s.workspacePath), "outside.txt"))).rejects.toThrow();
    });

    it("a symlink pointing outside the worktree cannot be read through or written through", async () => {
      const outside = await fs.mkdtemp(path.join(path.dirname(repo), "gatehouse-outside-"));
      await fs.writeFile(path.join(outside, "secret.txt"), "host secret");
      await fs.symlink(outside, path.join(s.workspacePath, "link"));
      await fs.symlink(path.join(outside, "secret.txt"), path.join(s.workspacePath, "file-link"));
      await fs.symlink(path.join(outside, "missing.txt"), path.join(s.workspacePath, "dangling"));
      await expect(s.readFile("link/secret.txt")).rejects.toBeInstanceOf(PathEscapeError);
      await expect(s.readFile("file-link")).rejects.toBeInstanceOf(PathEscapeError);
      await expect(s.writeFile("link/new.txt", "x")).rejects.toBeInstanceOf(PathEscapeError);
      await expect(s.writeFile("file-link", "overwritten")).rejects.toBeInstanceOf(PathEscapeError);
      await expect(s.writeFile("dangling", "x")).rejects.toBeInstanceOf(PathEscapeError);
      await expect(s.listFiles("link")).rejects.toBeInstanceOf(PathEscapeError);
      expect(await fs.readFile(path.join(outside, "secret.txt"), "utf8")).toBe("host secret");
      await expect(fs.access(path.join(outside, "new.txt"))).rejects.toThrow();
      await expect(fs.access(path.join(outside, "missing.txt"))).rejects.toThrow();
      // A symlink that stays inside is fine.
      await fs.symlink("README.md", path.join(s.workspacePath, "readme-link"));
      expect(await s.readFile("readme-link")).toBe("# demo\n");
    });

    it("file names and arguments with shell metacharacters are data, never executed", async () => {
      const nasty = "; rm -rf src $(touch pwned) `touch pwned2` && echo hi.txt";
      await s.writeFile(nasty, "payload");
      expect(await fs.readFile(path.join(s.workspacePath, nasty), "utf8")).toBe("payload");
      const args = ["; rm -rf src", "$(touch pwned)", "`touch pwned2`", "| cat /etc/passwd", "&& exit 3"];
      const r = await s.exec("printf", ["%s\\n", ...args]);
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toBe(args.map((a) => `${a}\n`).join(""));
      const cat = await s.exec("cat", [nasty]);
      expect(cat.stdout).toBe("payload");
      await expect(fs.access(path.join(s.workspacePath, "pwned"))).rejects.toThrow();
      await expect(fs.access(path.join(s.workspacePath, "pwned2"))).rejects.toThrow();
      expect(await s.readFile("src/app.ts")).toBe("export const a = 1;\n");
    });

    it("a command that forks children and sleeps is killed with all of them at the timeout", async () => {
      const marker = isolation === "none" ? "987.61" : "987.62";
      const r = await s.exec("sh", ["-c", `sleep ${marker} & (sleep ${marker} &) ; sh -c 'sleep ${marker}' & echo started; wait`], {
        timeoutMs: 1500,
      });
      expect(r.timedOut).toBe(true);
      expect(r.exitCode).toBeNull();
      expect(r.stdout).toContain("started");
      expect(await eventually(async () => (await processesWith(`sleep ${marker}`)).length === 0)).toBe(true);
    });

    it("50 MB of output is capped and the cut is marked", async () => {
      const r = await s.exec("head", ["-c", String(50 * 1024 * 1024), "/dev/zero"], { maxOutputBytes: 64 * 1024 });
      expect(r.exitCode).toBe(0);
      expect(r.truncated).toBe(true);
      expect(r.stdout.length).toBeLessThan(64 * 1024 + 200);
      expect(r.stdout).toContain(`[output truncated by Gatehouse: ${50 * 1024 * 1024 - 64 * 1024} of ${50 * 1024 * 1024} bytes omitted]`);
    });
  });
}

describe("bubblewrap isolation", () => {
  let s: LocalSandbox;
  beforeAll(async () => {
    s = await sandbox("auto", "run_bwrapnet");
  });

  it("is reported at start: isolated with bwrap, a visible warning without it", () => {
    const caps = sandboxCapabilities();
    expect(caps.bwrap.available).toBe(bwrapStatus().available);
    if (caps.bwrap.available) {
      expect(caps).toMatchObject({ kind: "local", isolated: true, warning: null });
    } else {
      expect(caps.isolated).toBe(false);
      expect(caps.warning).toMatch(/NOT isolated/);
    }
  });

  it("the Node that runs the app is bound after the private /tmp, so an app installed under /tmp still has it inside", () => {
    if (!bwrapStatus().available) return expect(sandboxCapabilities().isolated).toBe(false);
    const args = bwrapArgs({ writable: s.workspacePath, cwd: s.workspacePath, command: "true", args: [] });
    const prefix = path.dirname(path.dirname(process.execPath));
    const tmpfs = args.findIndex((a, i) => a === "--tmpfs" && args[i + 1] === "/tmp");
    const bind = args.findIndex((a, i) => a === "--ro-bind" && args[i + 1] === prefix && args[i + 2] === prefix);
    const covered = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/opt"].some((d) => prefix.startsWith(d + "/"));
    expect(tmpfs).toBeGreaterThan(-1);
    if (covered) expect(bind).toBe(-1);
    else expect(bind).toBeGreaterThan(tmpfs);
  });

  it("a connection to a server on 127.0.0.1 opened by the test is refused", async () => {
    let connections = 0;
    const server = net.createServer((socket) => {
      connections++;
      socket.end("hello");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const script = `const s=require("net").connect(${port},"127.0.0.1");s.on("connect",()=>{console.log("CONNECTED");process.exit(0)});s.on("error",e=>{console.log("ERR "+e.code);process.exit(7)})`;
      const r = await s.exec(process.execPath, ["-e", script], { timeoutMs: 20_000 });
      if (s.isolated) {
        expect(r.stdout).not.toContain("CONNECTED");
        expect(r.exitCode).toBe(7);
        expect(connections).toBe(0);
      } else {
        // Without bubblewrap the app says so (previous test); the command reaches the host network.
        expect(r.stdout).toContain("CONNECTED");
      }
    } finally {
      server.close();
    }
  });

  it("a write outside the worktree fails and leaves the host untouched", async () => {
    const target = path.join(repo, "escaped.txt");
    const r = await s.exec("sh", ["-c", `echo x > '${target}'; echo y > /usr/gatehouse-escape; echo z > inside.txt`]);
    expect(await fs.readFile(path.join(s.workspacePath, "inside.txt"), "utf8")).toBe("z\n");
    if (s.isolated) {
      await expect(fs.access(target)).rejects.toThrow();
      await expect(fs.access("/usr/gatehouse-escape")).rejects.toThrow();
      expect(r.stderr).toMatch(/Read-only|No such file|Permission denied/);
    } else {
      expect(sandboxCapabilities().warning).toMatch(/NOT isolated/);
      await fs.rm(target, { force: true });
      await fs.rm("/usr/gatehouse-escape", { force: true });
    }
  });
});
