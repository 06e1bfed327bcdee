import { createHash } from "node:crypto";
import { tool } from "ai";
import { z } from "zod";
import type { ExecResult, Sandbox } from "@/lib/sandbox/types";
import { holdsSecret, redact } from "@/lib/redact";

/**
 * Content that would be committed (a file) or run (a command line) must not hold a secret. The model gets a clear tool
 * error and can write the file without it (e.g. read the value from an environment variable); nothing is written.
 */
function refuseSecrets(what: string, ...texts: string[]) {
  if (texts.some((t) => holdsSecret(t))) {
    throw new Error(
      `Secret detected: ${what} contains what looks like a credential (an API key, token, private key or a configured secret). ` +
        "Nothing was done. Never put secrets into files or commands; reference an environment variable instead.",
    );
  }
}
import type { PendingMcpCall } from "./mcp/config";
import { workspacePath } from "./paths";
import { execWithinStep } from "./step-budget";
import { checkCommand, checkWrite, commandFingerprint, protectedPath, type Policy, type PolicyAction, type PolicyRefusal } from "./policy";

/**
 * The implementer's tools. Every one goes through the Sandbox interface, and every path through workspacePath(); an
 * error thrown here reaches the model as the tool's (error) result, so it can correct itself.
 */

export type Todo = { id: string; title: string; status: "pending" | "in_progress" | "done" };

/** The mutable part of a turn that tools update; copied back into the implementer state after the turn. */
export type ToolContext = {
  sandbox: Sandbox;
  todos: Todo[];
  filesChanged: string[];
  /** Set when a tool changed something (file content or a todo's status): resets loop detection. */
  progress: boolean;
  /** The run's policy for risky actions (absent: no policy checks, e.g. in unit tests of the tools). */
  policy?: Policy;
  /** Fingerprints of actions a person approved; each approval is used up by the action it covers. */
  approved?: string[];
  /** The first risky action of this turn that needs a person: the turn ends and the workflow opens a policy gate. */
  hold?: PolicyAction | null;
  /** Files changed per todo (the one in progress when they changed), for policy.maxFilesPerTask. */
  taskFiles?: Record<string, string[]>;
  /** The plan's files and folders: a delete outside them waits for a person. */
  scope?: string[];
  /** Refusals under the policy during this turn (the workflow records each as a POLICY_REFUSED event). */
  refusals?: PolicyRefusal[];
  /**
   * Put files back as they were at the last checkpoint (deleting those it did not have): how a command's changes that
   * the policy does not allow are undone. Absent: such changes are reported but stay.
   */
  restore?: (paths: string[]) => Promise<void>;
  /** PAOR reflections recorded this turn (record_progress): the workflow records each as a TASK_PROGRESS event. */
  reflections?: Reflection[];
  /**
   * The end of the durable step this turn runs in (epoch ms on `now`): a command that could outlive it is started
   * detached (Sandbox.startDetached) and, if still running at the end, left running as `pendingCommand`. Absent, or a
   * sandbox without detached commands: commands run inline, as before.
   */
  stepEndsAt?: number;
  now?: () => number;
  /** A command of this turn still running detached when its step ended: its result comes in a later step. */
  pendingCommand?: PendingCommand | null;
  /** An MCP tool call of this turn: it runs in a step of its own after the turn (lib/runs/steps/mcp.ts). */
  pendingMcp?: PendingMcpCall | null;
  /** Set when any tool starts: from then on the step budget no longer aborts the model call (its answer is in). */
  toolsStarted?: boolean;
  /**
   * The whole conversation as stored (lib/runs/conversation.ts), for recall_output: a summarised prompt refers to
   * earlier tool outputs by message number (lib/agents/context.ts).
   */
  conversation?: ReadonlyArray<{ role: string; content: unknown }>;
};

/** The most of one recalled output sent back (a read_file's own cap is in the same range). */
const MAX_RECALL_CHARS = 20_000;

/** A run_command left running detached: what is needed to finish it later exactly as an inline run would have. */
export type PendingCommand = {
  toolCallId: string;
  /** Sandbox.startDetached's id. */
  id: string;
  line: string;
  fingerprint: string;
  approved: boolean;
  /** The workspace's change snapshot before the command (file → hash of its change), for the policy's check after. */
  before: Record<string, string> | null;
};

/** What the tool returns in place of a result when its command is left running: replaced by the real result later. */
export const COMMAND_PENDING = "__gatehouse_command_pending__";

/** After a task: how far it got (0–1) and what changed (record_progress). */
export type Reflection = { taskId: string; progress: number; changed: string };

/** An approved action runs once: its approval is taken. */
export function takeApproval(ctx: ToolContext, action: PolicyAction): boolean {
  const i = ctx.approved?.indexOf(action.fingerprint) ?? -1;
  if (i < 0) return false;
  ctx.approved!.splice(i, 1);
  return true;
}

export function holdFor(ctx: ToolContext, action: PolicyAction): string {
  ctx.hold ??= action;
  return (
    `Needs a person's approval first: ${action.reason} Nothing was done. The run now asks a person; you will be told ` +
    "whether it was approved. Do not repeat the call before that."
  );
}

/** A refusal is told to the model (as the tool's error) and recorded for the run's events. */
export function refuse(ctx: ToolContext, refusal: PolicyRefusal): Error {
  (ctx.refusals ??= []).push(refusal);
  return new Error(refusal.reason);
}

/**
 * policy.maxFilesPerTask / maxFilesPerRun: the reason changing `targets` (all together) would break a cap, or null.
 * Files already changed in the run (or the task) do not count again.
 */
function fileLimitBreach(ctx: ToolContext, targets: string[]): string | null {
  if (!ctx.policy) return null;
  const { maxFilesPerRun, maxFilesPerTask } = ctx.policy;
  const newInRun = targets.filter((t) => !ctx.filesChanged.includes(t));
  if (newInRun.length && ctx.filesChanged.length + newInRun.length > maxFilesPerRun) {
    return `This run may change at most ${maxFilesPerRun} files (policy.maxFilesPerRun); ${newInRun.join(", ")} would make ${ctx.filesChanged.length + newInRun.length}.`;
  }
  const task = ctx.todos.find((t) => t.status === "in_progress")?.id ?? "(no task)";
  const mine = ctx.taskFiles?.[task] ?? [];
  const newInTask = targets.filter((t) => !mine.includes(t));
  if (newInTask.length && mine.length + newInTask.length > maxFilesPerTask) {
    return `A task may change at most ${maxFilesPerTask} files (policy.maxFilesPerTask); ${task} has changed ${mine.length} and ${newInTask.join(", ")} would make ${mine.length + newInTask.length}.`;
  }
  return null;
}

function countTaskFiles(ctx: ToolContext, targets: string[]) {
  if (!ctx.policy) return;
  const task = ctx.todos.find((t) => t.status === "in_progress")?.id ?? "(no task)";
  const mine = (ctx.taskFiles ??= {})[task] ?? [];
  ctx.taskFiles![task] = [...mine, ...targets.filter((t) => !mine.includes(t))];
}

function enforceFileLimits(ctx: ToolContext, tool: "write_file" | "edit_file", target: string) {
  const breach = fileLimitBreach(ctx, [target]);
  if (breach) throw refuse(ctx, { tool, summary: target, reason: `${breach} Nothing was written.` });
  countTaskFiles(ctx, [target]);
}

/**
 * The workspace's changed files with a fingerprint of each one's change, from the sandbox's diff (it works the same in
 * every sandbox). Comparing two snapshots tells which files a command created, changed or deleted.
 */
async function changeSnapshot(sandbox: Sandbox): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let file: string | null = null;
  // A hash, not the change itself: a snapshot may be kept in the implementer's state while a command runs detached.
  let body = createHash("sha256");
  const flush = () => {
    if (file !== null) out.set(file, body.digest("hex"));
  };
  const onLine = (line: string, continued = false) => {
    // A piece of a long line is content, even when it happens to read like a header.
    const header = continued ? null : /^diff --git a\/(.+?) b\/(.+)$/.exec(line);
    if (header) {
      flush();
      file = header[2]!;
      body = createHash("sha256");
    } else body.update(`${line}\n`);
  };
  // Streamed, never held whole: a command may have written hundreds of megabytes (a file over the diff's size limit
  // still shows its content hash on its `index` line, so its changes are seen).
  const whole = await sandbox.diff({ onLine });
  for (const line of whole ? whole.split("\n") : []) onLine(line);
  flush();
  return out;
}

function changedBetween(before: Map<string, string>, after: Map<string, string>): string[] {
  const files = new Set<string>();
  for (const [f, change] of after) if (before.get(f) !== change) files.add(f);
  for (const f of before.keys()) if (!after.has(f)) files.add(f);
  return [...files].sort();
}

const MAX_READ_CHARS = 100_000;
const MAX_OUTPUT_CHARS = 12_000;
const MAX_LIST_ENTRIES = 500;

function tail(text: string, max: number): string {
  return text.length <= max ? text : `[… ${text.length - max} characters cut …]\n${text.slice(-max)}`;
}

async function readOrNull(sandbox: Sandbox, path: string): Promise<string | null> {
  try {
    return await sandbox.readFile(path);
  } catch (error) {
    if ((error as Error)?.name === "PathEscapeError") throw error;
    return null;
  }
}

function noteChange(ctx: ToolContext, path: string) {
  ctx.progress = true;
  if (!ctx.filesChanged.includes(path)) ctx.filesChanged.push(path);
}

export const REQUEST_CLARIFICATION = "request_clarification";
export const PROPOSE_REPLAN = "propose_replan";

/** How a person answers a clarification; the run page has a form for each. */
export const CLARIFICATION_RESPONSE_TYPES = ["text", "single_choice", "multiple_choice", "file"] as const;
export type ClarificationResponseType = (typeof CLARIFICATION_RESPONSE_TYPES)[number];

/**
 * The response type a question is asked with: the one requested, by default single choice with options and free text
 * without. A choice needs options (without any it becomes free text); free text and files take no options.
 */
export function clarificationResponseType(requested: ClarificationResponseType | undefined, options: string[]): ClarificationResponseType {
  const type = requested ?? (options.length ? "single_choice" : "text");
  if ((type === "single_choice" || type === "multiple_choice") && !options.length) return "text";
  return type;
}


/**
 * A command's result as the model sees it, and what the policy does after it (protected paths changed → a person
 * decides; file caps → refused and undone): the same for a command run inline and one collected after it ran detached.
 */
export async function finishCommand({ ctx, pending, result }: { ctx: ToolContext; pending: PendingCommand; result: ExecResult }) {
  const { line, fingerprint, approved } = pending;
  const before = pending.before ? new Map(Object.entries(pending.before)) : null;
  if (before && ctx.policy) {
    // What the command created, changed or deleted is held to the same policy as the file tools.
    const after = await changeSnapshot(ctx.sandbox).catch(() => null);
    const changed = after ? changedBetween(before, after) : [];
    const guarded = changed.filter((f) => protectedPath(f, ctx.policy!));
    const action: PolicyAction = {
      tool: "run_command",
      summary: line,
      reason: `The command changed protected paths: ${guarded.map((f) => `${f} (${protectedPath(f, ctx.policy!)})`).join(", ")}.`,
      fingerprint,
      paths: changed,
    };
    if (guarded.length && !approved && !takeApproval(ctx, action)) {
      await ctx.restore?.(changed);
      return holdFor(ctx, action).replace("Nothing was done.", ctx.restore ? "Its changes were undone." : "Its changes were NOT undone.");
    }
    const breach = fileLimitBreach(ctx, changed);
    if (breach) {
      await ctx.restore?.(changed.filter((f) => !ctx.filesChanged.includes(f)));
      throw refuse(ctx, {
        tool: "run_command",
        summary: line,
        reason: `${breach} ${ctx.restore ? "The files it added to the count were put back as they were at the last checkpoint." : "Its changes were not undone."}`,
      });
    }
    countTaskFiles(ctx, changed);
    for (const f of changed) noteChange(ctx, f);
  }
  return {
    exitCode: result.exitCode,
    timedOut: result.timedOut,
    stdout: redact(tail(result.stdout, MAX_OUTPUT_CHARS)),
    stderr: redact(tail(result.stderr, MAX_OUTPUT_CHARS)),
  };
}

export function implementerTools(ctx: ToolContext) {
  return {
    list_files: tool({
      description: "List files in the workspace (a folder path relative to the repository root; default the root).",
      inputSchema: z.object({
        path: z.string().optional().describe("Folder relative to the repository root"),
        recursive: z.boolean().optional(),
      }),
      execute: async ({ path, recursive }) => {
        const entries = await ctx.sandbox.listFiles(workspacePath(path ?? "."), { recursive: recursive ?? false });
        const lines = entries.slice(0, MAX_LIST_ENTRIES).map((e) => (e.type === "dir" ? `${e.path}/` : e.path));
        if (entries.length > MAX_LIST_ENTRIES) lines.push(`[… ${entries.length - MAX_LIST_ENTRIES} more]`);
        return lines.join("\n") || "(empty)";
      },
    }),
    read_file: tool({
      description: "Read a text file from the workspace.",
      inputSchema: z.object({ path: z.string().describe("File path relative to the repository root") }),
      execute: async ({ path }) => {
        // A secret already in the repository is not sent to the model (nor stored with the turn).
        const content = redact(await ctx.sandbox.readFile(workspacePath(path)));
        return content.length > MAX_READ_CHARS
          ? `${content.slice(0, MAX_READ_CHARS)}\n[… ${content.length - MAX_READ_CHARS} more characters]`
          : content;
      },
    }),
    write_file: tool({
      description: "Create or overwrite a file in the workspace with the full content given.",
      inputSchema: z.object({ path: z.string(), content: z.string() }),
      execute: async ({ path, content }) => {
        const target = workspacePath(path);
        refuseSecrets(`the content for ${target}`, content);
        const before = await readOrNull(ctx.sandbox, target);
        if (before === content) return `${target} already has this content; nothing changed.`;
        const risky = ctx.policy ? checkWrite("write_file", target, ctx.policy) : null;
        if (risky && !takeApproval(ctx, risky)) return holdFor(ctx, risky);
        enforceFileLimits(ctx, "write_file", target);
        await ctx.sandbox.writeFile(target, content);
        noteChange(ctx, target);
        return `Wrote ${target} (${content.length} characters).`;
      },
    }),
    edit_file: tool({
      description:
        "Replace an exact piece of text in a file. `search` must match exactly once unless replaceAll is true; include enough surrounding lines to make it unique.",
      inputSchema: z.object({
        path: z.string(),
        search: z.string().min(1),
        replace: z.string(),
        replaceAll: z.boolean().optional(),
      }),
      execute: async ({ path, search, replace, replaceAll }) => {
        const target = workspacePath(path);
        refuseSecrets(`the replacement for ${target}`, replace);
        const before = await ctx.sandbox.readFile(target);
        const count = before.split(search).length - 1;
        if (count === 0) throw new Error(`The search text was not found in ${target}. Read the file and copy the text exactly.`);
        if (count > 1 && !replaceAll) {
          throw new Error(`The search text occurs ${count} times in ${target}; add surrounding lines to make it unique, or set replaceAll.`);
        }
        const after = replaceAll ? before.split(search).join(replace) : before.replace(search, () => replace);
        if (after === before) return `${target} unchanged (replacement equals the original).`;
        const risky = ctx.policy ? checkWrite("edit_file", target, ctx.policy) : null;
        if (risky && !takeApproval(ctx, risky)) return holdFor(ctx, risky);
        enforceFileLimits(ctx, "edit_file", target);
        await ctx.sandbox.writeFile(target, after);
        noteChange(ctx, target);
        return `Edited ${target} (${count} replacement${count === 1 ? "" : "s"}).`;
      },
    }),
    run_command: tool({
      description:
        "Run a program in the workspace with an argument array (no shell), e.g. {command: \"npm\", args: [\"test\"]}. Returns exit code and output.",
      inputSchema: z.object({
        command: z.string().min(1),
        args: z.array(z.string()).default([]),
        cwd: z.string().optional().describe("Working directory relative to the repository root"),
        timeoutSeconds: z.number().int().min(1).max(1800).optional(),
      }),
      execute: async ({ command, args, cwd, timeoutSeconds }, { abortSignal, toolCallId }) => {
        refuseSecrets("the command line", command, ...(args ?? []));
        const fingerprint = commandFingerprint(command, args ?? []);
        const line = fingerprint.slice("run_command:".length);
        let approved = false;
        if (ctx.policy) {
          const verdict = checkCommand(command, args ?? [], ctx.policy, { scope: ctx.scope, cwd: cwd ? workspacePath(cwd) : "." });
          if (verdict.verdict === "deny") {
            throw refuse(ctx, { tool: "run_command", summary: line, reason: `Refused by the project's policy: ${verdict.reason} Nothing was run.` });
          }
          if (verdict.verdict === "ask") {
            if (!takeApproval(ctx, verdict.action)) return holdFor(ctx, verdict.action);
            approved = true;
          }
        }
        // A diff that cannot be taken (a sandbox error) leaves the command unchecked rather than unrun.
        const before = ctx.policy ? await changeSnapshot(ctx.sandbox).catch(() => null) : null;
        const pending = { line, fingerprint, approved, before: before ? Object.fromEntries(before) : null };
        const execOptions = { cwd: cwd ? workspacePath(cwd) : undefined, timeoutMs: timeoutSeconds ? timeoutSeconds * 1000 : undefined };
        // Could outlive the step (its timeout reaches past the step's end): started detached, waited for while the step
        // lasts, and otherwise left running for the workflow to collect in later steps.
        const ran = await execWithinStep({
          sandbox: ctx.sandbox,
          command,
          args: args ?? [],
          options: execOptions,
          stepEndsAt: ctx.stepEndsAt,
          now: ctx.now,
          signal: abortSignal,
          beforeDetach: () => {
            if (ctx.pendingCommand) {
              throw new Error("Another command is still running in the background; run this one again after its result has come.");
            }
          },
        });
        if (ran.state === "running") {
          ctx.pendingCommand = { ...pending, toolCallId, id: ran.id };
          return COMMAND_PENDING;
        }
        const result = ran.result;
        return finishCommand({ ctx, pending: { ...pending, toolCallId, id: "" }, result });
      },
    }),
    update_todo: tool({
      description: "Mark one of your todos in_progress when you start it and done when it is finished.",
      inputSchema: z.object({ id: z.string(), status: z.enum(["in_progress", "done"]) }),
      execute: async ({ id, status }) => {
        const todo = ctx.todos.find((t) => t.id === id);
        if (!todo) throw new Error(`No todo "${id}". Todos: ${ctx.todos.map((t) => t.id).join(", ")}.`);
        if (todo.status !== status) {
          todo.status = status;
          ctx.progress = true;
        }
        const open = ctx.todos.filter((t) => t.status !== "done").map((t) => `${t.id} (${t.status})`);
        return open.length ? `${id} is ${status}. Open: ${open.join(", ")}.` : `${id} is ${status}. All todos are done.`;
      },
    }),
    recall_output: tool({
      description:
        "Read again, whole, an earlier tool output that the conversation summary refers to as #<n> (its message number).",
      inputSchema: z.object({ message: z.number().int().min(0).describe("The message number n of #<n> in the summary") }),
      execute: async ({ message }) => {
        const m = ctx.conversation?.[message];
        if (!m || m.role !== "tool" || !Array.isArray(m.content)) throw new Error(`Message #${message} is not a stored tool output.`);
        const text = (m.content as Array<{ type?: string; toolName?: string; output?: { value?: unknown } }>)
          .filter((p) => p.type === "tool-result")
          .map((p) => {
            const value = p.output?.value;
            return `${p.toolName ?? "tool"}: ${typeof value === "string" ? value : JSON.stringify(value ?? null)}`;
          })
          .join("\n\n");
        return text.length > MAX_RECALL_CHARS ? `${text.slice(0, MAX_RECALL_CHARS)}\n[… ${text.length - MAX_RECALL_CHARS} more characters]` : text;
      },
    }),
    record_progress: tool({
      description:
        "After working on a todo (finished or not), record your progress on it: an estimate from 0 to 1 and what changed (files, behaviour, what is left).",
      inputSchema: z.object({
        taskId: z.string(),
        progress: z.number().min(0).max(1),
        changed: z.string().min(1).max(2000),
      }),
      execute: async ({ taskId, progress, changed }) => {
        if (!ctx.todos.some((t) => t.id === taskId)) throw new Error(`No todo "${taskId}". Todos: ${ctx.todos.map((t) => t.id).join(", ")}.`);
        (ctx.reflections ??= []).push({ taskId, progress, changed });
        return `Recorded: ${taskId} at ${Math.round(progress * 100)}%.`;
      },
    }),
    // No execute: the turn ends and the workflow re-plans through the plan gate; the decision comes back as the result.
    [PROPOSE_REPLAN]: tool({
      description:
        "Use only when an observation breaks the approved plan (an assumption that proved false, a missing dependency): propose a re-plan. A person must approve the new plan; until then do nothing else.",
      inputSchema: z.object({
        observation: z.string().min(1).max(2000).describe("What you observed that the plan did not expect"),
        proposal: z.string().min(1).max(2000).describe("How the plan should change"),
      }),
    }),
    // No execute: the turn ends and the workflow asks a human; the answer comes back as this call's result.
    [REQUEST_CLARIFICATION]: tool({
      description:
        "Ask the person who made the request a question you cannot answer from the repository. Give options for a single choice; omit them for a free-text answer. Set responseType to \"multiple_choice\" (with options) to let them pick several, or to \"file\" to ask them to upload a file (you receive its name and text). Use sparingly.",
      inputSchema: z.object({
        question: z.string().min(1),
        options: z.array(z.string()).optional().describe("The choices, for single_choice or multiple_choice"),
        responseType: z
          .enum(CLARIFICATION_RESPONSE_TYPES)
          .optional()
          .describe("Default: single_choice when options are given, else text"),
        context: z.string().optional(),
      }),
    }),
  };
}
