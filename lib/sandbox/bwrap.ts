import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { baseChildEnv } from "@/lib/env";

/** System directories exposed read-only inside the sandbox. Nothing else of the host is visible. */
const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"];

export type BwrapStatus = {
  available: boolean;
  path: string | null;
  reason: string | null;
  /** A user namespace (sandbox uid 1000, no capabilities in it, no nested namespaces). */
  userNamespace: boolean;
  /** prlimit inside the sandbox, for per-process rlimits. */
  prlimit: string | null;
};

let cached: BwrapStatus | undefined;

function findOnPath(name: string): string | null {
  for (const dir of (baseChildEnv().PATH ?? "").split(":")) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return null;
}

/** Flags that make a user namespace; dropped (and reported) on kernels that refuse unprivileged user namespaces. */
const USERNS_FLAGS = ["--unshare-user", "--disable-userns", "--uid", "1000", "--gid", "1000"];

/**
 * Whether bubblewrap exists *and* can create the namespaces we need (it can be installed but refused by a container's
 * seccomp/userns policy). Probed once per process: first with a user namespace, then without one.
 */
export function bwrapStatus(): BwrapStatus {
  if (cached) return cached;
  const bin = findOnPath("bwrap");
  const prlimit = findOnPath("prlimit");
  if (!bin) {
    cached = { available: false, path: null, reason: "bubblewrap (bwrap) is not installed", userNamespace: false, prlimit };
    return cached;
  }
  const attempt = (userns: boolean) =>
    execFileSync(bin, [...systemBinds(), ...namespaceFlags(userns), "--", "true"], {
      env: baseChildEnv() as NodeJS.ProcessEnv,
      stdio: "pipe",
      timeout: 10_000,
    });
  try {
    attempt(true);
    cached = { available: true, path: bin, reason: null, userNamespace: true, prlimit };
  } catch {
    try {
      attempt(false);
      cached = { available: true, path: bin, reason: null, userNamespace: false, prlimit };
    } catch (error) {
      const stderr = String((error as { stderr?: Buffer }).stderr ?? "").trim();
      cached = {
        available: false,
        path: bin,
        reason: `bwrap is installed but cannot create namespaces: ${stderr || String(error)}`,
        userNamespace: false,
        prlimit,
      };
    }
  }
  return cached;
}

/** For tests: probe again (e.g. after changing PATH). */
export function resetBwrapStatus() {
  cached = undefined;
  masks = undefined;
}

function namespaceFlags(userns: boolean, network = false): string[] {
  return [
    ...(userns ? USERNS_FLAGS : []),
    // The host's network only when the project's .autonomous/config.json sets sandbox.allowInternet.
    ...(network ? [] : ["--unshare-net"]),
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    // No capability survives into the sandbox, even when the server runs as root: read-only mounts stay read-only.
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
  ];
}

let masks: string[] | undefined;

/**
 * The sandbox runs as the server's own user outside (uid 0 when the server is root), so file permissions alone would
 * let it read that user's private files in the system directories it sees. Everything under /etc that is not
 * world-readable (shadow, private keys, database credentials …) is hidden: files behind /dev/null, directories behind
 * an empty read-only tmpfs.
 */
function privateSystemFiles(): string[] {
  if (masks) return masks;
  const out: string[] = [];
  const walk = (dir: string, depth: number) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const abs = path.join(dir, entry.name);
      let stat: fs.Stats;
      try {
        stat = fs.lstatSync(abs);
      } catch {
        continue;
      }
      if (stat.isSymbolicLink()) continue;
      const worldReadable = (stat.mode & 0o004) !== 0 && (!stat.isDirectory() || (stat.mode & 0o001) !== 0);
      if (!worldReadable) {
        if (stat.isDirectory()) out.push("--tmpfs", abs, "--remount-ro", abs);
        else if (stat.isFile()) out.push("--ro-bind", "/dev/null", abs);
        continue;
      }
      if (stat.isDirectory() && depth < 6) walk(abs, depth + 1);
    }
  };
  walk("/etc", 0);
  masks = out;
  return out;
}

function systemBinds(): string[] {
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(dir);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) args.push("--symlink", fs.readlinkSync(dir), dir);
    else args.push("--ro-bind", dir, dir);
  }
  return args;
}

/**
 * The Node.js that runs Gatehouse, read-only, where it lives outside the system directories (nvm, or the `node`
 * package in the app's node_modules; /usr/local is covered by /usr). Bound after the private /tmp, so an app installed
 * under /tmp (a CI clone) still finds its Node inside the sandbox instead of an empty tmpfs.
 */
function nodeBinds(): string[] {
  const nodePrefix = path.dirname(path.dirname(process.execPath));
  const covered = SYSTEM_DIRS.some((d) => nodePrefix === d || nodePrefix.startsWith(d + "/"));
  return covered || nodePrefix === "/" ? [] : ["--ro-bind", nodePrefix, nodePrefix];
}

/**
 * The bwrap argument list for one command: read-only system (its private files hidden), a private /tmp, a /proc of its
 * own pid namespace, a minimal /dev, no network, own pid/ipc/uts/cgroup (and, where the kernel allows, user)
 * namespaces, no capabilities, a new session (no terminal injection), killed with its parent; only `writable` is
 * writable. `readOnly` extra paths (the repository's git directory, so read-only git commands work) are bound
 * read-only. `prefix` runs before the command inside the sandbox (prlimit).
 */
export function bwrapArgs({
  writable,
  readOnly = [],
  cwd,
  command,
  args,
  prefix = [],
  network = false,
}: {
  writable: string;
  readOnly?: string[];
  cwd: string;
  command: string;
  args: string[];
  prefix?: string[];
  /** Share the host's network (default: none). */
  network?: boolean;
}): string[] {
  const status = bwrapStatus();
  return [
    ...systemBinds(),
    ...privateSystemFiles(),
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    ...nodeBinds(),
    ...readOnly.flatMap((p) => ["--ro-bind", p, p]),
    "--bind",
    writable,
    writable,
    ...namespaceFlags(status.userNamespace, network),
    "--setenv",
    "HOME",
    "/tmp",
    "--chdir",
    cwd,
    "--",
    ...prefix,
    command,
    ...args,
  ];
}
