import fs from "node:fs";
import path from "node:path";
import { getEnv } from "@/lib/env";
import { randomUUID } from "node:crypto";
import { log } from "@/lib/log";

/**
 * Resource limits for sandboxed commands, so a fork bomb or a memory balloon stops inside its own run and the server
 * stays responsive:
 * - per process, rlimits set inside the sandbox (`prlimit`): data segment (memory), file size, open files, processes
 *   (RLIMIT_NPROC does not bind uid 0, which is why the cgroup below matters when the server runs as root), no core;
 * - per command, a cgroup (v2, or v1 controllers where that is what the machine has) with a process cap, a memory cap
 *   and a low CPU weight, created for the command and removed after it, when this process may create one.
 */

export type SandboxLimits = { pids: number; memoryBytes: number; fileSizeBytes: number; openFiles: number };

export function sandboxLimits(): SandboxLimits {
  const env = getEnv();
  return {
    pids: env.GATEHOUSE_SANDBOX_PIDS,
    memoryBytes: env.GATEHOUSE_SANDBOX_MEMORY_MB * 1024 * 1024,
    fileSizeBytes: env.GATEHOUSE_SANDBOX_FILE_MB * 1024 * 1024,
    openFiles: env.GATEHOUSE_SANDBOX_OPEN_FILES,
  };
}

/**
 * prlimit's arguments (to put before the command inside the sandbox). `nproc: false` leaves RLIMIT_NPROC out: outside a
 * user namespace it counts every process of the server's user on the machine, not the command's (the per-command cgroup
 * is what caps those).
 */
export function rlimitArgs(limits: SandboxLimits, { nproc = true }: { nproc?: boolean } = {}): string[] {
  return [
    ...(nproc ? [`--nproc=${limits.pids}`] : []),
    `--data=${limits.memoryBytes}`,
    `--fsize=${limits.fileSizeBytes}`,
    `--nofile=${limits.openFiles}`,
    "--core=0",
    "--",
  ];
}

type Controller = "pids" | "memory" | "cpu";

/** Where this process may create per-command cgroups, probed once. */
export type CgroupSupport =
  | { version: 1; bases: Partial<Record<Controller, string>>; reason: null }
  | { version: 2; base: string; reason: null }
  | { version: null; reason: string };

let support: CgroupSupport | undefined;

function ownCgroups(): Map<string, string> {
  // "hierarchy-id:controllers:path" per line; v2 is "0::/path".
  const out = new Map<string, string>();
  for (const line of fs.readFileSync("/proc/self/cgroup", "utf8").split("\n")) {
    const [, controllers, p] = line.split(":");
    if (p === undefined) continue;
    for (const c of controllers === "" ? ["(v2)"] : controllers!.split(",")) out.set(c, p);
  }
  return out;
}

function tryWrite(file: string, value: string): boolean {
  try {
    fs.writeFileSync(file, value);
    return true;
  } catch {
    return false;
  }
}

function probeV2(own: Map<string, string>): CgroupSupport | null {
  const root = "/sys/fs/cgroup";
  if (!fs.existsSync(path.join(root, "cgroup.controllers"))) return null;
  const parent = path.join(root, own.get("(v2)") ?? "/");
  const available = fs.readFileSync(path.join(parent, "cgroup.controllers"), "utf8");
  if (!/\bpids\b/.test(available) || !/\bmemory\b/.test(available)) {
    return { version: null, reason: "cgroup v2 without the pids and memory controllers for this process" };
  }
  const enabled = fs.readFileSync(path.join(parent, "cgroup.subtree_control"), "utf8");
  if (!/\bpids\b/.test(enabled) || !/\bmemory\b/.test(enabled)) {
    // Only possible when this cgroup has no processes of its own (cgroup v2's no-internal-process rule).
    if (!tryWrite(path.join(parent, "cgroup.subtree_control"), "+pids +memory")) {
      return { version: null, reason: `cannot enable the pids and memory controllers below ${parent}` };
    }
  }
  const base = path.join(parent, "gatehouse-sandbox");
  fs.mkdirSync(base, { recursive: true });
  if (!tryWrite(path.join(base, "cgroup.subtree_control"), "+pids +memory")) {
    return { version: null, reason: `cannot enable the pids and memory controllers in ${base}` };
  }
  tryWrite(path.join(base, "cgroup.subtree_control"), "+cpu");
  return { version: 2, base, reason: null };
}

function probeV1(own: Map<string, string>): CgroupSupport {
  const bases: Partial<Record<Controller, string>> = {};
  for (const controller of ["pids", "memory", "cpu"] as const) {
    const mount = path.join("/sys/fs/cgroup", controller);
    const mine = own.get(controller);
    if (mine === undefined || !fs.existsSync(path.join(mount, "cgroup.procs"))) continue;
    const base = path.join(mount, mine, "gatehouse-sandbox");
    try {
      fs.mkdirSync(base, { recursive: true });
      bases[controller] = base;
    } catch {
      // not ours to create
    }
  }
  if (!bases.pids || !bases.memory) {
    return { version: null, reason: "no writable cgroup with the pids and memory controllers (run as root, or delegate a cgroup)" };
  }
  return { version: 1, bases, reason: null };
}

export function cgroupSupport(): CgroupSupport {
  if (support) return support;
  try {
    const own = ownCgroups();
    support = probeV2(own) ?? probeV1(own);
    if (support.version !== null) {
      // Prove it end to end once: create, limit, remove.
      const probe = createCgroupSync(support, "probe", { pids: 8, memoryBytes: 64 * 1024 * 1024, fileSizeBytes: 0, openFiles: 0 });
      probe.removeSync();
    }
  } catch (error) {
    support = { version: null, reason: `cgroups unavailable: ${error instanceof Error ? error.message : String(error)}` };
  }
  return support;
}

/** Where a command's cgroup is, so another process (a later look at a detached command) can find it again. */
export type CgroupRecord = {
  version: 1 | 2;
  dirs: Array<{ controller: Controller | "all"; dir: string }>;
  limits: Pick<SandboxLimits, "pids" | "memoryBytes">;
};

/** A cgroup for one command: join it by writing a pid to every file in `procsFiles`; remove it when done. */
export type CommandCgroup = {
  procsFiles: string[];
  /** What reopenCommandCgroup needs to find this cgroup again (kept with a detached command). */
  record: CgroupRecord;
  /** Whether a limit was hit while the command ran (a note for its output). */
  limitNote(): string | null;
  /** Kill everything still in it and remove it. */
  remove(): Promise<void>;
};

function createCgroupSync(s: Exclude<CgroupSupport, { version: null }>, name: string, limits: SandboxLimits) {
  const dirs: Array<{ controller: Controller | "all"; dir: string }> = [];
  const make = (controller: Controller | "all", base: string) => {
    const dir = path.join(base, name);
    fs.mkdirSync(dir);
    dirs.push({ controller, dir });
    return dir;
  };
  const removeSync = () => {
    for (const { dir } of dirs) {
      try {
        fs.rmdirSync(dir);
      } catch {
        // still busy: remove() retries
      }
    }
  };
  try {
    if (s.version === 2) {
      const dir = make("all", s.base);
      fs.writeFileSync(path.join(dir, "pids.max"), String(limits.pids));
      fs.writeFileSync(path.join(dir, "memory.max"), String(limits.memoryBytes));
      tryWrite(path.join(dir, "memory.swap.max"), "0");
      tryWrite(path.join(dir, "cpu.weight"), "10");
    } else {
      const pids = make("pids", s.bases.pids!);
      fs.writeFileSync(path.join(pids, "pids.max"), String(limits.pids));
      const memory = make("memory", s.bases.memory!);
      fs.writeFileSync(path.join(memory, "memory.limit_in_bytes"), String(limits.memoryBytes));
      tryWrite(path.join(memory, "memory.memsw.limit_in_bytes"), String(limits.memoryBytes));
      if (s.bases.cpu) tryWrite(path.join(make("cpu", s.bases.cpu), "cpu.shares"), "100");
    }
  } catch (error) {
    removeSync();
    throw error;
  }
  return { dirs, removeSync };
}

function readNumber(file: string, pattern: RegExp): number {
  try {
    const match = pattern.exec(fs.readFileSync(file, "utf8"));
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

/** A fresh cgroup for one command, or null when this machine gives us none (rlimits still apply). */
export function createCommandCgroup(limits: SandboxLimits): CommandCgroup | null {
  const s = cgroupSupport();
  if (s.version === null) return null;
  let created: ReturnType<typeof createCgroupSync>;
  try {
    created = createCgroupSync(s, `cg_${randomUUID().slice(0, 13)}`, limits);
  } catch (error) {
    log.warn("sandbox: could not create a cgroup for a command; only rlimits apply", { error: String(error) });
    return null;
  }
  return commandCgroupOf({ version: s.version, dirs: created.dirs, limits: { pids: limits.pids, memoryBytes: limits.memoryBytes } });
}

/**
 * The cgroup a record names (createCommandCgroup's, kept by a detached command), or null when the record does not name
 * one of ours: only a cg_* directory directly below this process's own sandbox cgroups is accepted.
 */
export function reopenCommandCgroup(record: unknown): CommandCgroup | null {
  const s = cgroupSupport();
  if (s.version === null || !record || typeof record !== "object") return null;
  const r = record as Partial<CgroupRecord>;
  if (r.version !== s.version || !Array.isArray(r.dirs) || r.dirs.length === 0) return null;
  const limits = r.limits;
  if (!limits || !Number.isSafeInteger(limits.pids) || !Number.isSafeInteger(limits.memoryBytes)) return null;
  const bases: Partial<Record<Controller | "all", string>> = s.version === 2 ? { all: s.base } : s.bases;
  const ours = r.dirs.every(
    (d) =>
      d &&
      typeof d.dir === "string" &&
      path.normalize(d.dir) === d.dir &&
      bases[d.controller] !== undefined &&
      path.dirname(d.dir) === bases[d.controller] &&
      /^cg_[0-9a-f-]{13}$/.test(path.basename(d.dir)),
  );
  if (!ours || !r.dirs.some((d) => d.controller === "pids" || d.controller === "all") || !r.dirs.some((d) => d.controller === "memory" || d.controller === "all")) {
    return null;
  }
  return commandCgroupOf({ version: s.version, dirs: r.dirs, limits: { pids: limits.pids, memoryBytes: limits.memoryBytes } });
}

function commandCgroupOf(record: CgroupRecord): CommandCgroup {
  const { version, dirs, limits } = record;
  const pidsDir = dirs.find((d) => d.controller === "pids" || d.controller === "all")!.dir;
  const memoryDir = dirs.find((d) => d.controller === "memory" || d.controller === "all")!.dir;
  return {
    procsFiles: dirs.map((d) => path.join(d.dir, "cgroup.procs")),
    record,
    limitNote() {
      const notes: string[] = [];
      if (readNumber(path.join(pidsDir, "pids.events"), /^max (\d+)/m) > 0) {
        notes.push(`the command reached the sandbox's limit of ${limits.pids} processes (GATEHOUSE_SANDBOX_PIDS)`);
      }
      // v1: the OOM kills (memory.oom_control, kernel 4.13+), else the charges refused — of memory or, when the
      // memsw limit is set as well and is what the charge met first, of memory+swap.
      const oom =
        version === 2
          ? readNumber(path.join(memoryDir, "memory.events"), /^oom_kill (\d+)/m)
          : readNumber(path.join(memoryDir, "memory.oom_control"), /^oom_kill (\d+)/m) ||
            readNumber(path.join(memoryDir, "memory.failcnt"), /^(\d+)/) + readNumber(path.join(memoryDir, "memory.memsw.failcnt"), /^(\d+)/);
      if (oom > 0) {
        notes.push(`the command reached the sandbox's memory limit of ${Math.round(limits.memoryBytes / 1048576)} MiB (GATEHOUSE_SANDBOX_MEMORY_MB)`);
      }
      return notes.length ? `[Gatehouse: ${notes.join("; ")}]\n` : null;
    },
    async remove() {
      // A command's last processes leave the cgroup only once they are reaped, a moment after it ends: looked at again
      // soon (1, 2, 4 … ms), then every 20 ms, for about a second in all.
      for (let attempt = 0, waited = 0; waited < 1000; attempt++) {
        let busy = false;
        for (const { dir } of dirs) {
          if (!fs.existsSync(dir)) continue;
          if (version === 2) tryWrite(path.join(dir, "cgroup.kill"), "1");
          const pids = (() => {
            try {
              return fs.readFileSync(path.join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number);
            } catch {
              return [];
            }
          })();
          for (const pid of pids) {
            try {
              process.kill(pid, "SIGKILL");
            } catch {
              // gone
            }
          }
          try {
            fs.rmdirSync(dir);
          } catch {
            busy = true;
          }
        }
        if (!busy) return;
        const pause = Math.min(2 ** attempt, 20);
        waited += pause;
        await new Promise((r) => setTimeout(r, pause));
      }
      log.warn("sandbox: a command's cgroup could not be removed", { dirs: dirs.map((d) => d.dir) });
    },
  };
}

/**
 * argv prefix that joins the cgroup before exec'ing the real program, so not even its first child starts outside it:
 * `sh -c '<join each file>; exec "$@"' sh <files…> -- <program> <args…>`.
 */
export function joinCgroupArgv(procsFiles: string[]): { file: string; args: string[] } {
  const script = 'while [ "$1" != "--" ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"';
  return { file: "/bin/sh", args: ["-c", script, "sh", ...procsFiles, "--"] };
}
