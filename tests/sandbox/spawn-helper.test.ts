import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalSandbox } from "@/lib/sandbox";
import { runProcess } from "@/lib/sandbox/process";
import { makeRepo } from "../git/helpers";

/*
 * The local sandbox's commands are spawned by the spawn helper (lib/git/spawner.ts), not by the server: a fork of a
 * large server copies its page tables. The helper keeps what a direct spawn gave: the process group killed at the
 * timeout and on cancel (background children included), once the command exits, and the output caps.
 */

const env = { PATH: "/usr/bin:/bin" };
let dir: string;
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "gatehouse-spawn-helper-"));
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The pid's state letter from /proc (Z: a zombie, gone but not yet reaped by its parent), or null when it is gone. */
async function running(pid: number): Promise<boolean> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, "utf8").catch(() => null);
  return stat !== null && !/\) Z /.test(stat) && alive(pid);
}

async function eventually(check: () => Promise<boolean>, ms = 5000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

describe("sandboxed commands through the spawn helper", () => {
  it("a command's parent is the helper, not this process; argv, cwd, env and stdin are its own", async () => {
    const r = await runProcess({ file: "/bin/sh", args: ["-c", 'echo "$PPID|$PWD|$ONLY|$1"; cat', "sh", "a b"], cwd: dir, env: { ...env, ONLY: "mine" }, stdin: "in" });
    const [ppid, cwd, only, arg] = r.stdout.split("\n")[0]!.split("|");
    expect(Number(ppid)).not.toBe(process.pid);
    expect([await fs.realpath(cwd!), only, arg]).toEqual([await fs.realpath(dir), "mine", "a b"]);
    expect(r.stdout.split("\n")[1]).toBe("in");
    expect(r.exitCode).toBe(0);
  });

  it("cancelling kills the whole group at once, background children included", async () => {
    const pidFile = path.join(dir, "bg.pid");
    const controller = new AbortController();
    const done = runProcess({ file: "/bin/sh", args: ["-c", `sleep 300 & echo $! > ${pidFile}; wait`], cwd: dir, env, signal: controller.signal, timeoutMs: 60_000 });
    const bg = Number(await eventually(async () => (await fs.readFile(pidFile, "utf8").catch(() => "")).trim() !== "").then(() => fs.readFile(pidFile, "utf8")));
    expect(await running(bg)).toBe(true);
    controller.abort();
    const r = await done;
    expect(r.timedOut).toBe(false);
    expect(r.exitCode).toBe(137);
    expect(await eventually(async () => !(await running(bg)))).toBe(true);
  });

  it("what a command leaves running in the background dies with it when it exits", async () => {
    const r = await runProcess({ file: "/bin/sh", args: ["-c", "sleep 300 >/dev/null 2>&1 & echo $!"], cwd: dir, env });
    expect(r.exitCode).toBe(0);
    expect(await eventually(async () => !(await running(Number(r.stdout.trim()))))).toBe(true);
  });

  it("a program that does not exist answers 127 with the shell's message; exit codes and stderr come back", async () => {
    const missing = await runProcess({ file: "no-such-program-gatehouse", args: [], cwd: dir, env });
    expect(missing).toMatchObject({ exitCode: 127, stderr: "no-such-program-gatehouse: command not found\n", timedOut: false });
    const failed = await runProcess({ file: "/bin/sh", args: ["-c", "echo oops >&2; exit 3"], cwd: dir, env });
    expect(failed).toMatchObject({ exitCode: 3, stderr: "oops\n", stdout: "", truncated: false });
  });
});

describe("a local sandbox's commands", () => {
  let repo: string;
  let s: LocalSandbox;
  beforeAll(async () => {
    repo = await makeRepo();
    s = await LocalSandbox.create({ runId: "spawn-helper", repoPath: repo, ref: "main", isolation: "none" });
  });
  afterAll(async () => {
    await s.destroy();
  });

  it("are not children of the server", async () => {
    // Unisolated, so the parent is visible: the join-the-cgroup shell and prlimit exec into the command itself.
    const r = await s.exec("sh", ["-c", "echo $PPID"]);
    expect(r.exitCode).toBe(0);
    expect(Number(r.stdout.trim())).not.toBe(process.pid);
  });

  it("nor are its detached commands (the shell that records their exit code is the helper's child)", async () => {
    // The command's parent is that shell; the shell's parent (field 4 of its /proc stat) is who spawned it.
    const { id } = await s.startDetached("sh", ["-c", "cut -d' ' -f4 /proc/$PPID/stat"]);
    await eventually(async () => (await s.detachedStatus(id)).state === "exited");
    const status = await s.detachedStatus(id);
    expect(status.state).toBe("exited");
    const result = status.state === "exited" ? status.result : null;
    expect(result?.exitCode).toBe(0);
    expect(Number(result?.stdout.trim())).toBeGreaterThan(1);
    expect(Number(result?.stdout.trim())).not.toBe(process.pid);
  });
});
