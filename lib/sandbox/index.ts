import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { workspaceTree } from "@/lib/git/checkpoint";
import { bwrapStatus } from "./bwrap";
import { cgroupSupport, sandboxLimits, type SandboxLimits } from "./limits";
import { E2BSandbox, type E2BClient } from "./e2b";
import { LocalSandbox, runWorktreeOnDisk, type Isolation } from "./local";
import type { Sandbox } from "./types";

export * from "./types";
export { LocalSandbox, removeRunWorktree, type Isolation } from "./local";
export { E2BSandbox, shellQuote, type E2BClient, type E2BRemote } from "./e2b";
export { resolveInside } from "./paths";

export type SandboxKind = "local" | "e2b";

/** A sandbox that git can commit from (both implementations keep a local worktree). */
export type RunSandbox = (LocalSandbox | E2BSandbox) & Sandbox;

export type SandboxCapabilities = {
  /** The kind createSandbox() picks with the current settings. */
  kind: SandboxKind;
  /** Whether agent commands are isolated from this machine (bubblewrap or E2B). */
  isolated: boolean;
  bwrap: { available: boolean; reason: string | null; userNamespace: boolean };
  /** Local sandbox limits and how they are enforced. */
  limits: SandboxLimits & { cgroup: "v1" | "v2" | null; rlimits: boolean };
  e2b: { configured: boolean };
  /** Where isolation is weaker than the full local sandbox (each a sentence); empty when it is not. */
  weaknesses: string[];
  /** A sentence for the start-up log, /api/health and the run page when isolation is missing or weaker; else null. */
  warning: string | null;
};

/** What the app shows at start, on /api/health and on the run page: which sandbox runs commands and how isolated. */
export function sandboxCapabilities(): SandboxCapabilities {
  const env = getEnv();
  const kind = pickKind();
  const bwrap = bwrapStatus();
  const isolated = kind === "e2b" || (env.GATEHOUSE_SANDBOX_ISOLATION !== "none" && bwrap.available);
  // Unisolated commands get the per-command cgroup and rlimits too (LocalSandbox.limitedLine).
  const cgroup = kind === "local" ? cgroupSupport() : null;
  const weaknesses: string[] = [];
  if (kind === "local" && isolated) {
    if (!bwrap.userNamespace) weaknesses.push("no user namespace (the kernel refuses one): commands run with the server's uid, without capabilities");
    if (cgroup && cgroup.version === null) weaknesses.push(`no per-command cgroup (${cgroup.reason}): process and memory caps are per-process rlimits only, which do not bind a root server's fork bomb`);
    if (!bwrap.prlimit) weaknesses.push("prlimit (util-linux) is missing: no per-process rlimits");
  }
  if (kind === "e2b") weaknesses.push("E2B: isolation is E2B's microVM; Gatehouse's local limits and masks do not apply there");
  let warning: string | null = null;
  if (!isolated) {
    warning =
      env.GATEHOUSE_SANDBOX_ISOLATION === "none"
        ? "Sandbox isolation is switched off (GATEHOUSE_SANDBOX_ISOLATION=none): agent commands run as plain child processes with this machine's network and files. Runs start only in projects whose config sets sandbox.allowUnisolated."
        : `Agent commands are NOT isolated: ${bwrap.reason}. They would run as plain child processes with this machine's network and files, so runs start only in projects whose config sets sandbox.allowUnisolated. Install bubblewrap (apt-get install bubblewrap) or set E2B_API_KEY.`;
  } else if (kind === "local" && weaknesses.length) {
    warning = `Sandbox isolation is weaker than full: ${weaknesses.join("; ")}.`;
  }
  return {
    kind,
    isolated,
    bwrap: { available: bwrap.available, reason: bwrap.reason, userNamespace: bwrap.userNamespace },
    limits: { ...sandboxLimits(), cgroup: cgroup?.version ? (`v${cgroup.version}` as const) : null, rlimits: !!bwrap.prlimit },
    e2b: { configured: !!env.E2B_API_KEY },
    weaknesses,
    warning,
  };
}

function pickKind(requested?: SandboxKind): SandboxKind {
  const env = getEnv();
  const kind = requested ?? (env.GATEHOUSE_SANDBOX === "auto" ? (env.E2B_API_KEY ? "e2b" : "local") : env.GATEHOUSE_SANDBOX);
  return kind;
}

export type CreateSandboxOptions = {
  runId: string;
  repoPath: string;
  /** Where to start: a branch, tag or sha. */
  ref: string;
  /** The run branch to check out (created at `ref` when missing); commits land there. */
  branch?: string;
  /** What diff() compares against (default: `ref`). Pass the base branch's sha to see the whole run's work. */
  diffBase?: string;
  kind?: SandboxKind;
  isolation?: Isolation;
  excludePaths?: string[];
  /** Local only: reuse the run's live worktree (see attachSandbox). */
  reuse?: boolean;
  /** Local only: a fresh worktree whose `branch` is (re)cut at `ref` by the same git process (see startTaskSandbox). */
  recut?: boolean;
  /** Outbound internet for commands (default off): local bubblewrap shares the host network, E2B allows egress. */
  allowInternet?: boolean;
  /** E2B only: a substitute client (tests). */
  e2bClient?: E2BClient;
  /** E2B only: where the repository is unpacked remotely (default /home/user/repo). */
  remoteRoot?: string;
};

/** Create a run's sandbox: E2B when configured (or asked for), otherwise a local worktree (bubblewrap when available). */
export async function createSandbox(options: CreateSandboxOptions): Promise<RunSandbox> {
  const kind = pickKind(options.kind);
  if (kind === "e2b") {
    if (!getEnv().E2B_API_KEY && !options.e2bClient) throw new AppError("unavailable:sandbox", "E2B was chosen but E2B_API_KEY is not set.");
    return E2BSandbox.create({ ...options, client: options.e2bClient, apiKey: getEnv().E2B_API_KEY ?? "test" });
  }
  return LocalSandbox.create({ ...options, isolation: options.isolation ?? getEnv().GATEHOUSE_SANDBOX_ISOLATION });
}

const attached = new Map<string, RunSandbox>();

type SandboxOptions = CreateSandboxOptions & { branch: string };

/**
 * A run's sandbox named by its id, with the options to make it read only if one must be made: an open sandbox is
 * used as it is (its options were applied when it was made), and reading them (the repository's
 * `.autonomous/config.json`) is a git process. `diffBase` is what attachSandbox matches an open sandbox by.
 */
export type SandboxRequest = { runId: string; diffBase?: string; read: () => Promise<SandboxOptions> };

const optionsOf = (options: SandboxOptions | SandboxRequest): Promise<SandboxOptions> | SandboxOptions =>
  "read" in options ? options.read() : options;

/** What a process restart does to open sandboxes (tests): they are forgotten, and the next step reattaches from disk. */
export function forgetAttachedSandboxes() {
  attached.clear();
}

/**
 * The run's sandbox for one durable step: the one this process already has open, else the run's worktree on disk as
 * it is (uncommitted work included — it survives a crash), else a new one on the run branch. E2B sandboxes live only as
 * long as this process; after a restart the run continues from the branch.
 */
export async function attachSandbox(options: SandboxOptions | SandboxRequest): Promise<RunSandbox> {
  const open = attached.get(options.runId);
  // A local sandbox diffs against the commit it was attached at unless told otherwise: the one a step attached without
  // a diff base (e.g. implementation after a gate) must not answer a step that asks for the run's base (validation),
  // or work committed before the attach would drop out of the diff — and out of the scope check. Reattached (the same
  // worktree, reused) with the base asked for.
  if (open && !(options.diffBase && open.kind === "local" && open.baseSha !== options.diffBase)) return open;
  const sandbox = await createSandbox({ ...(await optionsOf(options)), reuse: true });
  attached.set(options.runId, sandbox);
  return sandbox;
}

/** The kind of sandbox createSandbox() makes with the current settings. */
export function sandboxKind(): SandboxKind {
  return pickKind();
}

/**
 * A parallel task's sandbox, made in the step that begins the task: a fresh local worktree on `branch`, the branch
 * (re)cut at `ref` by the same git process that adds the worktree, kept attached for the task's turns. Its `baseSha`
 * is the commit the branch was cut at. Local only (createSandbox's kind): an E2B task's sandbox is made by its turn.
 */
export async function startTaskSandbox(options: CreateSandboxOptions & { branch: string }): Promise<LocalSandbox> {
  const sandbox = await LocalSandbox.create({ ...options, isolation: options.isolation ?? getEnv().GATEHOUSE_SANDBOX_ISOLATION, recut: true, reuse: false });
  attached.set(options.runId, sandbox);
  return sandbox;
}

/**
 * A parallel lane's sandbox handed to its next task (LocalSandbox.repoint): what this process keeps running in it ends
 * (the release hooks, as at a release), then the worktree is checked out on the next task's `to.branch`, cut at
 * `startSha`, and cleaned. `from`: the sandbox as the lane's previous task had it. Null when it cannot be handed on —
 * not a local sandbox, nothing on disk, or the git work failed: the caller releases it and starts the task afresh.
 */
export async function repointSandbox(from: SandboxOptions | SandboxRequest, to: { branch: string; startSha: string }): Promise<LocalSandbox | null> {
  if (pickKind("read" in from ? undefined : from.kind) !== "local") return null;
  const open = attached.get(from.runId) ?? (runWorktreeOnDisk(from.runId) ? await reopen(from) : null);
  if (!(open instanceof LocalSandbox)) return null;
  attached.delete(from.runId);
  for (const hook of releaseHooks) await hook(open).catch(() => null);
  const next = await open.repoint(to).catch(() => null);
  if (next) attached.set(from.runId, next);
  return next;
}

/**
 * Whether the run has a workspace already: a sandbox this process holds, or its worktree on disk. Without one, a sandbox
 * attached now is a fresh checkout of the run branch, so what the branch's tree holds is what it would hold.
 */
export function hasWorkspace(runId: string): boolean {
  return attached.has(runId) || runWorktreeOnDisk(runId);
}

/** The run's worktree on disk, opened as it is (null when that fails). */
async function reopen(options: SandboxOptions | SandboxRequest): Promise<RunSandbox | null> {
  try {
    return await createSandbox({ ...(await optionsOf(options)), reuse: true });
  } catch {
    return null;
  }
}

const releaseHooks = new Set<(sandbox: Sandbox) => Promise<void>>();

/**
 * What this process keeps running in a sandbox beyond one step (the MCP servers of an implementation session) ends
 * with it: the hook runs before every release, with the sandbox about to be destroyed.
 */
export function onSandboxRelease(hook: (sandbox: Sandbox) => Promise<void>): void {
  releaseHooks.add(hook);
}

/** Destroy the run's sandbox (before a pause, at the end, on cancel); the branch and its commits stay. */
export async function releaseSandbox(options: SandboxOptions | SandboxRequest): Promise<void> {
  // Not open here and nothing on disk (a run that never needed one, e.g. triage without checks): nothing to release,
  // rather than a worktree checked out only to be removed.
  const open = attached.get(options.runId) ?? (runWorktreeOnDisk(options.runId) ? await reopen(options) : null);
  attached.delete(options.runId);
  if (open) for (const hook of releaseHooks) await hook(open).catch(() => null);
  await open?.destroy();
}

/**
 * On resume after a pause: a fresh sandbox on the run branch (where the WIP commit was made), checked against the tree
 * hash recorded at the pause. A mismatch destroys the sandbox and throws conflict:sandbox.
 */
export async function restoreSandbox(
  options: Omit<CreateSandboxOptions, "ref"> & { branch: string; expectedTree: string },
): Promise<RunSandbox> {
  const sandbox = await createSandbox({ ...options, ref: options.branch });
  const tree = await workspaceTree(sandbox);
  if (tree !== options.expectedTree) {
    await sandbox.destroy();
    throw new AppError("conflict:sandbox", `Restored workspace does not match the paused one (tree ${tree} ≠ ${options.expectedTree}).`, {
      details: { tree, expectedTree: options.expectedTree },
    });
  }
  return sandbox;
}
