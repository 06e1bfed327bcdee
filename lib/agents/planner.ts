import { generateText, Output } from "ai";
import { callModel } from "@/lib/ai/call";
import { section } from "@/lib/ai/prompt-sections";
import { AppError } from "@/lib/errors";
import { extractConstraints, MermaidError, sanitizeDiagram, stripFence } from "@/lib/mermaid";
import { redactDeep } from "@/lib/redact";
import type { ModelStepOptions } from "./model-step";
import { StepBudgetExceededError, stepBudgetSignal } from "./step-budget";
import { plannerAnswerSchema, plannerOutputSchema, type Plan, type PlannerOutput } from "./plan";

export type PlannerInput = {
  request: string;
  /** `.autonomous/memory.md` of the project. */
  memory?: string;
  /** The repository's instructions (AGENTS.md …), already quoted as repository content (lib/agents/instructions.ts). */
  instructions?: string;
  /** Answers to earlier questions of this run. */
  clarifications?: Array<{ question: string; answer: string }>;
  /** Feedback from rejected plans, oldest first. */
  rejectionFeedback?: string[];
  /** A listing of the repository (paths), so the plan names real files. */
  repositoryFiles?: string[];
  /** Diagrams this run's planner already produced (the workflow adds `diagramsProduced` after each call). */
  diagramAttempt?: number;
  /**
   * "Ask back": a person's question on the plan gate about the plan shown to them. The planner answers it and returns
   * the plan revised (or unchanged, when the answer needs no change).
   */
  planQuestion?: { question: string; plan: string };
  /**
   * The diagram retry a step's budget cut (PlannerRetry, from StepBudgetExceededError.resume): this call is that retry,
   * with the parser's error, instead of planning from scratch.
   */
  retry?: PlannerRetry;
};

/** An invalid first diagram and the rest of its plan: what the retry call is told and what a person may fix by hand. */
export type PlannerRetry = { mermaid: string; message: string; line?: number; draft: Omit<Plan, "constraints" | "mermaid"> };

export type PlannerResult =
  | { kind: "plan"; plan: Plan; diagramsProduced: number; /** The answer to `planQuestion`, when one was asked. */ answer?: string }
  | {
      kind: "clarification";
      question: string;
      context: string | null;
      options: string[];
      responseType: "text" | "single_choice";
      diagramsProduced: number;
    };

/** The planner's diagram stayed invalid after the retry: the workflow pauses for a human fix. */
export class PlannerError extends AppError {
  readonly reason = "invalid_mermaid" as const;
  constructor(
    message: string,
    readonly mermaid: string,
    readonly line: number | undefined,
    readonly diagramsProduced: number,
    /** The rest of the plan that came with the invalid diagram, for a person to fix the diagram by hand. */
    readonly draft?: Omit<Plan, "constraints" | "mermaid">,
  ) {
    super("bad_request:mermaid", message, { details: { reason: "invalid_mermaid", line, diagramsProduced } });
    this.name = "PlannerError";
  }
}

const SYSTEM = `You are the planner of Gatehouse, an orchestrator for autonomous coding agents.
Turn the request into a plan another agent will implement and a third will validate.
- Return a Mermaid diagram (flowchart, sequence, class, ER or state) of the change; no code fence.
- In a flowchart, give each task a node whose id is the task's id (e.g. T1["…"]): the dashboard colours it as the work moves.
- Tasks are small, ordered by dependsOn, and each lists the files or folders it may change: that list is a contract,
  changes outside it fail validation.
- Give each task its own quick acceptance commands in "checks" when one can prove it (a focused test, a type check): they
  run right after the task, and a failure goes to a debugging step.
- Acceptance criteria are checkable; give a command that proves one when possible (it runs in the repository, exit 0 = pass).
- Ask a clarification (kind "clarification") only when the request cannot be planned without an answer.
- Respect the project memory and address any rejection feedback.
- When a <plan-question> is given, a person asked it about the plan in <current-plan>: answer it in "answer", and return
  the whole plan, revised where the answer calls for a change.`;

function userPrompt(input: PlannerInput, diagramAttempt: number, previousError?: { mermaid: string; message: string }): string {
  const parts = [section("request", input.request)];
  if (input.memory?.trim()) parts.push(section("memory", input.memory));
  if (input.instructions?.trim()) parts.push(input.instructions);
  if (input.clarifications?.length) {
    parts.push(section("clarifications", input.clarifications.map((c) => `Q: ${c.question}\nA: ${c.answer}`).join("\n\n")));
  }
  if (input.rejectionFeedback?.length) {
    parts.push(section("rejection-feedback", input.rejectionFeedback.map((f, i) => `${i + 1}. ${f}`).join("\n")));
  }
  if (input.repositoryFiles?.length) parts.push(section("repository-files", input.repositoryFiles.slice(0, 400).join("\n")));
  if (input.planQuestion) {
    parts.push(section("current-plan", input.planQuestion.plan));
    parts.push(section("plan-question", input.planQuestion.question));
  }
  parts.push(section("diagram-attempt", String(diagramAttempt)));
  if (previousError) {
    parts.push(
      section(
        "previous-error",
        `Your previous diagram was rejected by the Mermaid parser:\n${previousError.message}\n\nDiagram:\n${previousError.mermaid}\n\nReturn the whole plan again with a valid diagram.`,
      ),
    );
  }
  return parts.join("\n\n");
}

/** The plan's parts other than its diagram: tasks with dependencies on real tasks only, criteria with ids. */
function draftOf(out: PlannerOutput): Omit<Plan, "constraints" | "mermaid"> {
  const ids = new Set(out.tasks.map((t) => t.id));
  return {
    summary: out.summary,
    tasks: out.tasks.map((t) => ({
      ...t,
      dependsOn: t.dependsOn.filter((d) => ids.has(d) && d !== t.id),
      checks: (t.checks ?? [])
        .map((c) => c.trim())
        .filter((c) => c && c.length <= 2_000)
        .slice(0, 20),
    })),
    acceptanceCriteria: out.acceptanceCriteria.map((c, i) => ({
      id: c.id?.trim() || `AC${i + 1}`,
      description: c.description,
      ...(c.command?.trim() ? { command: c.command.trim() } : {}),
    })),
    risks: out.risks,
  };
}

function toPlan(out: PlannerOutput, constraints: Plan["constraints"], mermaid: string): Plan {
  return { ...draftOf(out), mermaid, constraints };
}

/**
 * Plan a request. Returns a checked plan (diagram parsed, constraints extracted) or the planner's question. An invalid
 * diagram is retried once with the parser's message; a second invalid one throws PlannerError. Model failures throw
 * ModelCallError (see lib/ai/call.ts).
 */
export async function runPlanner({
  input,
  modelId,
  model,
  context,
  signal,
  stepEndsAt,
  now,
}: {
  input: PlannerInput;
  // A call cut at stepEndsAt throws StepBudgetExceededError whose `resume` is the cut retry, if it was the retry.
} & ModelStepOptions): Promise<PlannerResult> {
  const firstAttempt = input.diagramAttempt ?? 0;
  let previousError: { mermaid: string; message: string; line?: number } | undefined = input.retry;
  let lastDraft: Omit<Plan, "constraints" | "mermaid"> | undefined = input.retry?.draft;
  const budget = stepBudgetSignal({ stepEndsAt, now });
  const callSignal = signal ? AbortSignal.any([signal, budget.signal]) : budget.signal;
  try {
    return await planWithRetry();
  } finally {
    budget.stop();
  }

  async function planWithRetry(): Promise<PlannerResult> {
    for (let n = input.retry ? 1 : 0; n < 2; n++) {
      const out = await callModel({
        modelId,
        model,
        context: { ...context, stage: "planning", stepKey: context.stepKey && (n === 0 ? context.stepKey : `${context.stepKey}:retry`) },
        signal: callSignal,
        run: async ({ model }) => {
          const result = await generateText({
            model,
            system: SYSTEM,
            prompt: userPrompt(input, firstAttempt + n, previousError),
            // A question asks for the answer alongside the plan; otherwise the plan alone.
            output: Output.object({ schema: input.planQuestion ? plannerAnswerSchema : plannerOutputSchema }),
            maxRetries: 0,
            abortSignal: callSignal,
          });
          return { value: redactDeep(result.output), usage: result.totalUsage };
        },
      }).catch((error: unknown) => {
        if (!budget.exceeded() || signal?.aborted) throw error;
        // Cut at the step's end: the retry resumes as a retry; a first call is simply made again.
        throw new StepBudgetExceededError(n === 1 && previousError && lastDraft ? ({ ...previousError, draft: lastDraft } satisfies PlannerRetry) : undefined);
      });
      if (out.kind === "clarification" && out.clarification) {
        const options = out.clarification.options.filter((o) => o.trim());
        return {
          kind: "clarification",
          question: out.clarification.question,
          context: out.clarification.context,
          options,
          responseType: options.length ? "single_choice" : "text",
          diagramsProduced: n,
        };
      }
      // External images and links in labels would be fetched by every viewer's browser: dropped before anything stores it.
      const mermaid = sanitizeDiagram(stripFence(out.mermaid));
      try {
        const constraints = await extractConstraints(mermaid);
        const answer = "answer" in out && typeof out.answer === "string" ? out.answer : undefined;
        return { kind: "plan", plan: toPlan(out, constraints, mermaid), diagramsProduced: n + 1, ...(answer ? { answer } : {}) };
      } catch (error) {
        if (!(error instanceof MermaidError)) throw error;
        previousError = { mermaid, message: error.message, line: error.line };
        lastDraft = draftOf(out);
      }
    }
    throw new PlannerError(
      `The planner's diagram is still invalid after a retry: ${previousError!.message}`,
      previousError!.mermaid,
      previousError!.line,
      2,
      lastDraft,
    );
  }
}
