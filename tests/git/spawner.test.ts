import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runChild, streamChild } from "@/lib/git/spawner";
import { git } from "@/lib/git";

/**
 * Host git is spawned by a small helper process (lib/git/spawner.ts), not by the server: each command still gets
 * exactly its argv, working directory, environment and stdin, and its own exit code and output back.
 */
describe("the git helper process", () => {
  it("runs each command with its own argv, cwd, env and stdin, from a process other than this one", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-spawner-"));
    const script = 'printf "%s|%s|%s|" "$1" "$PWD" "$ONLY_MINE"; cat; echo; echo " to stderr" >&2; echo "$PPID"; exit 7';
    const result = await runChild({ file: "/bin/sh", args: ["-c", script, "sh", "first arg"], cwd: dir, env: { PATH: "/usr/bin:/bin", ONLY_MINE: "yes" }, input: "from stdin" });
    const [arg, cwd, env, rest] = result.stdout.toString("utf8").split("|");
    expect([arg, fs.realpathSync(cwd!), env]).toEqual(["first arg", fs.realpathSync(dir), "yes"]);
    const [stdin, parent] = rest!.trim().split("\n");
    expect(stdin).toBe("from stdin");
    // The command's parent is the helper, not this (large) process.
    expect(Number(parent)).not.toBe(process.pid);
    expect(result.stderr.toString("utf8")).toBe(" to stderr\n");
    expect(result.code).toBe(7);
  });

  it("commands run side by side, each answered with its own output; a program that cannot start rejects", async () => {
    const dir = os.tmpdir();
    const outs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => runChild({ file: "/bin/sh", args: ["-c", `sleep 0.${8 - i}; echo ${i}`], cwd: dir, env: { PATH: "/usr/bin:/bin" } })),
    );
    expect(outs.map((o) => o.stdout.toString("utf8").trim())).toEqual(["0", "1", "2", "3", "4", "5", "6", "7"]);
    await expect(runChild({ file: "/no/such/program", args: [], cwd: dir, env: {} })).rejects.toThrow(/ENOENT/);
    await expect(git("/no/such/dir", ["status"])).rejects.toMatchObject({ code: "internal:git" });
  });

  it("binary output and large input pass through unchanged", async () => {
    const input = Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 256));
    const out = await runChild({ file: "/bin/cat", args: [], cwd: os.tmpdir(), env: { PATH: "/usr/bin:/bin" }, input });
    expect(Buffer.compare(out.stdout, input)).toBe(0);
  });

  it("a streamed command's output is handed over as it is read, from the helper; a reader that stops kills the command", async () => {
    // An endless command: only a reader that can stop it, chunk by chunk, ever sees an end.
    const chunks: Buffer[] = [];
    let read = 0;
    const script = 'echo "$PPID"; i=0; while true; do echo "line $i"; i=$((i+1)); done';
    const ended = await streamChild({ file: "/bin/sh", args: ["-c", script], cwd: os.tmpdir(), env: { PATH: "/usr/bin:/bin" } }, (chunk) => {
      chunks.push(chunk);
      read += chunk.length;
      return read < 200_000;
    });
    expect(ended.code).not.toBe(0);
    expect(chunks.length).toBeGreaterThan(1);
    const lines = Buffer.concat(chunks).toString("utf8").split("\n");
    expect(Number(lines[0])).not.toBe(process.pid);
    expect(lines.slice(1, 4)).toEqual(["line 0", "line 1", "line 2"]);
    await expect(streamChild({ file: "/no/such/program", args: [], cwd: os.tmpdir(), env: {} }, () => true)).rejects.toThrow(/ENOENT/);
  });
});
