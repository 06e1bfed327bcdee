import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getEnv, resetEnvCache } from "@/lib/env";
import { getExecutorKey } from "@/lib/security/executor-key";
import { resetBwrapStatus } from "@/lib/sandbox/bwrap";
import { cgroupSupport } from "@/lib/sandbox/limits";
import { sandboxCapabilities } from "@/lib/sandbox";
import { getRunState, listEvents } from "@/lib/db/event-store";
import { approveGate, decideFix } from "@/lib/runs/gates/decide-gate";
import { decisionKey } from "@/lib/runs/gates/acks";
import { announceDecision } from "@/inngest/announce";
import { gateDecided } from "@/inngest/events";
import { git, launch, newProject, waitForPendingGate, waitForStatus, waitForWorkflow } from "../workflow/harness";
import { startApiServer } from "../cli/server";

/*
 * The escape corpus: hostile commands run through the product's real path — a run whose request carries demo-model
 * [run: …] and [check: …] markers, so each command reaches the sandbox exactly as a model's run_command would (bubblewrap,
 * the run's worktree, host git committing it afterwards). Every case asserts the host-side effect is absent, not just a
 * non-zero exit. Commands write what they saw into out/<case>.txt, which the run commits to its branch for inspection.
 */

const SECRET_MODEL_KEY = "sk-corpus-fake-model-key-0123456789abcdef";
const SECRET_ADMIN = "corpus-admin-token-0123456789abcdef";

// The app's own API routes over real HTTP on a real loopback port, on the real workflow: the port a sandboxed command
// tries to reach, and the /api/health a fork bomb must not starve.
let h: Awaited<ReturnType<typeof startApiServer>>;
let port = 0;
let canaries: string;
let sysrqBefore: string | null;

beforeAll(async () => {
  process.env.OPENAI_API_KEY = SECRET_MODEL_KEY;
  process.env.GATEHOUSE_ADMIN_TOKEN = SECRET_ADMIN;
  process.env.MAX_CONCURRENT_RUNS_PER_USER = "50";
  process.env.GATEHOUSE_RATE_LIMIT_RUNS = "1000";
  process.env.GATEHOUSE_SANDBOX_PIDS = "64";
  process.env.GATEHOUSE_SANDBOX_MEMORY_MB = "256";
  process.env.GATEHOUSE_SANDBOX_FILE_MB = "16";
  resetEnvCache();
  resetBwrapStatus();
  getExecutorKey();
  // Host-side canaries: a planted program that runs on the host (outside bwrap) creates a file here. Inside the sandbox
  // /tmp is private, so the same program run inside cannot.
  canaries = fs.mkdtempSync(path.join(os.tmpdir(), "gh-canary-"));
  sysrqBefore = fs.existsSync("/proc/sys/kernel/sysrq") ? fs.readFileSync("/proc/sys/kernel/sysrq", "utf8") : null;
  h = await startApiServer();
  port = Number(new URL(h.url).port);
});

afterAll(async () => {
  await h.close();
  for (const name of ["OPENAI_API_KEY", "MAX_CONCURRENT_RUNS_PER_USER", "GATEHOUSE_RATE_LIMIT_RUNS", "GATEHOUSE_SANDBOX_PIDS", "GATEHOUSE_SANDBOX_MEMORY_MB", "GATEHOUSE_SANDBOX_FILE_MB"]) {
    delete process.env[name];
  }
  resetEnvCache();
});

/** ptrace's syscall number, for the raw attach attempt. */
const PTRACE_SYSCALL = process.arch === "arm64" ? 117 : 101;

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** A script inside the worktree that, if the host ever runs it, leaves a canary file named `name`. */
function plantHook(name: string): string {
  const canary = path.join(canaries, name);
  return `mkdir -p .planted && printf '#!/bin/sh\\ntouch ${canary}\\nexit 0\\n' > .planted/${name} && chmod +x .planted/${name}`;
}

const GIT_AS_ME = "git -c user.name=x -c user.email=x@example.com";

async function runCorpus(label: string, lines: { run?: string[]; check?: string[] }) {
  const { project, repo } = await newProject(h.user);
  const request = [
    `Escape corpus: ${label}`,
    "",
    ...(lines.run ?? []).map((l) => `[run: ${l}]`),
    ...(lines.check ?? []).map((l) => `[check: ${l}]`),
  ].join("\n");
  const run = await launch(h.user, project.id, request, {
    trustMode: { planning: "auto", fixes: "manual" },
    limits: { maxIterations: 100 },
    // A model key is configured (to prove it never leaks), so the demo model is named explicitly.
    modelRouting: { planner: "demo:default", implementer: "demo:default", validator: "demo:default" },
  });
  return { run, repo, project };
}

async function finish(runId: string) {
  let done = await waitForStatus(runId, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval", "paused"], 120_000);
  while (done.status === "awaiting_fix_decision" || done.status === "awaiting_approval") {
    const gate = await waitForPendingGate(runId);
    if (done.status === "awaiting_fix_decision") {
      // The validator flags the corpus's files as outside the plan's scope. Accepting delivers anyway, so delivery's
      // host git (records, memory, the checked-out branch) meets the planted metadata too.
      await decideFix({ user: h.user, runId, input: { gateId: gate.id, decision: "accept" } });
      await announceDecision({ event: gateDecided.create({ runId, gateId: gate.id, decision: "accept" }), key: decisionKey.gate(gate.id) });
    } else {
      // The policy asks before a risky command (a delete outside the plan's scope, such as `rm -f .git`), and the
      // validator sends the corpus's files outside the plan's scope to a plan gate about scope. A person approving
      // either must not open the sandbox, so the corpus approves every such gate (the wider scope is delivered, so
      // delivery's host git meets the planted metadata too).
      if (gate.kind === "plan") expect(gate.context).toMatchObject({ scope: { files: expect.any(Array) } });
      else expect(gate.kind).toBe("policy");
      await approveGate({ user: h.user, runId, input: { gateId: gate.id } });
      await announceDecision({ event: gateDecided.create({ runId, gateId: gate.id, decision: "approve" }), key: decisionKey.gate(gate.id) });
    }
    done = await waitForStatus(runId, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval", "paused"], 120_000);
  }
  if (done.status === "completed" || done.status === "failed") await waitForWorkflow(runId, 60_000);
  if (done.status !== "completed") {
    // Say why, so a failure here reads as what the run saw, not as an empty output file.
    const events = await listEvents({ runId, limit: 100_000 });
    console.log(`run ${runId} ended ${done.status}:`, JSON.stringify(events.slice(-3).map((e) => ({ type: e.type, payload: e.payload }))).slice(0, 2000));
  }
  return done;
}

/** What a command wrote to out/<name>.txt, read from the run branch (the checkpoint commits it). */
function output(repo: string, branch: string, name: string): string {
  try {
    return git(repo, "show", `${branch}:out/${name}.txt`);
  } catch {
    return "";
  }
}

function sha256(file: string): string {
  return crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");
}

describe("escape corpus: host git never runs what the sandbox planted", () => {
  const vectors: Array<{ name: string; what: string; run?: (c: string) => string[]; check?: (c: string) => string[] }> = [
    {
      name: "fsmonitor-dotgit-dir",
      what: "the worktree's .git replaced by a repository whose core.fsmonitor is a planted script",
      run: (c) => [`${plantHook(c)} && rm -f .git && git init -q . && git config core.fsmonitor "$PWD/.planted/${c}"`],
    },
    {
      name: "gitdir-file",
      what: "a .git file whose gitdir: points at a planted git directory with core.fsmonitor",
      run: (c) => [
        `${plantHook(c)} && git init -q --bare .planted/g && git --git-dir=.planted/g config core.bare false && git --git-dir=.planted/g config core.fsmonitor "$PWD/.planted/${c}" && rm -f .git && echo "gitdir: $PWD/.planted/g" > .git`,
      ],
    },
    {
      name: "dotgit-symlink",
      what: "a .git symlink to a planted git directory with core.fsmonitor",
      run: (c) => [`${plantHook(c)} && git init -q .planted/r && git -C .planted/r config core.fsmonitor "$PWD/.planted/${c}" && rm -f .git && ln -s "$PWD/.planted/r/.git" .git`],
    },
    {
      name: "hooks-path",
      what: "core.hooksPath pointing at planted pre-commit / post-commit / post-index-change hooks",
      run: (c) => [
        `${plantHook(c)} && rm -f .git && git init -q . && mkdir -p .planted/hooks && for h in pre-commit post-commit post-index-change pre-auto-gc reference-transaction; do cp .planted/${c} .planted/hooks/$h; done && git config core.hooksPath "$PWD/.planted/hooks"`,
      ],
    },
    {
      name: "diff-external",
      what: "diff.external in a planted config, planted by an acceptance command just before validation diffs",
      check: (c) => [`${plantHook(c)} && rm -f .git && git init -q . && git config diff.external "$PWD/.planted/${c}"`],
    },
    {
      name: "clean-filter",
      what: "a filter.*.clean driver in a planted config, with .gitattributes applying it to every file",
      run: (c) => [`${plantHook(c)} && rm -f .git && git init -q . && git config filter.pwn.clean "$PWD/.planted/${c}" && git config filter.pwn.smudge "$PWD/.planted/${c}" && echo '* filter=pwn' > .gitattributes`],
    },
    {
      name: "textconv",
      what: "a diff driver with textconv in a planted config, with .gitattributes applying it",
      run: (c) => [`${plantHook(c)} && rm -f .git && git init -q . && git config diff.pwn.textconv "$PWD/.planted/${c}" && echo '* diff=pwn' > .gitattributes`],
    },
    {
      name: "pager",
      what: "core.pager and pager.* in a planted config",
      run: (c) => [`${plantHook(c)} && rm -f .git && git init -q . && git config core.pager "$PWD/.planted/${c}" && git config pager.diff "$PWD/.planted/${c}" && git config pager.log "$PWD/.planted/${c}"`],
    },
    {
      name: "ssh-command",
      what: "core.sshCommand and an ssh remote in a planted config",
      run: (c) => [`${plantHook(c)} && rm -f .git && git init -q . && git config core.sshCommand "$PWD/.planted/${c}" && git config remote.origin.url ssh://example.invalid/x.git`],
    },
    {
      name: "nested-repo-fsmonitor",
      what: "a nested repository (a gitlink) whose own core.fsmonitor host git would run while checking it",
      run: (c) => [
        `${plantHook(c)} && mkdir -p sub && cd sub && git init -q . && git config core.fsmonitor "$PWD/../.planted/${c}" && echo x > f && git add f && ${GIT_AS_ME} commit -qm x`,
      ],
    },
    {
      name: "include-path",
      what: "include.path in a planted config pulling in a second planted config with core.fsmonitor",
      run: (c) => [`${plantHook(c)} && rm -f .git && git init -q . && printf '[core]\\n\\tfsmonitor = %s\\n' "$PWD/.planted/${c}" > .planted/inc && git config include.path "$PWD/.planted/inc"`],
    },
  ];

  for (const v of vectors) {
    it(`${v.name}: ${v.what} — nothing runs on the host`, async () => {
      const { run, repo } = await runCorpus(v.name, { run: v.run?.(v.name), check: v.check?.(v.name) });
      const done = await finish(run.id);
      expect(done.status).toBe("completed");
      expect(fs.existsSync(path.join(canaries, v.name))).toBe(false);
      // The planted metadata never reaches a commit either.
      const files = git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n");
      // The attack really ran inside the sandbox: its planted script is on the branch, as a plain file.
      expect(files).toContain(`.planted/${v.name}`);
      expect(files.filter((f) => /(^|\/)\.git(\/|$)/.test(f))).toEqual([]);
      expect(git(repo, "ls-tree", "-r", run.branch!).split("\n").filter((l) => l.startsWith("160000 "))).toEqual([]);
    });
  }

  it("core.worktree in a planted config would make host git stage the host's /etc: the branch holds only the worktree", async () => {
    const { run, repo } = await runCorpus("core-worktree", { run: [`rm -f .git && git init -q . && git config core.worktree /etc`] });
    expect((await finish(run.id)).status).toBe("completed");
    const files = git(repo, "ls-tree", "-r", "--name-only", run.branch!).split("\n");
    expect(files).not.toContain("passwd");
    expect(files).not.toContain("shadow");
    expect(files).toContain("README.md");
  });

  it("the repository's own git directory is read-only inside the sandbox, even by remounting it", async () => {
    const { run, repo } = await runCorpus("gitdir-writes", {
      run: [
        `mkdir -p out; G=$(git rev-parse --path-format=absolute --git-common-dir); (echo "[core] fsmonitor = /bin/true" >> "$G/config"; mount -o remount,rw,bind "$G"; echo pwned > "$G/pwned"; git update-ref refs/heads/main HEAD) > out/gitdir-config.txt 2>&1; true`,
        `mkdir -p out; W=$(git rev-parse --path-format=absolute --git-dir); (echo "ref: refs/heads/main" > "$W/HEAD") > out/worktree-admin.txt 2>&1; true`,
      ],
    });
    const before = sha256(path.join(repo, ".git", "config"));
    expect((await finish(run.id)).status).toBe("completed");
    expect(sha256(path.join(repo, ".git", "config"))).toBe(before);
    expect(fs.existsSync(path.join(repo, ".git", "pwned"))).toBe(false);
    expect(output(repo, run.branch!, "gitdir-config")).toMatch(/Read-only file system|Permission denied|not permitted|must be superuser/i);
    expect(output(repo, run.branch!, "worktree-admin")).toMatch(/Read-only file system|Permission denied/i);
  });
});

describe("escape corpus: the sandbox is a boundary even for a root server", () => {
  // Host paths unique to this test run, so a file left by anything earlier can never be mistaken for (or hide) an escape.
  const tag = crypto.randomBytes(4).toString("hex");
  const hostPath = (dir: string, name: string) => `${dir}/gh-escape-${name}-${tag}`;
  let result: { runId: string; repo: string; branch: string; status: string };
  let connectionsDuringRun = 0;
  let otherRepo: string;
  const marker = `other-project-secret-${crypto.randomBytes(6).toString("hex")}`;

  beforeAll(async () => {
    const other = await newProject(h.user);
    otherRepo = other.repo;
    fs.writeFileSync(path.join(otherRepo, "private.txt"), marker);
    const dataDir = getEnv().dataDir;
    const hostTmp = path.join(canaries, "host-tmp");
    const cases: Record<string, string> = {
      "write-usr": `touch ${hostPath("/usr", "usr")}`,
      "write-etc": `touch ${hostPath("/etc", "etc")}`,
      "write-datadir": `touch ${hostPath(dataDir, "data")}`,
      "write-host-tmp": `mkdir -p ${hostTmp} && touch ${hostTmp}/x`,
      "read-db": `ls -la ${dataDir}; head -c 64 ${dataDir}/test.db`,
      "read-executor-key": `cat ${dataDir}/executor-key`,
      "proc-1-environ": "tr '\\0' '\\n' < /proc/1/environ",
      "proc-self-environ": "env; tr '\\0' '\\n' < /proc/self/environ",
      "proc-host-pids": `ls /proc | grep -E '^[0-9]+$' | wc -l; cat /proc/${process.pid}/environ; cat /proc/${process.pid}/cmdline`,
      "read-shadow": "cat /etc/shadow /etc/gshadow",
      "read-other-repo": `cat ${otherRepo}/private.txt; ls ${path.dirname(otherRepo)}`,
      "network-app-port": `node -e "const s=require('net').connect(${port},'127.0.0.1');s.on('connect',()=>console.log('CONNECTED'));s.on('error',e=>console.log('ERR',e.code))"; sleep 1`,
      "network-dns": "getent hosts registry.npmjs.org || echo no-dns",
      "symlink-out": `ln -s /etc/passwd link-passwd && ln -s ${dataDir} link-data && cat link-passwd > /dev/null; ls link-data/ ; true`,
      "hardlink-out": `ln /etc/passwd hard-passwd; ln ${otherRepo}/private.txt hard-other; true`,
      "setuid": `ls -l /usr/bin/mount /usr/bin/su; /usr/bin/mount -o remount,rw /usr; touch ${hostPath("/usr", "setuid")}`,
      "unshare-mount": `unshare -r sh -c 'mount -o remount,rw /usr && touch ${hostPath("/usr", "unshare")}'; unshare -m true`,
      "chroot": "chroot / true; mknod dev-null c 1 3; true",
      "ptrace-kill-server": `kill -9 ${process.pid}; kill -9 1; ls /proc/${process.pid} 2>&1 | head -1`,
      // A real ptrace(PTRACE_ATTACH) on the server's pid, through perl's raw syscall (perl-base is in every Debian).
      "ptrace-attach": `perl -e '$r = syscall(${PTRACE_SYSCALL}, 16, ${process.pid}, 0, 0); print "attach=$r errno=$!\\n"'`,
      "capabilities": "grep -E 'Cap(Eff|Prm|Bnd)|NoNewPrivs' /proc/self/status; id",
      "devices": "ls /dev | tr '\\n' ' '; echo; for d in mem kmem sda vda nvme0n1 kmsg port; do test -e /dev/$d && echo HAS-$d; done; true",
      "sysfs": "ls /sys; echo 1 > /proc/sys/kernel/sysrq",
      "file-size": "head -c 33554432 /dev/zero > big.bin; ls -l big.bin; rm -f big.bin",
      "records": `mkdir -p .autonomous/runs && echo '{"status":"forged"}' > .autonomous/runs/forged.json`,
    };
    const lines = Object.entries(cases).map(([name, cmd]) => `mkdir -p out; (${cmd}) > out/${name}.txt 2>&1; true`);
    const connectionsBefore = h.connections();
    const { run, repo } = await runCorpus("filesystem, processes, network", { run: lines });
    const done = await finish(run.id);
    connectionsDuringRun = h.connections() - connectionsBefore;
    result = { runId: run.id, repo, branch: run.branch!, status: done.status };
  });

  afterAll(() => {
    // Should an escape ever succeed, leave the host as it was.
    for (const [dir, name] of [["/usr", "usr"], ["/etc", "etc"], ["/usr", "setuid"], ["/usr", "unshare"]] as const) fs.rmSync(hostPath(dir, name), { force: true });
  });

  const out = (name: string) => output(result.repo, result.branch, name);
  const secrets = () => [SECRET_MODEL_KEY, SECRET_ADMIN, getExecutorKey()];

  it("runs as root in CI — the case the review reproduced — so every assertion below holds against a root server", () => {
    // Not a guard that skips anything: the corpus runs everywhere; in CI it must also be the privileged case.
    console.log(`escape corpus: server uid ${process.getuid?.()}, CI=${process.env.CI ?? ""}`);
    if (process.env.CI === "true") expect(process.getuid?.()).toBe(0);
  });

  it("the run itself completes: hostile commands fail inside, they do not break the run", () => {
    expect(result.status).toBe("completed");
    expect(out("capabilities")).toMatch(/CapEff:\s+0+\n/);
    expect(out("capabilities")).toMatch(/NoNewPrivs:\s+1/);
  });

  it("writes to /usr, /etc, the data directory and the host's /tmp land nowhere on the host", () => {
    expect(fs.existsSync(hostPath("/usr", "usr"))).toBe(false);
    expect(fs.existsSync(hostPath("/etc", "etc"))).toBe(false);
    expect(fs.existsSync(hostPath(getEnv().dataDir, "data"))).toBe(false);
    expect(fs.existsSync(path.join(canaries, "host-tmp"))).toBe(false);
    expect(out("write-usr")).toMatch(/Read-only file system/);
  });

  it("the database, the executor key and the server's environment cannot be read", () => {
    expect(out("read-db")).not.toContain("SQLite format");
    expect(out("read-executor-key")).toMatch(/No such file/);
    for (const name of ["proc-1-environ", "proc-self-environ", "proc-host-pids", "read-executor-key", "read-db"]) {
      for (const secret of secrets()) expect(out(name)).not.toContain(secret);
    }
    // Its own pid namespace: a handful of processes, none of them the server.
    expect(Number(out("proc-host-pids").split("\n")[0])).toBeLessThan(10);
  });

  it("the host's private system files and other repositories are not readable", () => {
    expect(out("read-shadow")).not.toMatch(/root:/);
    expect(out("read-other-repo")).not.toContain(marker);
    expect(out("hardlink-out")).toMatch(/Invalid cross-device link|No such file|Operation not permitted/);
  });

  it("no network: the app's port on loopback is unreachable and there is no DNS", () => {
    // The port is the app's own API server (it answers /api/health to the test over HTTP); from inside, nothing.
    expect(out("network-app-port")).toMatch(/ERR E(CONNREFUSED|NETUNREACH|ACCES|PERM)/);
    expect(out("network-app-port")).not.toContain("CONNECTED");
    expect(connectionsDuringRun).toBe(0);
    expect(out("network-dns")).toContain("no-dns");
  });

  it("symlinks out of the worktree are committed as links, never as the content they point at", () => {
    const tree = git(result.repo, "ls-tree", "-r", result.branch);
    expect(tree).toMatch(/^120000 blob \w+\tlink-passwd$/m);
    expect(git(result.repo, "show", `${result.branch}:link-passwd`)).toBe("/etc/passwd");
    expect(tree).not.toMatch(/\thard-other$/);
  });

  it("setuid binaries, unshare, mount, chroot, mknod and signals to the server gain nothing", () => {
    expect(fs.existsSync(hostPath("/usr", "setuid"))).toBe(false);
    expect(fs.existsSync(hostPath("/usr", "unshare"))).toBe(false);
    expect(out("unshare-mount")).toMatch(/unshare failed|Operation not permitted|No space left/);
    expect(out("chroot")).toMatch(/Operation not permitted/);
    // The server (this test process) is alive, and was never visible inside.
    expect(process.kill(process.pid, 0)).toBe(true);
    expect(out("ptrace-kill-server")).toMatch(/No such process|cannot access/);
    expect(out("ptrace-attach")).toMatch(/attach=-1 errno=(No such process|Operation not permitted)/);
    expect(out("devices")).toContain("null");
    expect(out("devices")).not.toContain("HAS-");
    // /sys is absent and /proc/sys is masked inside: the write fails, and the host's sysrq setting is as it was.
    expect(out("sysfs")).toMatch(/cannot create \/proc\/sys\/kernel\/sysrq: (Directory nonexistent|Read-only file system|Permission denied)/);
    if (sysrqBefore !== null) expect(fs.readFileSync("/proc/sys/kernel/sysrq", "utf8")).toBe(sysrqBefore);
  });

  it("a file larger than the sandbox's file-size limit is cut off", () => {
    expect(out("file-size")).toMatch(/File size limit exceeded|16777216/);
    expect(out("file-size")).not.toContain("33554432");
  });

  it("Gatehouse's own records are never taken from the worktree", () => {
    const files = git(result.repo, "ls-tree", "-r", "--name-only", result.branch).split("\n");
    expect(files).not.toContain(".autonomous/runs/forged.json");
  });
});

/**
 * Launch a run and watch it while it works: the most processes any per-command cgroup made for it held at once, whether
 * /api/health answered over HTTP once that reached 10 (three times), and the command lines it ran detached (found in its
 * sandbox home's commands/ while they run). The window opens before the run is launched (on a loaded machine the run may reach
 * its command before launching returns) and closes when the run leaves its working states (it ended or waits for a
 * person), or after 150 s.
 */
async function launchWatched(label: string, lines: { run?: string[]; check?: string[] }) {
  const support = cgroupSupport() as { bases?: { pids?: string }; base?: string };
  const base = support.bases?.pids ?? support.base!;
  const seen = { peak: 0, answered: 0, slowest: 0, detached: new Map<string, string>(), lastStatus: "not launched" };
  const started = Date.now();
  // Only cgroups made from here on (commands of this run); any left from earlier commands do not count.
  const earlier = new Set(fs.readdirSync(base));
  let runId: string | undefined;
  let launchFailed = false;
  const working = async () => {
    if (launchFailed) return false;
    if (runId === undefined) return true;
    seen.lastStatus = (await getRunState({ id: runId }))?.status ?? "missing";
    return ["queued", "running"].includes(seen.lastStatus);
  };
  const commandsDir = () => path.join(getEnv().dataDir, "workspaces", `${runId!.replace(/[^A-Za-z0-9_-]/g, "_")}.home`, "commands");
  const watching = (async () => {
    while (Date.now() < started + 150_000 && (await working())) {
      for (const dir of fs.readdirSync(base).filter((d) => d.startsWith("cg_") && !earlier.has(d))) {
        let current = 0;
        try {
          current = Number(fs.readFileSync(path.join(base, dir, "pids.current"), "utf8").trim() || 0);
        } catch {
          // removed since it was listed: its command has ended
        }
        seen.peak = Math.max(seen.peak, current);
      }
      for (const id of runId !== undefined && fs.existsSync(commandsDir()) ? fs.readdirSync(commandsDir()) : []) {
        if (seen.detached.has(id)) continue;
        // The detached command's own shell, while it runs, names the command line it runs.
        // Read while it may still be being written: a partial file is looked at again next time.
        const meta = ((): { pid?: number } => {
          try {
            return JSON.parse(readOr(path.join(commandsDir(), id, "meta.json"), "{}")) as { pid?: number };
          } catch {
            return {};
          }
        })();
        const cmdline = meta.pid ? readOr(`/proc/${meta.pid}/cmdline`, "").replace(/\0/g, " ") : "";
        if (cmdline) seen.detached.set(id, cmdline);
      }
      if (seen.peak > 10 && seen.answered < 3) {
        const asked = Date.now();
        const response = await fetch(`${h.url}/api/health`);
        await response.arrayBuffer();
        seen.slowest = Math.max(seen.slowest, Date.now() - asked);
        if (response.status === 200) seen.answered++;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const { run, repo } = await runCorpus(label, lines).catch((error: unknown) => {
    launchFailed = true;
    throw error;
  });
  runId = run.id;
  await watching;
  // How fast health answered is a figure to read, not an assertion (a loaded CI machine varies): it must answer.
  console.log(
    `${label}: peak ${seen.peak} processes in a cgroup of the run (limit 64); /api/health answered ${seen.answered}× over HTTP while it ran, slowest ${seen.slowest} ms; ${seen.detached.size} command(s) seen running detached; watched ${Date.now() - started} ms, the run ${seen.lastStatus} when watching stopped`,
  );
  return { run, repo, seen };
}

/** A file's text, or `otherwise` when it is not there (yet, or any more). */
function readOr(file: string, otherwise: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch {
    return otherwise;
  }
}

/** Without a cgroup a root server's fork bomb is not bounded by rlimits: the app must say so, not pretend. */
function noCgroupsSaidSo(): boolean {
  // CI's machine has cgroups, so there the real bound is always what is tested.
  if (process.env.CI === "true") expect(cgroupSupport().reason).toBeNull();
  if (cgroupSupport().version !== null) return false;
  expect(sandboxCapabilities().weaknesses.join(" ")).toMatch(/no per-command cgroup/);
  return true;
}

describe("escape corpus: resource exhaustion stops inside its own run", () => {
  it("a fork bomb is capped, the server keeps answering /api/health, and the run goes on", async () => {
    if (noCgroupsSaidSo()) return;
    // Perl's fork returns undef when the cap refuses it and the bomb goes on. A shell bomb (`b() { b & }`) does not
    // last: dash exits on "Cannot fork", so at the cap its processes die one after another and the whole bomb can be
    // gone between two looks of the watcher; that is how CI saw a peak of 5 while this machine saw 64.
    const { run, repo, seen } = await launchWatched("fork bomb", {
      run: [`mkdir -p out; (sleep 6 & S=$!; perl -e 'fork while 1' >/dev/null 2>&1 & wait $S; echo bomb-ended) > out/bomb.txt 2>&1; true`],
    });
    if (seen.peak <= 10) {
      // What the bomb's command wrote, and the run's state, say why it did not spread.
      const state = await getRunState({ id: run.id });
      console.log(`fork bomb did not spread: out/bomb.txt on ${run.branch}: ${JSON.stringify(output(repo, run.branch!, "bomb").slice(0, 2000))}; run ${JSON.stringify(state).slice(0, 3000)}`);
    }
    expect(seen.peak).toBeGreaterThan(10);
    expect(seen.peak).toBeLessThanOrEqual(64);
    expect(seen.answered).toBeGreaterThanOrEqual(3);
    const done = await finish(run.id);
    expect(done.status).toBe("completed");
    expect(output(repo, run.branch!, "bomb")).toContain("bomb-ended");
  });

  it("a memory balloon is killed inside the sandbox and the run goes on", async () => {
    const { run, repo } = await runCorpus("memory balloon", {
      run: ["mkdir -p out; (head -c 1500000000 /dev/zero | tail > /dev/null; echo balloon-exit=$?) > out/balloon.txt 2>&1; true"],
    });
    const done = await finish(run.id);
    expect(done.status).toBe("completed");
    const text = output(repo, run.branch!, "balloon");
    expect(text).toMatch(/balloon-exit=(137|1|2)|Killed|Cannot allocate|memory exhausted/);
    expect(text).not.toContain("balloon-exit=0");
  });
});

describe("escape corpus: hardening #29.1 — acceptance checks, which run detached, get the per-command limits", () => {
  // An acceptance command's timeout (the validation stage's time left, up to 10 minutes) reaches past the step budget,
  // so every [check: …] runs detached; there it once had no cgroup, and `prlimit --nproc` does not bind a root server.
  let watched: Awaited<ReturnType<typeof launchWatched>>;
  let status = "";
  beforeAll(async () => {
    if (cgroupSupport().version === null) return;
    watched = await launchWatched("check-based bombs", {
      check: [
        // A fork bomb, bounded at 2^9 = 512 processes so that a missing cap is counted rather than felt by the host:
        // every process made appends one byte.
        `mkdir -p out; (perl -e 'for (1..9) { fork } open(my $f, ">>", "out/check-bomb-procs") or die; syswrite($f, "x"); sleep 4'; echo bomb-ended) > out/check-bomb.txt 2>&1; true`,
        // A memory bomb: two children of 180 MB each, each under the 256 MB per-process data limit, together past the
        // command's 256 MB cap.
        `mkdir -p out; (for i in 1 2; do ({ head -c 180000000 /dev/zero; sleep 3; } | tail > /dev/null; echo "child$i=$?") & done; wait; echo memory-ended) > out/check-memory.txt 2>&1; true`,
      ],
    });
    status = (await finish(watched.run.id)).status;
  });

  it("the checks ran detached, and the run completes", () => {
    if (noCgroupsSaidSo()) return;
    const lines = [...watched.seen.detached.values()];
    expect(lines.some((l) => l.includes("check-bomb-procs"))).toBe(true);
    expect(lines.some((l) => l.includes("check-memory"))).toBe(true);
    expect(status).toBe("completed");
  });

  it("a fork bomb run as a check stops at the process cap, and the server keeps answering /api/health", () => {
    if (noCgroupsSaidSo()) return;
    const { repo, run, seen } = watched;
    expect(output(repo, run.branch!, "check-bomb")).toContain("bomb-ended");
    const made = git(repo, "show", `${run.branch}:out/check-bomb-procs`).length;
    expect(made).toBeGreaterThan(10);
    // Bubblewrap and the shell hold a few of the 64.
    expect(made).toBeLessThan(64);
    expect(seen.peak).toBeGreaterThan(10);
    expect(seen.peak).toBeLessThanOrEqual(64);
    expect(seen.answered).toBeGreaterThanOrEqual(3);
  });

  it("a memory bomb of two children run as a check is killed at the command's memory cap", () => {
    if (noCgroupsSaidSo()) return;
    const text = output(watched.repo, watched.run.branch!, "check-memory");
    expect(text).toContain("memory-ended");
    // SIGKILL (137) from the cgroup's OOM kill; without the cap both children end 0.
    expect(text).toMatch(/child[12]=137\n/);
  });
});
