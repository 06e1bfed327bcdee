import fs from "node:fs";
import fsp from "node:fs/promises";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { LanguageModelV3CallOptions } from "@ai-sdk/provider";
import { collectCommand, implementerTurn, startImplementer, StepBudgetExceededError, type ImplementerState } from "@/lib/agents/implementer";
import { createScriptedModel, type ScriptedReply } from "@/lib/ai/scripted-model";
import { resetEnvCache } from "@/lib/env";
import { LocalSandbox, sandboxCapabilities } from "@/lib/sandbox";
import { cgroupSupport, reopenCommandCgroup } from "@/lib/sandbox/limits";
import type { DetachedStatus } from "@/lib/sandbox/types";
import { planOf } from "@/tests/agents/helpers/plan";
import { git, makeRepo } from "../workflow/harness";

/*
 * A command longer than a durable step: started detached by run_command, looked at again later (from any process), and
 * its result collected into the conversation exactly as an inline command's would be.
 */

let sandbox: LocalSandbox;
let repo: string;
let runId: string;
beforeEach(async () => {
  repo = makeRepo();
  runId = `run_detached_${crypto.randomUUID().slice(0, 8)}`;
  sandbox = await LocalSandbox.create({ runId, repoPath: repo, ref: "main", branch: "work" });
});
afterEach(() => sandbox.destroy());

async function ended(id: string): Promise<Extract<DetachedStatus, { state: "exited" }>> {
  for (let i = 0; i < 300; i++) {
    const status = await sandbox.detachedStatus(id);
    if (status.state === "exited") return status;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("the detached command never ended");
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

/** A killed process is gone once the kernel has delivered the signal: looked at until then. */
async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 50));
  return !alive(pid);
}

const pidOf = (id: string) => (JSON.parse(fs.readFileSync(`${sandbox.workspacePath}.home/commands/${id}/meta.json`, "utf8")) as { pid: number }).pid;

describe("detached commands in the local sandbox", () => {
  it("a command that ends between the look at its exit file and the look at its process is exited with its code, not lost", async () => {
    const { id } = await sandbox.startDetached("sh", ["-c", "exit 4"]);
    const dir = `${sandbox.workspacePath}.home/commands/${id}`;
    for (let i = 0; i < 200 && !fs.existsSync(`${dir}/exit`); i++) await new Promise((r) => setTimeout(r, 20));
    expect(await gone(pidOf(id))).toBe(true);
    // Replay the race: the first read of the exit file finds nothing, and the shell's `mv` lands right after it.
    fs.renameSync(`${dir}/exit`, `${dir}/exit.late`);
    const realRead = fsp.readFile.bind(fsp);
    let raced = false;
    const spy = vi.spyOn(fsp, "readFile").mockImplementation((async (file: Parameters<typeof fsp.readFile>[0], ...rest: unknown[]) => {
      if (!raced && String(file) === `${dir}/exit`) {
        raced = true;
        fs.renameSync(`${dir}/exit.late`, `${dir}/exit`);
        throw Object.assign(new Error("ENOENT: no such file or directory"), { code: "ENOENT" });
      }
      return (realRead as (...a: unknown[]) => Promise<unknown>)(file, ...rest);
    }) as typeof fsp.readFile);
    try {
      const status = await sandbox.detachedStatus(id);
      expect(raced).toBe(true);
      expect(status).toMatchObject({ state: "exited", result: { exitCode: 4, timedOut: false } });
      expect((status as Extract<DetachedStatus, { state: "exited" }>).result.stderr).not.toMatch(/host restarted/);
    } finally {
      spy.mockRestore();
    }
  });

  it("runs in the workspace, outlives the call, and reports exit code and output once ended, the same on every look", async () => {
    const { id } = await sandbox.startDetached("sh", ["-c", "sleep 2; echo made > made.txt; echo out; echo err >&2; exit 3"]);
    expect(await sandbox.detachedStatus(id)).toEqual({ state: "running" });
    const first = await ended(id);
    expect(first.result).toMatchObject({ exitCode: 3, stdout: "out\n", stderr: "err\n", timedOut: false, truncated: false });
    expect(await sandbox.detachedStatus(id)).toEqual(first);
    // After a restart, the run's sandbox is attached again from disk and finds the same command and result.
    const reattached = await LocalSandbox.create({ runId, repoPath: repo, ref: "main", branch: "work", reuse: true });
    expect(await reattached.detachedStatus(id)).toEqual(first);
    // One the sandbox has no trace of (recreated meanwhile) ended without an exit code, saying so.
    expect(await sandbox.detachedStatus(crypto.randomUUID())).toMatchObject({
      state: "exited",
      result: { exitCode: null, stderr: expect.stringMatching(/sandbox was recreated/) },
    });
    expect(fs.readFileSync(`${sandbox.workspacePath}/made.txt`, "utf8")).toBe("made\n");
    // Its output files are the sandbox's, not the worktree's: nothing of them can be committed.
    expect(git(sandbox.workspacePath, "status", "--porcelain", "--untracked-files=all")).toBe("?? made.txt");
  });

  it("past its timeout it is killed and reported timed out; killDetached and destroy kill a running one", async () => {
    const slow = await sandbox.startDetached("sleep", ["30"], { timeoutMs: 300 });
    const timedOut = await ended(slow.id);
    expect(timedOut.result).toMatchObject({ exitCode: null, timedOut: true });
    expect(await gone(pidOf(slow.id))).toBe(true);

    const killed = await sandbox.startDetached("sleep", ["31"]);
    await sandbox.killDetached(killed.id);
    expect((await ended(killed.id)).result.exitCode).toBeNull();
    expect(await gone(pidOf(killed.id))).toBe(true);

    const left = await sandbox.startDetached("sleep", ["32"]);
    const pid = pidOf(left.id);
    expect(alive(pid)).toBe(true);
    await sandbox.destroy();
    expect(await gone(pid)).toBe(true);
  });
});

describe("hardening #29.1: detached commands get the per-command limits", () => {
  // Small limits, so the probes stay small: 32 processes, 96 MiB, files of 1 MiB, 64 open files.
  const LIMITS = { GATEHOUSE_SANDBOX_PIDS: "32", GATEHOUSE_SANDBOX_MEMORY_MB: "96", GATEHOUSE_SANDBOX_FILE_MB: "1", GATEHOUSE_SANDBOX_OPEN_FILES: "64" };
  beforeAll(() => {
    Object.assign(process.env, LIMITS);
    resetEnvCache();
  });
  afterAll(() => {
    for (const name of Object.keys(LIMITS)) delete process.env[name];
    resetEnvCache();
  });

  /*
   * One command probing every limit, run inline (exec) and detached (an acceptance check past the step budget, a long
   * run_command): a process that forks sleeping children until fork fails and says how many it started; two children
   * holding 64 MiB each at once (each under the per-process data limit, together past the 96 MiB cap); a 2 MB file; the
   * open-file limit.
   */
  const PROBE = [
    `perl -e '$n = 0; for (1..80) { $p = fork; last unless defined $p; if (!$p) { sleep 30; exit 0 } push @k, $p; $n++ } print "started=$n\\n"; kill 9, @k; waitpid($_, 0) for @k'`,
    `for i in 1 2; do ({ head -c 67108864 /dev/zero; sleep 3; } | tail > /dev/null; echo "child$i=$?") & done; wait`,
    "head -c 2000000 /dev/zero > big.bin; echo size=$(wc -c < big.bin); rm -f big.bin",
    'echo "nofile=$(ulimit -n)"',
  ].join("\n");

  const runs = {
    inline: (s: LocalSandbox) => s.exec("sh", ["-c", PROBE]),
    detached: async (s: LocalSandbox) => {
      const { id } = await s.startDetached("sh", ["-c", PROBE]);
      for (let i = 0; i < 600; i++) {
        const status = await s.detachedStatus(id);
        if (status.state === "exited") return status.result;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error("the detached probe never ended");
    },
  };

  for (const isolation of ["auto", "none"] as const) {
    for (const how of ["inline", "detached"] as const) {
      it(`${how}, isolation ${isolation}: processes, memory, file size and open files are capped, and the output says which limit was hit`, async () => {
        const s = isolation === "auto" ? sandbox : await LocalSandbox.create({ runId: `${runId}_none`, repoPath: repo, ref: "main", branch: "work-none", isolation });
        try {
          expect(s.isolated).toBe(isolation === "auto");
          const result = await runs[how](s);
          // The per-process rlimits, in both isolations.
          expect(result.stdout).toContain("size=1048576\n");
          expect(result.stdout).toContain("nofile=64\n");
          if (cgroupSupport().version === null) {
            // Without a cgroup this process may create, the app says processes and memory are not capped per command.
            expect(sandboxCapabilities().weaknesses.join(" ")).toMatch(/no per-command cgroup/);
            return;
          }
          // The cgroup: fork failed before 32 processes (the probe really forked); the two children together were
          // killed (SIGKILL, 137: the cgroup's OOM kill, where the per-process data limit alone would have let each
          // one through, or failed it with exit 1); and the output names both limits, as an inline command's does.
          const started = Number(/started=(\d+)/.exec(result.stdout)?.[1]);
          expect(started).toBeGreaterThan(10);
          expect(started).toBeLessThan(32);
          expect(result.stdout).toMatch(/child[12]=137\n/);
          expect(result.stderr).toContain("the command reached the sandbox's limit of 32 processes (GATEHOUSE_SANDBOX_PIDS)");
          expect(result.stderr).toContain("the command reached the sandbox's memory limit of 96 MiB (GATEHOUSE_SANDBOX_MEMORY_MB)");
          expect(result.exitCode).toBe(0);
        } finally {
          if (s !== sandbox) await s.destroy();
        }
      });
    }
  }

  it("a detached command's cgroup goes once its end has been looked at, with what it left running outside its process group", async () => {
    const s = await LocalSandbox.create({ runId: `${runId}_left`, repoPath: repo, ref: "main", branch: "work-left", isolation: "none" });
    try {
      // Unisolated, so the pid is the host's; setsid takes the sleep out of the command's process group.
      const { id } = await s.startDetached("sh", ["-c", "setsid sleep 41 > /dev/null 2>&1 & echo $!"]);
      const status = await (async () => {
        for (let i = 0; i < 300; i++) {
          const look = await s.detachedStatus(id);
          if (look.state === "exited") return look;
          await new Promise((r) => setTimeout(r, 50));
        }
        throw new Error("never ended");
      })();
      const left = Number(status.result.stdout.trim());
      expect(left).toBeGreaterThan(0);
      expect(await gone(left)).toBe(cgroupSupport().version !== null);
      // The same end on a later look, the cgroup already gone.
      expect(await s.detachedStatus(id)).toEqual(status);
      if (!alive(left)) return;
      process.kill(left, "SIGKILL");
    } finally {
      await s.destroy();
    }
  });

  it("a cgroup named in a detached command's record is used only when it is one of the sandbox's own", () => {
    const support = cgroupSupport();
    if (support.version === null) {
      expect(reopenCommandCgroup({ version: 2, dirs: [{ controller: "all", dir: "/sys/fs/cgroup/cg_0123abcd-4567" }], limits: { pids: 1, memoryBytes: 1 } })).toBeNull();
      return;
    }
    const base = support.version === 2 ? support.base : support.bases.pids!;
    const controller = support.version === 2 ? ("all" as const) : ("pids" as const);
    const memory = support.version === 2 ? [] : [{ controller: "memory" as const, dir: `${support.bases.memory}/cg_0123abcd-4567` }];
    const limits = { pids: 1, memoryBytes: 1 };
    const record = (dir: string) => ({ version: support.version, dirs: [{ controller, dir }, ...memory], limits });
    expect(reopenCommandCgroup(record(`${base}/cg_0123abcd-4567`))?.procsFiles[0]).toBe(`${base}/cg_0123abcd-4567/cgroup.procs`);
    // Not one of ours: the base itself, a parent, a path climbing out, another name.
    for (const dir of [base, `${base}/..`, `${base}/cg_0123abcd-4567/../..`, "/sys/fs/cgroup/cg_0123abcd-4567", `${base}/other`]) {
      expect(reopenCommandCgroup(record(dir))).toBeNull();
    }
  });
});

describe("the implementer with a step budget", () => {
  const plan = planOf({ tasks: [{ id: "T1", files: ["out.txt"] }] });

  it("a command past the step's end is left running; collectCommand puts its result where the inline result would be", async () => {
    const seen: LanguageModelV3CallOptions[] = [];
    const turns: ScriptedReply[] = [
      { toolCalls: [{ toolName: "run_command", input: { command: "sh", args: ["-c", "sleep 1; echo done"] } }] },
      { text: "Finished." },
    ];
    const model = createScriptedModel({ respond: (o) => (seen.push(o), turns[Math.min(seen.length - 1, 1)]!) });
    const state = startImplementer({ plan, request: "Build it" });
    const context = { stepKey: `impl-${crypto.randomUUID()}` };

    const first = await implementerTurn({ state, sandbox, modelId: "demo:scripted", model, context, stepEndsAt: Date.now() + 300 });
    expect(first.kind).toBe("command_running");
    const pending = first.state.pendingCommand!;
    expect(first).toMatchObject({ toolCallId: pending.toolCallId });
    // The call is in the conversation; its result is not yet (no placeholder either).
    const text = JSON.stringify(first.state.messages);
    expect(text).toContain(pending.toolCallId);
    expect(text).not.toContain("__gatehouse_command_pending__");
    expect(first.state.messages.some((m) => m.role === "tool")).toBe(false);

    // While it runs, a turn makes no model call.
    const again = await implementerTurn({ state: first.state, sandbox, modelId: "demo:scripted", model, context });
    expect(again.kind).toBe("command_running");
    expect(seen).toHaveLength(1);

    const done = await ended(pending.id);
    const collected = await collectCommand({ state: first.state, sandbox, result: done.result });
    // A poll step re-run after a crash starts from the same memoized state: the same result, appended once.
    expect(await collectCommand({ state: first.state, sandbox, result: (await sandbox.detachedStatus(pending.id) as typeof done).result })).toEqual(collected);
    expect(collected.hold).toBeNull();
    expect(collected.state.pendingCommand).toBeNull();
    expect(collected.state.messages.at(-1)).toEqual({
      role: "tool",
      content: [
        {
          type: "tool-result",
          toolCallId: pending.toolCallId,
          toolName: "run_command",
          output: { type: "json", value: { exitCode: 0, timedOut: false, stdout: "done\n", stderr: "" } },
        },
      ],
    });

    // The same command run inline (no budget) gives the model exactly that result.
    const inlineModel = createScriptedModel({ respond: () => turns[0]! });
    const inline = await implementerTurn({ state, sandbox, modelId: "demo:scripted", model: inlineModel, context });
    const inlineResult = inline.state.messages.find((m) => m.role === "tool") as { content: Array<{ output: unknown }> };
    expect(inlineResult.content[0]!.output).toEqual((collected.state.messages.at(-1) as { content: Array<{ output: unknown }> }).content[0]!.output);

    // The next turn goes on with the result in its prompt.
    const next = await implementerTurn({ state: collected.state, sandbox, modelId: "demo:scripted", model, context });
    expect(seen).toHaveLength(2);
    expect(JSON.stringify(seen[1]!.prompt)).toContain("done\\n");
    expect(next.state.pendingCommand ?? null).toBeNull();
  });

  it("a model call still unanswered at the step's end is aborted with StepBudgetExceededError (not a model failure)", async () => {
    const model = createScriptedModel({
      respond: (o) =>
        new Promise<ScriptedReply>((_, reject) => {
          o.abortSignal?.addEventListener("abort", () => reject(o.abortSignal!.reason), { once: true });
        }),
    });
    const state: ImplementerState = startImplementer({ plan, request: "Build it" });
    await expect(
      implementerTurn({ state, sandbox, modelId: "demo:scripted", model, context: { stepKey: `impl-${crypto.randomUUID()}` }, stepEndsAt: Date.now() + 200 }),
    ).rejects.toBeInstanceOf(StepBudgetExceededError);
  });
});
