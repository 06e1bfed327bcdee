import { AppError } from "@/lib/errors";
import type { RunConfig } from "./config";

/**
 * What the project owner set in the project's default config is a floor that a run's own config (from whoever starts
 * it, an approver or the owner) can tighten but never loosen (issue #29, finding 6):
 * - `policy.protectedPaths`, `policy.commands.deny`: the run's entries are added to the owner's, never replace them;
 * - `policy.commands.allow`: when the owner's list is not empty, a run may narrow it (every entry of the run's list must
 *   start, word by word, with one of the owner's); an entry outside it is refused (403, naming the key). An empty list
 *   in a run's config narrows nothing, so the owner's list stays;
 * - `policy.maxFilesPerTask`, `policy.maxFilesPerRun` and every `budgets.<stage>` value: the smaller of the two;
 * - `sandbox`: the owner's alone, refused in a run's config (lib/runs/service.ts).
 * Everything else in a run's config (trust modes, models, timeouts, git, limits, deadlines …) overrides the defaults as
 * before. `config` is the merged, validated config; `owner` the project's default config as stored.
 */
export function applyOwnerFloor({ config, owner, input }: { config: RunConfig; owner: unknown; input: unknown }): RunConfig {
  const floor = asObject(owner);
  const ownerPolicy = asObject(floor.policy);
  const ownerCommands = asObject(ownerPolicy.commands);
  const runCommands = asObject(asObject(asObject(input).policy).commands);
  const policy = { ...config.policy, commands: { ...config.policy.commands } };

  const protectedPaths = strings(ownerPolicy.protectedPaths);
  if (protectedPaths) policy.protectedPaths = union(protectedPaths, policy.protectedPaths);
  const deny = strings(ownerCommands.deny);
  if (deny) policy.commands.deny = union(deny, policy.commands.deny);

  const allowed = strings(ownerCommands.allow) ?? [];
  if (allowed.length) {
    const asked = strings(runCommands.allow) ?? [];
    const outside = asked.filter((entry) => !allowed.some((own) => startsWithWords(entry, own)));
    if (outside.length) {
      throw new AppError(
        "forbidden:config",
        `config.policy.commands.allow: ${outside.map((e) => JSON.stringify(e)).join(", ")} is not allowed by the project owner's list (${allowed.map((e) => JSON.stringify(e)).join(", ")}). A run's config may only narrow the owner's policy; the owner changes the project's default config.`,
      );
    }
    policy.commands.allow = asked.length ? asked : allowed;
  }
  for (const key of ["maxFilesPerTask", "maxFilesPerRun"] as const) {
    const own = ownerPolicy[key];
    if (typeof own === "number") policy[key] = Math.min(own, policy[key]);
  }
  // MCP tools: for each tool the owner named, the stricter of the owner's verdict and the run's (allow < ask < deny).
  const rank = { allow: 0, ask: 1, deny: 2 } as const;
  const ownerMcp = asObject(ownerPolicy.mcp);
  const mcp = { ...(policy.mcp ?? {}) };
  for (const [key, own] of Object.entries(ownerMcp)) {
    if (own !== "allow" && own !== "ask" && own !== "deny") continue;
    // A wildcard of the owner's ("<server>.*") also floors the run's entries for that server's single tools.
    const keys = [key, ...(key.endsWith(".*") ? Object.keys(mcp).filter((k) => k.startsWith(key.slice(0, -1))) : [])];
    for (const k of keys) {
      const asked = mcp[k];
      mcp[k] = asked && rank[asked] > rank[own] ? asked : own;
    }
  }
  policy.mcp = mcp;

  const ownerBudgets = asObject(floor.budgets);
  let budgets = config.budgets;
  for (const stage of ["planning", "implementation", "validation"] as const) {
    const own = asObject(ownerBudgets[stage]);
    for (const key of ["tokens", "costUsd", "minutes"] as const) {
      const cap = own[key];
      if (typeof cap !== "number") continue;
      const current = budgets?.[stage]?.[key];
      budgets = { ...budgets, [stage]: { ...budgets?.[stage], [key]: current === undefined ? cap : Math.min(cap, current) } };
    }
  }
  return { ...config, policy, ...(budgets ? { budgets } : {}) };
}

function asObject(v: unknown): Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

function strings(v: unknown): string[] | null {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string").map((x) => x.trim()) : null;
}

function union(first: string[], second: string[]): string[] {
  return [...new Set([...first, ...second])];
}

/** Whether command line `entry` starts with `prefix`, word by word (`npm test` starts with `npm`, `npmx` does not). */
function startsWithWords(entry: string, prefix: string): boolean {
  const a = entry.trim().split(/\s+/);
  const b = prefix.trim().split(/\s+/);
  return b.length <= a.length && b.every((word, i) => a[i] === word);
}
