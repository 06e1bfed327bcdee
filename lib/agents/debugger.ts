import { generateText, NoObjectGeneratedError, Output, type LanguageModel } from "ai";
import { z } from "zod";
import { callModel, type ModelCallContext } from "@/lib/ai/call";
import { section } from "@/lib/ai/prompt-sections";
import { redact } from "@/lib/redact";

/**
 * The debug step of per-task verification (seed 003): a task's own acceptance command failed right after the task;
 * one model call classifies the failure and says what to do about it:
 *
 * - `compile` / `test` → usually `fix`: another bounded implementer pass on the task, with the failure in context;
 * - `environment` → usually `ask`: a person can install a tool or set something up that the agent cannot;
 * - `plan` → `escalate`: the plan itself is wrong (a re-plan through the plan gate).
 *
 * The model's answer is untrusted: it is validated, unknown words are mapped or refused, and what cannot be read at all
 * becomes an escalation to a person, never a guess that lets the run go on unchecked.
 */

export const DEBUG_CATEGORIES = ["compile", "test", "environment", "plan"] as const;
export type DebugCategory = (typeof DEBUG_CATEGORIES)[number];
export const DEBUG_ACTIONS = ["fix", "ask", "escalate"] as const;
export type DebugAction = (typeof DEBUG_ACTIONS)[number];

/** What the model is asked for (strict-schema friendly: every field required, nullable where optional). */
export const debugOutputSchema = z.object({
  category: z.enum(DEBUG_CATEGORIES).describe("compile: it does not build / type-check; test: it builds but a test fails; environment: a tool, service or setting is missing; plan: the task or its check is wrong"),
  action: z.enum(DEBUG_ACTIONS).describe("fix: the implementer can fix it; ask: a person must answer or set something up; escalate: the plan must change"),
  reason: z.string().describe("One or two sentences: what failed and why"),
  question: z.string().nullable().describe('With action "ask": the question for a person; otherwise null'),
});

export type DebugVerdict = {
  category: DebugCategory;
  action: DebugAction;
  reason: string;
  question: string | null;
  /** False when the model's answer could not be read and this verdict is the safe default. */
  parsed: boolean;
};

export type VerifyFailure = { taskId: string; command: string; exitCode: number | null; output: string };

const MAX_REASON = 1_000;
const MAX_QUESTION = 500;

const CATEGORY_WORDS: Record<string, DebugCategory> = {
  compile: "compile",
  compilation: "compile",
  build: "compile",
  syntax: "compile",
  type: "compile",
  typecheck: "compile",
  test: "test",
  tests: "test",
  assertion: "test",
  environment: "environment",
  env: "environment",
  setup: "environment",
  dependency: "environment",
  plan: "plan",
  planning: "plan",
};
const ACTION_WORDS: Record<string, DebugAction> = { fix: "fix", retry: "fix", ask: "ask", question: "ask", escalate: "escalate", replan: "escalate" };

/** The safe verdict for an answer that cannot be read: a person looks at it. */
function unreadable(why: string): DebugVerdict {
  return { category: "plan", action: "escalate", reason: `The debug step's answer could not be read (${why}); a person decides.`, question: null, parsed: false };
}

function word(value: unknown): string {
  return typeof value === "string" ? value.trim().toLowerCase().replace(/[^a-z]/g, "") : "";
}

function text(value: unknown, max: number): string {
  return typeof value === "string" ? redact(value.replace(/\s+/g, " ").trim()).slice(0, max) : "";
}

/** The first JSON object in a text (a bare object, one in a code fence, or one amid prose), or undefined. */
function firstObject(raw: string): unknown {
  const trimmed = raw.trim();
  const candidates = [trimmed, /```(?:json)?\s*([\s\S]*?)```/i.exec(trimmed)?.[1] ?? ""];
  const start = trimmed.indexOf("{");
  const end = trimmed.lastIndexOf("}");
  if (start >= 0 && end > start) candidates.push(trimmed.slice(start, end + 1));
  for (const c of candidates) {
    if (!c.trim()) continue;
    try {
      return JSON.parse(c);
    } catch {
      // try the next reading
    }
  }
  return undefined;
}

/**
 * The model's verdict, validated. Accepts an object or the raw text of one (in a fence or amid prose); maps common
 * synonyms ("build" → compile, "retry" → fix); an action that does not fit is corrected: a plan problem always
 * escalates (an approved plan changes only at the plan gate), an "ask" without a question becomes an escalation.
 */
export function parseDebugVerdict(raw: unknown): DebugVerdict {
  const value = typeof raw === "string" ? firstObject(raw) : raw;
  if (!value || typeof value !== "object" || Array.isArray(value)) return unreadable("not a JSON object");
  const o = value as Record<string, unknown>;
  const category = CATEGORY_WORDS[word(o.category)];
  if (!category) return unreadable(`unknown category ${JSON.stringify(String(o.category ?? "")).slice(0, 40)}`);
  let action: DebugAction = ACTION_WORDS[word(o.action)] ?? (category === "environment" ? "ask" : category === "plan" ? "escalate" : "fix");
  const reason = text(o.reason, MAX_REASON) || `Classified as ${category}.`;
  let question = text(o.question, MAX_QUESTION) || null;
  if (category === "plan") action = "escalate";
  if (action === "ask" && !question) action = "escalate";
  if (action !== "ask") question = null;
  return { category, action, reason, question, parsed: true };
}

const SYSTEM = `You are the debugger of Gatehouse, an orchestrator for autonomous coding agents.
A task was just implemented, and its own acceptance command failed. Classify the failure from the command's output:
- "compile": the code does not build, parse or type-check;
- "test": it builds, but a test or assertion fails;
- "environment": a tool, dependency, service, permission or setting is missing, which the code cannot fix;
- "plan": the task or its acceptance command is wrong or impossible as planned.
Then choose: "fix" (the implementer can fix it in the code), "ask" (a person must answer a question or set something
up; give the question), or "escalate" (the plan must change). Answer with the JSON object only.`;

/** Tail of a command's output: the end of a log says what failed. */
export function outputTail(output: string, max = 4_000): string {
  const clean = redact(output);
  return clean.length <= max ? clean : `…(${clean.length - max} characters before)\n${clean.slice(-max)}`;
}

export function debugPrompt({
  failure,
  task,
  attempt,
  request,
}: {
  failure: VerifyFailure;
  task: { id: string; title: string; description?: string };
  attempt: number;
  /** The run's request, for context (what was asked). */
  request?: string;
}) {
  return [
    ...(request?.trim() ? [section("request", redact(request))] : []),
    section("task", `${task.id}: ${task.title}${task.description ? `\n${task.description}` : ""}`),
    section(
      "verify-failure",
      `Command: ${failure.command}\nExit code: ${failure.exitCode ?? "timed out"}\nDebug attempt: ${attempt}\nOutput:\n${outputTail(failure.output)}`,
    ),
  ].join("\n\n");
}

/**
 * Classify a failed verification. Model failures (outage, auth) throw ModelCallError like every model call; an answer
 * that is not the schema is read leniently (parseDebugVerdict) instead of failing the run.
 */
export async function runDebugger({
  failure,
  task,
  attempt,
  request,
  modelId,
  model,
  context,
  signal,
}: {
  request?: string;
  failure: VerifyFailure;
  task: { id: string; title: string; description?: string };
  attempt: number;
  modelId: string;
  model?: LanguageModel;
  context: Omit<ModelCallContext, "stage">;
  signal?: AbortSignal;
}): Promise<DebugVerdict> {
  return callModel({
    modelId,
    model,
    context: { ...context, stage: "implementation" },
    signal,
    run: async ({ model }) => {
      try {
        const result = await generateText({
          model,
          system: SYSTEM,
          prompt: debugPrompt({ failure, task, attempt, request }),
          output: Output.object({ schema: debugOutputSchema }),
          maxRetries: 0,
          abortSignal: signal,
        });
        return { value: parseDebugVerdict(result.output), usage: result.totalUsage };
      } catch (error) {
        // Output that is not the schema (a word off, prose around it): read what can be read.
        if (NoObjectGeneratedError.isInstance(error)) return { value: parseDebugVerdict(error.text ?? ""), usage: error.usage };
        throw error;
      }
    },
  });
}
