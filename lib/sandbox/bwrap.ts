import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { baseChildEnv } from "@/lib/env";

/** System directories exposed read-only inside the sandbox. Nothing else of the host is visible. */
const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"];

export type BwrapStatus = { available: boolean; path: string | null; reason: string | null };

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

/**
 * Whether bubblewrap exists *and* can create the namespaces we need (it can be installed but refused by a container's
 * seccomp/userns policy). Probed once per process.
 */
export function bwrapStatus(): BwrapStatus {
  if (cached) return cached;
  const bin = findOnPath("bwrap");
  if (!bin) {
    cached = { available: false, path: null, reason: "bubblewrap (bwrap) is not installed" };
    return cached;
  }
  try {
    execFileSync(bin, [...systemBinds(), "--unshare-net", "--unshare-pid", "--die-with-parent", "--", "true"], {
      env: baseChildEnv() as NodeJS.ProcessEnv,
      stdio: "pipe",
      timeout: 10_000,
    });
    cached = { available: true, path: bin, reason: null };
  } catch (error) {
    const stderr = String((error as { stderr?: Buffer }).stderr ?? "").trim();
    cached = { available: false, path: bin, reason: `bwrap is installed but cannot create namespaces: ${stderr || String(error)}` };
  }
  return cached;
}

function systemBinds(): string[] {
  const args: string[] = [];
  const seen = new Set<string>();
  for (const dir of SYSTEM_DIRS) {
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(dir);
    } catch {
      continue;
    }
    seen.add(dir);
    if (stat.isSymbolicLink()) args.push("--symlink", fs.readlinkSync(dir), dir);
    else args.push("--ro-bind", dir, dir);
  }
  // The Node.js that runs Gatehouse may live outside the system directories (nvm, /usr/local is covered by /usr).
  const nodePrefix = path.dirname(path.dirname(process.execPath));
  if (![...seen].some((d) => nodePrefix === d || nodePrefix.startsWith(d + "/")) && nodePrefix !== "/") {
    args.push("--ro-bind", nodePrefix, nodePrefix);
  }
  return args;
}

/**
 * The bwrap argument list for one command: read-only system, a private /tmp, no network, own pid/ipc/uts namespaces,
 * a new session (no terminal injection), killed with its parent; only `writable` is writable. `readOnly` extra paths
 * (the repository's git directory, so read-only git commands work) are bound read-only.
 */
export function bwrapArgs({
  writable,
  readOnly = [],
  cwd,
  command,
  args,
}: {
  writable: string;
  readOnly?: string[];
  cwd: string;
  command: string;
  args: string[];
}): string[] {
  return [
    ...systemBinds(),
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    ...readOnly.flatMap((p) => ["--ro-bind", p, p]),
    "--bind",
    writable,
    writable,
    "--unshare-net",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--die-with-parent",
    "--new-session",
    "--setenv",
    "HOME",
    "/tmp",
    "--chdir",
    cwd,
    "--",
    command,
    ...args,
  ];
}
