import path from "node:path";
import { DEFAULT_PROTECTED_PATHS } from "@/lib/workflow/config";
import { inScope } from "./paths";

export { DEFAULT_PROTECTED_PATHS };

/**
 * The policy for risky actions of the implementer's tools (run config `policy`, usually set in a project's default
 * config). It applies to whatever model makes the tool call:
 * - a command on the deny list is refused; with an allow list, any command not on it is refused;
 * - a destructive command (force push, history rewrite, hard reset, recursive delete, dropping data) and a write to a
 *   protected path (CI files, lockfiles, migrations by default) wait for a person: the run opens a `policy` gate with the
 *   exact action; approved, the model may repeat exactly that action; refused, it is told so and goes on without it;
 * - a delete (`rm`, `rmdir`, `unlink`, `git rm`, also inside `sh -c`) of anything outside the plan's scope waits for a
 *   person too; inside the scope it runs (without a scope, only recursive deletes wait);
 * - at most `maxFilesPerTask` files changed while one todo is in progress, and `maxFilesPerRun` in all — files a command
 *   creates, changes or deletes count too, and a command that changes a protected path is undone and waits for a person.
 */

export type Policy = {
  protectedPaths: string[];
  commands: { allow: string[]; deny: string[] };
  maxFilesPerTask: number;
  maxFilesPerRun: number;
  /** MCP tools: `<server>.<tool>` or `<server>.*` → allow | ask | deny (lib/agents/mcp/policy.ts). */
  mcp?: Record<string, "allow" | "ask" | "deny">;
};

export const DEFAULT_POLICY: Policy = {
  protectedPaths: DEFAULT_PROTECTED_PATHS,
  commands: { allow: [], deny: [] },
  maxFilesPerTask: 40,
  maxFilesPerRun: 150,
};

/** An action that needs a person's approval before it runs. */
export type PolicyAction = {
  tool: "run_command" | "write_file" | "edit_file" | "mcp";
  /** The exact action, as the person sees it: the command line, or the file path. */
  summary: string;
  reason: string;
  /** Stable identity of the action: an approval covers exactly this, once. */
  fingerprint: string;
  /** The files or folders the action changes, when known: approved, validation counts them as in scope. */
  paths?: string[];
};

/** A path glob → RegExp: `**` any depth, `*` within one segment, `?` one character. */
function globToRegExp(glob: string): RegExp {
  let out = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "*" && glob[i + 1] === "*") {
      // "**/" matches zero or more directories; a trailing "**" anything.
      if (glob[i + 2] === "/") {
        out += "(?:.*/)?";
        i += 2;
      } else {
        out += ".*";
        i += 1;
      }
    } else if (c === "*") out += "[^/]*";
    else if (c === "?") out += "[^/]";
    else out += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${out}$`);
}

export function matchesGlob(file: string, glob: string): boolean {
  return globToRegExp(glob).test(path.posix.normalize(file).replace(/^\.\//, ""));
}

export function protectedPath(file: string, policy: Policy): string | null {
  return policy.protectedPaths.find((g) => matchesGlob(file, g)) ?? null;
}

const commandLine = (command: string, args: string[]) => [command, ...args].join(" ");

/** A list entry matches a command line when the line starts with it, word by word (`git push` matches `git push -f`). */
function listed(line: string, entries: string[]): string | null {
  const words = line.split(/\s+/);
  return (
    entries.find((entry) => {
      const want = entry.trim().split(/\s+/);
      return want.length > 0 && want.every((w, i) => words[i] === w);
    }) ?? null
  );
}

/**
 * What a delete command removes: its operands (relative to `cwd`), or null when the command deletes nothing. Shell
 * quoting is stripped from words taken out of `sh -c`; a glob or a variable stays as written (never "in scope").
 */
export function deleteTargets(command: string, args: string[], cwd = "."): string[] | null {
  const base = path.posix.basename(command);
  let operands: string[];
  if (base === "rm" || base === "rmdir" || base === "unlink") operands = args;
  else if (base === "git" && args.find((a) => !a.startsWith("-")) === "rm") operands = args.slice(args.indexOf("rm") + 1);
  else return null;
  const afterDashes = operands.indexOf("--");
  const files = afterDashes >= 0 ? [...operands.slice(0, afterDashes).filter((a) => !a.startsWith("-")), ...operands.slice(afterDashes + 1)] : operands.filter((a) => !a.startsWith("-"));
  return files.map((f) => {
    const unquoted = f.replace(/^(['"])(.*)\1$/, "$2");
    return unquoted.startsWith("/") || unquoted.startsWith("~") ? unquoted : path.posix.normalize(path.posix.join(cwd, unquoted));
  });
}

/** Every delete target of a command line, also inside `sh -c` (plain relative paths only). */
function allDeleteTargets(command: string, args: string[], cwd = "."): string[] {
  const base = path.posix.basename(command);
  if ((base === "sh" || base === "bash" || base === "zsh") && args[0] === "-c" && typeof args[1] === "string") {
    return args[1].split(/&&|\|\||;|\|/).flatMap((part) => {
      const words = part.trim().split(/\s+/).filter(Boolean);
      return words.length ? allDeleteTargets(words[0]!, words.slice(1), cwd) : [];
    });
  }
  return (deleteTargets(command, args, cwd) ?? []).filter((t) => !/[*?[\]{}$~`]/.test(t) && !t.startsWith("/") && !t.startsWith("..") && t !== ".");
}

/** A target that may be deleted without asking: a plain path (no glob, variable or escape) inside the plan's scope. */
function deletableInScope(target: string, scope: string[]): boolean {
  if (/[*?[\]{}$~`]/.test(target) || target === "." || target === ".." || target.startsWith("../") || target.startsWith("/")) return false;
  return inScope(target, scope);
}

/**
 * Why a command is destructive, or null. Looks through `sh -c "…"` / `bash -c` wrappers. With a scope (the plan's
 * files and folders), a delete is destructive when it reaches outside it and harmless inside it; without one, only a
 * recursive delete is.
 */
export function destructive(command: string, args: string[], options: { scope?: string[]; cwd?: string } = {}): string | null {
  const base = path.posix.basename(command);
  if ((base === "sh" || base === "bash" || base === "zsh") && args[0] === "-c" && typeof args[1] === "string") {
    const inner = args[1];
    for (const part of inner.split(/&&|\|\||;|\|/)) {
      const words = part.trim().split(/\s+/).filter(Boolean);
      if (words.length) {
        const why = destructive(words[0]!, words.slice(1), options);
        if (why) return why;
      }
    }
    if (/\b(drop\s+(table|database|schema)|truncate\s+table)\b/i.test(inner)) return "drops data";
    return null;
  }
  const targets = deleteTargets(command, args, options.cwd);
  if (targets && options.scope?.length) {
    const outside = targets.filter((t) => !deletableInScope(t, options.scope!));
    if (outside.length) return `deletes ${outside.join(", ")}, outside the plan's scope (${options.scope.join(", ")})`;
    return null;
  }
  if (base === "git") {
    const sub = args.find((a) => !a.startsWith("-"));
    if (sub === "push" && args.some((a) => a === "--force" || a === "-f" || a.startsWith("--force-with-lease") || /^\+/.test(a))) return "force-pushes";
    if (sub === "push" && args.includes("--delete")) return "deletes a remote branch";
    if (sub === "reset" && args.includes("--hard")) return "discards work (git reset --hard)";
    if (sub === "rebase" || sub === "filter-branch" || sub === "filter-repo") return "rewrites history";
    if (sub === "clean" && args.some((a) => /^-[a-z]*f/.test(a))) return "deletes untracked files (git clean -f)";
    if (sub === "branch" && args.some((a) => a === "-D")) return "force-deletes a branch";
    return null;
  }
  if (base === "rm" && args.some((a) => /^-[a-zA-Z]*[rR]/.test(a) || a === "--recursive")) return "deletes recursively";
  if ((base === "psql" || base === "mysql" || base === "sqlite3") && args.some((a) => /\b(drop\s+(table|database|schema)|truncate\s+table)\b/i.test(a))) {
    return "drops data";
  }
  return null;
}

export type CommandVerdict = { verdict: "allow" } | { verdict: "deny"; reason: string } | { verdict: "ask"; action: PolicyAction };

export function checkCommand(command: string, args: string[], policy: Policy, options: { scope?: string[]; cwd?: string } = {}): CommandVerdict {
  const line = commandLine(command, args);
  const denied = listed(line, policy.commands.deny);
  if (denied) return { verdict: "deny", reason: `\`${denied}\` is on this project's deny list (policy.commands.deny).` };
  if (policy.commands.allow.length > 0 && !listed(line, policy.commands.allow)) {
    return { verdict: "deny", reason: `Only these commands are allowed in this project (policy.commands.allow): ${policy.commands.allow.join(", ")}.` };
  }
  const why = destructive(command, args, options);
  if (why) {
    const paths = allDeleteTargets(command, args, options.cwd);
    return {
      verdict: "ask",
      action: { tool: "run_command", summary: line, reason: `The command ${why}.`, fingerprint: commandFingerprint(command, args), ...(paths.length ? { paths } : {}) },
    };
  }
  return { verdict: "allow" };
}

export function checkWrite(tool: "write_file" | "edit_file", file: string, policy: Policy): PolicyAction | null {
  const glob = protectedPath(file, policy);
  if (!glob) return null;
  return { tool, summary: file, reason: `${file} is a protected path (${glob}).`, fingerprint: `write:${file}`, paths: [file] };
}

/** The fingerprint of a command line: what its approval covers (before it runs, and for what it changes). */
export const commandFingerprint = (command: string, args: string[]) => `run_command:${commandLine(command, args)}`;

/** A refusal under the policy (deny/allow list, file cap), recorded as a POLICY_REFUSED run event. */
export type PolicyRefusal = { tool: PolicyAction["tool"]; summary: string; reason: string };
