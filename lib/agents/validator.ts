import { generateText, Output, type LanguageModel } from "ai";
import { z } from "zod";
import { callModel, type ModelCallContext } from "@/lib/ai/call";
import { section } from "@/lib/ai/prompt-sections";
import type { Sandbox } from "@/lib/sandbox/types";
import { redact, redactDeep } from "@/lib/redact";
import { commandArgv } from "@/lib/sandbox/command-line";
import { inScope } from "./paths";
import { checkDiagramConstraints } from "./diagram-checks";
import { reviewDiff } from "./review-diff";
import { canDetach, execWithinStep, StepBudgetExceededError, stepBudgetSignal, waitDetached } from "./step-budget";
import { describePlan, planScope, type Plan } from "./plan";

/**
 * Validation: facts first (each criterion's command in the sandbox, the diff, files outside the plan's scope), then two
 * separate model calls, both blind to the implementer's own account:
 * - the review (pass/fail, findings, feedback), which sees the plan, criteria, diff and check results;
 * - the alignment score (0-10, its own threshold `validation.scoreThreshold`), which sees only the request, the plan and
 *   the diff — not the checks nor the review's verdict — so a failing command or a harsh review cannot drag it, and a
 *   lenient review cannot lift it.
 * Pass = every command green, the plan's constraints met, nothing out of scope, the review passing, and the score at
 * the threshold.
 */

export const reviewSchema = z.object({
  passed: z.boolean(),
  findings: z.array(
    z.object({
      severity: z.enum(["minor", "major"]),
      criterion: z.string().describe("The criterion id (or 'scope', 'diagram') the finding is about"),
      evidence: z.string(),
    }),
  ),
  feedback: z.string().describe("What the implementer must change for the next attempt; empty when passed"),
});

export const alignmentSchema = z.object({
  alignmentScore: z.number().min(0).max(10).describe("How well the diff implements the request and the plan, 0-10"),
  rationale: z.string().describe("One or two sentences: what the score rests on"),
});

export type Finding = z.infer<typeof reviewSchema>["findings"][number];

export type CheckResult = {
  criterionId: string;
  description: string;
  command: string;
  passed: boolean;
  exitCode: number | null;
  timedOut: boolean;
  output: string;
  durationMs: number;
};

export type ValidationResult = {
  passed: boolean;
  alignmentScore: number;
  /** The alignment call's own reason for its score. */
  alignmentRationale: string;
  threshold: number;
  attempt: number;
  checks: CheckResult[];
  changedFiles: string[];
  outOfScopeFiles: string[];
  findings: Finding[];
  /** The plan's constraints checked by Gatehouse itself, before and independent of the model's review. */
  planChecks: PlanCheck[];
  feedback: string;
  /** Markdown for `validation-report.md`. */
  report: string;
};

/** One deterministic check of the plan's constraints; a failed one is a major finding no review can override. */
export type PlanCheck = { kind: "scope" | "files" | "order" | "commands" | "frozen" | "diagram"; passed: boolean; detail: string };

/**
 * What an acceptance command needs before it can prove anything: its program (a path in the repository, or a name on
 * PATH), and for `npm|pnpm|yarn run <script>` / `npm test` the package.json script. A line like `./check.sh || true`
 * exits 0 without its script, so the command's exit code alone cannot tell.
 */
async function missingCommandParts({
  command,
  sandbox,
}: {
  command: string;
  sandbox: Pick<Sandbox, "readFile" | "exec">;
}): Promise<string | null> {
  const words = command.trim().split(/[|&;<>()\n]/)[0]!.trim().split(/\s+/).filter(Boolean);
  // Leading VAR=value assignments are not the program.
  while (words.length > 1 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[0]!)) words.shift();
  const program = words[0];
  if (!program) return null;
  if (program.includes("/")) {
    const exists = await sandbox.readFile(program.replace(/^\.\//, "")).then(() => true, () => false);
    return exists ? null : `${program} does not exist`;
  }
  const found = await sandbox.exec("sh", ["-c", 'command -v -- "$1" >/dev/null', "sh", program]).then((r) => r.exitCode === 0, () => false);
  if (!found) return `${program} is not installed`;
  if (["npm", "pnpm", "yarn"].includes(program)) {
    const script = words[1] === "run" || words[1] === "run-script" ? words[2] : words[1] === "test" ? "test" : undefined;
    if (!script || script.startsWith("-")) return null;
    const scripts = await sandbox.readFile("package.json").then(
      (text) => {
        try {
          return (JSON.parse(text) as { scripts?: Record<string, string> }).scripts ?? {};
        } catch {
          return {};
        }
      },
      () => ({}) as Record<string, string>,
    );
    if (!(script in scripts)) return `package.json has no "${script}" script`;
  }
  return null;
}

/**
 * What can be checked without a model: every changed file is in the plan's scope, every file a task names exists
 * (unless the diff deleted it), every acceptance command's program (and npm script) is present, and tasks finished in an order their dependencies allow (`completedOrder`, task ids in
 * the order the implementer finished them, when known).
 */
export async function checkPlanConstraints({
  plan,
  sandbox,
  changedFiles,
  outOfScopeFiles,
  deletedFiles,
  completedOrder,
}: {
  plan: Pick<Plan, "tasks"> & Partial<Pick<Plan, "acceptanceCriteria">>;
  sandbox: Pick<Sandbox, "readFile" | "listFiles" | "exec">;
  changedFiles: string[];
  outOfScopeFiles: string[];
  deletedFiles: string[];
  completedOrder?: string[];
}): Promise<PlanCheck[]> {
  const checks: PlanCheck[] = [];
  checks.push(
    outOfScopeFiles.length
      ? { kind: "scope", passed: false, detail: `Changed outside the plan's files: ${outOfScopeFiles.join(", ")}.` }
      : { kind: "scope", passed: true, detail: `All ${changedFiles.length} changed file(s) are in the plan's scope.` },
  );
  const missing: string[] = [];
  for (const task of plan.tasks) {
    for (const file of task.files) {
      if (file.endsWith("/") || deletedFiles.includes(file)) continue;
      const exists = await sandbox.readFile(file).then(
        () => true,
        async () => (await sandbox.listFiles(file).then((l) => l.length >= 0, () => false)),
      );
      if (!exists) missing.push(`${task.id}: ${file}`);
    }
  }
  checks.push(
    missing.length
      ? { kind: "files", passed: false, detail: `Files the plan's tasks name do not exist: ${missing.join(", ")}.` }
      : { kind: "files", passed: true, detail: "Every file the plan's tasks name exists." },
  );
  const commands = (plan.acceptanceCriteria ?? []).filter((c) => c.command);
  if (commands.length) {
    const absent: string[] = [];
    for (const c of commands) {
      const missing = await missingCommandParts({ command: c.command!, sandbox });
      if (missing) absent.push(`${c.id} (\`${c.command}\`): ${missing}`);
    }
    checks.push(
      absent.length
        ? { kind: "commands", passed: false, detail: `Commands the plan requires are not present: ${absent.join("; ")}.` }
        : { kind: "commands", passed: true, detail: `Every acceptance command's program is present (${commands.length}).` },
    );
  }
  if (completedOrder?.length) {
    const position = new Map(completedOrder.map((id, i) => [id, i]));
    const early: string[] = [];
    for (const task of plan.tasks) {
      const at = position.get(task.id);
      if (at === undefined) continue;
      for (const dep of task.dependsOn) {
        const depAt = position.get(dep);
        if (depAt === undefined || depAt > at) early.push(`${task.id} finished before ${dep}`);
      }
    }
    checks.push(
      early.length
        ? { kind: "order", passed: false, detail: `Tasks finished out of dependency order: ${early.join("; ")}.` }
        : { kind: "order", passed: true, detail: `Tasks finished in dependency order (${completedOrder.join(" → ")}).` },
    );
  }
  return checks;
}

export const DEFAULT_SCORE_THRESHOLD = 9;
const MAX_DIFF_CHARS = 60_000;
const MAX_CHECK_OUTPUT = 4_000;

/** Paths Gatehouse itself writes on the run branch; never counted against the plan's scope. */
const ALWAYS_IN_SCOPE = [".autonomous/", "validation-report.md"];

const SYSTEM = `You are the validator of Gatehouse, reviewing a change blind: you see the plan, its acceptance criteria,
the check results and the diff — not the implementer's explanation. Judge only what the diff shows. List findings with
evidence from the diff or the checks (major = a criterion is not met or something is broken; minor = polish). Give
concrete feedback for a retry.`;

const ALIGNMENT_SYSTEM = `You score, 0-10, how well a change implements what was asked: the request and the plan (its
diagram, tasks and acceptance criteria). You see only those and the diff — no test results, no reviewer's verdict, no
explanation from whoever wrote the change. 10 = everything asked for is there and nothing else; 0 = unrelated. Give the
score and, in a sentence or two, what it rests on.`;

function tail(text: string, max: number): string {
  return text.length <= max ? text : `[…]\n${text.slice(-max)}`;
}

/** An acceptance command still running detached when its step ended (execWithinStep): a later step collects it. */
export type PendingCheck = { criterionId: string; id: string };

/**
 * Run the plan's acceptance commands, in order, each once. With `stepEndsAt` (the end of the durable step, epoch ms
 * on `now`) a command that could outlive the step runs detached; if it still runs when the step ends, `pending` names
 * it and a later step calls again with `done` (the results so far) and `pending`, which is then waited for, not rerun.
 */
export async function runChecks({
  plan,
  sandbox,
  timeoutMs,
  signal,
  stepEndsAt,
  now,
  done = [],
  pending = null,
}: {
  plan: Pick<Plan, "acceptanceCriteria">;
  sandbox: Sandbox;
  timeoutMs?: number;
  signal?: AbortSignal;
  stepEndsAt?: number;
  now?: () => number;
  done?: CheckResult[];
  pending?: PendingCheck | null;
}): Promise<{ checks: CheckResult[]; pending: PendingCheck | null }> {
  const checks: CheckResult[] = [...done];
  for (const criterion of plan.acceptanceCriteria) {
    if (!criterion.command || checks.some((c) => c.criterionId === criterion.id)) continue;
    const { command, args } = commandArgv(criterion.command);
    const started = performance.now();
    try {
      if (signal?.aborted) throw signal.reason ?? new Error("aborted");
      const ran =
        pending?.criterionId === criterion.id && canDetach(sandbox)
          ? await waitDetached({ sandbox, id: pending.id, until: stepEndsAt ?? Infinity, now, signal }).then((s) =>
              s.state === "exited" ? { state: "exited" as const, result: s.result } : { state: "running" as const, id: pending.id },
            )
          : await execWithinStep({ sandbox, command, args, options: { timeoutMs }, stepEndsAt, now, signal });
      if (ran.state === "running") return { checks, pending: { criterionId: criterion.id, id: ran.id } };
      const r = ran.result;
      checks.push({
        criterionId: criterion.id,
        description: criterion.description,
        command: criterion.command,
        passed: r.exitCode === 0 && !r.timedOut,
        exitCode: r.exitCode,
        timedOut: r.timedOut,
        output: redact(tail([r.stdout, r.stderr].filter(Boolean).join("\n"), MAX_CHECK_OUTPUT)),
        durationMs: Math.round(r.durationMs),
      });
    } catch (error) {
      // A cancel or the stage deadline stops the checks where they are (the caller decides what that means).
      if (signal?.aborted) throw error;
      checks.push({
        criterionId: criterion.id,
        description: criterion.description,
        command: criterion.command,
        passed: false,
        exitCode: null,
        timedOut: false,
        output: redact(`Could not run the command: ${(error as Error).message}`),
        durationMs: Math.round(performance.now() - started),
      });
    }
  }
  return { checks, pending: null };
}

type Review = z.infer<typeof reviewSchema>;

/**
 * Where a validation that spans steps is: the checks finished so far, the one still running detached, and the review
 * once it is in (so a cut alignment call does not redo it). Plain JSON: it is a durable step's result.
 */
export type ValidationProgress = { checks: CheckResult[]; pending: PendingCheck | null; review: Review | null };

export type ValidationStep =
  | { kind: "result"; result: ValidationResult }
  /** An acceptance command outlived the step: it runs on detached; the next step continues from `progress`. */
  | { kind: "checks_running"; progress: ValidationProgress };

/** Validate in one go (no step budget): runValidateStep's result. */
export async function runValidator(args: Omit<Parameters<typeof runValidateStep>[0], "stepEndsAt" | "progress">): Promise<ValidationResult> {
  const step = await runValidateStep(args);
  if (step.kind !== "result") throw new Error("A validation without a step budget cannot leave a check running.");
  return step.result;
}

/**
 * Validate within one durable step: with `stepEndsAt`, an acceptance command that outlives the step is left running
 * (`checks_running`, continue from its progress after a durable sleep), and a model call unanswered at the step's end
 * is aborted with StepBudgetExceededError whose `resume` is the progress (the checks are not run again).
 */
export async function runValidateStep({
  plan,
  request,
  sandbox,
  attempt = 1,
  threshold = DEFAULT_SCORE_THRESHOLD,
  commandTimeoutMs,
  modelId,
  model,
  context,
  completedOrder,
  signal,
  approvedPaths = [],
  frozen,
  stepEndsAt,
  now,
  progress,
  instructions,
}: {
  plan: Plan;
  /** The repository's instructions, quoted as repository content (lib/agents/instructions.ts): the review weighs them. */
  instructions?: string;
  /** The end of the durable step (epoch ms on `now`); absent, everything runs in this call. */
  stepEndsAt?: number;
  now?: () => number;
  /** Where an earlier step of this validation stopped. */
  progress?: ValidationProgress;
  /** The approved plan's hash and the validated plan's (lib/workflow/plan-hash.ts): a mismatch is a major finding. */
  frozen?: { approved: string; validated: string };
  /** Files or folders a person approved changing at a policy gate: in scope, whatever the plan says. */
  approvedPaths?: string[];
  /** Aborts the checks' commands and both model calls where they are (a cancel, or the stage deadline). */
  signal?: AbortSignal;
  request: string;
  sandbox: Sandbox;
  /** Task ids in the order the implementer finished them (for the dependency-order check). */
  completedOrder?: string[];
  /** 1 for the first validation of the run, 2 after the first fix, … */
  attempt?: number;
  threshold?: number;
  commandTimeoutMs?: number;
  modelId: string;
  model?: LanguageModel;
  context: Omit<ModelCallContext, "stage">;
}): Promise<ValidationStep> {
  const ran = await runChecks({
    plan,
    sandbox,
    timeoutMs: commandTimeoutMs,
    signal,
    stepEndsAt,
    now,
    done: progress?.checks,
    pending: progress?.pending,
  });
  if (signal?.aborted) throw signal.reason ?? new Error("aborted");
  if (ran.pending) return { kind: "checks_running", progress: { checks: ran.checks, pending: ran.pending, review: null } };
  const checks = ran.checks;
  const { text: diff, changedFiles, deletedFiles } = await reviewDiff(sandbox, { maxChars: MAX_DIFF_CHARS });
  const scope = planScope(plan);
  const outOfScopeFiles = changedFiles.filter((f) => !inScope(f, [...scope, ...ALWAYS_IN_SCOPE, ...approvedPaths]));
  // Gatehouse's own checks of the plan run first and are reported apart; the review below cannot override them.
  const planChecks = await checkPlanConstraints({ plan, sandbox, changedFiles, outOfScopeFiles, deletedFiles, completedOrder });
  const diagram = await checkDiagramConstraints({ constraints: plan.constraints, sandbox });
  if (diagram) planChecks.push(diagram);
  if (frozen) {
    // The approved plan is frozen: validating against any other plan would judge work nobody approved.
    planChecks.push(
      frozen.approved === frozen.validated
        ? { kind: "frozen", passed: true, detail: `The plan validated is the approved one (${frozen.approved.slice(0, 12)}).` }
        : {
            kind: "frozen",
            passed: false,
            detail: `The plan validated (hash ${frozen.validated.slice(0, 12)}) is not the approved plan (${frozen.approved.slice(0, 12)}): a changed plan needs a new approval.`,
          },
    );
  }

  const prompt = [
    section("request", request),
    section("plan", describePlan(plan)),
    ...(instructions?.trim() ? [instructions] : []),
    section("checks", JSON.stringify(checks.map((c) => ({ criterion: c.criterionId, command: c.command, passed: c.passed, exitCode: c.exitCode, output: c.output })))),
    section("out-of-scope-files", outOfScopeFiles.join("\n") || "(none)"),
    section("validation-attempt", String(attempt)),
    section("diff", diff || "(no changes)"),
  ].join("\n\n");

  const budget = stepBudgetSignal({ stepEndsAt, now });
  const callSignal = signal ? AbortSignal.any([signal, budget.signal]) : budget.signal;
  // Cut at the step's end: the next step resumes with the checks (and the review, once it is in), not from scratch.
  const cut = (review: Review | null) => (error: unknown) => {
    if (!budget.exceeded() || signal?.aborted) throw error;
    throw new StepBudgetExceededError({ checks, pending: null, review } satisfies ValidationProgress);
  };
  try {
    return { kind: "result", result: await reviewAndScore() };
  } finally {
    budget.stop();
  }

  async function reviewAndScore(): Promise<ValidationResult> {
    const review =
      progress?.review ??
      (await callModel({
        modelId,
        model,
        context: { ...context, stage: "validation" },
        signal: callSignal,
        run: async ({ model }) => {
          const r = await generateText({ model, system: SYSTEM, prompt, output: Output.object({ schema: reviewSchema }), maxRetries: 0, abortSignal: callSignal });
          return { value: redactDeep(r.output), usage: r.totalUsage };
        },
      }).catch(cut(null)));
    // The alignment score: its own call, blind to the checks and to the review above.
    const alignmentPrompt = [
      section("request", request),
      section("plan", describePlan(plan)),
      section("validation-attempt", String(attempt)),
      section("diff", diff || "(no changes)"),
    ].join("\n\n");
    const alignment = await callModel({
      modelId,
      model,
      context: { ...context, stage: "validation", ...(context.stepKey ? { stepKey: `${context.stepKey}:alignment` } : {}) },
      signal: callSignal,
      run: async ({ model }) => {
        const r = await generateText({ model, system: ALIGNMENT_SYSTEM, prompt: alignmentPrompt, output: Output.object({ schema: alignmentSchema }), maxRetries: 0, abortSignal: callSignal });
        return { value: redactDeep(r.output), usage: r.totalUsage };
      },
    }).catch(cut(review));

    const findings: Finding[] = [
      ...outOfScopeFiles.map((f) => ({
        severity: "major" as const,
        criterion: "scope",
        evidence: `${f} changed but is outside the plan's files (${scope.join(", ") || "none"}).`,
      })),
      ...planChecks
        .filter((c) => !c.passed && c.kind !== "scope")
        .map((c) => ({ severity: "major" as const, criterion: `plan:${c.kind}`, evidence: c.detail })),
      ...checks
        .filter((c) => !c.passed)
        .filter((c) => !review.findings.some((f) => f.criterion === c.criterionId))
        .map((c) => ({
          severity: "major" as const,
          criterion: c.criterionId,
          evidence: `\`${c.command}\` ${c.timedOut ? "timed out" : `exited ${c.exitCode}`}.`,
        })),
      ...review.findings,
    ];
    const allGreen = checks.every((c) => c.passed);
    const score = Math.max(0, Math.min(10, alignment.alignmentScore));
    const planOk = planChecks.every((c) => c.passed);
    const passed = allGreen && planOk && outOfScopeFiles.length === 0 && score >= threshold && review.passed;
    const feedbackParts = [
      ...(outOfScopeFiles.length ? [`Revert the changes outside the plan's scope: ${outOfScopeFiles.join(", ")}.`] : []),
      ...planChecks.filter((c) => !c.passed && c.kind !== "scope").map((c) => c.detail),
      ...checks.filter((c) => !c.passed).map((c) => `Make \`${c.command}\` pass (${c.criterionId}).`),
      ...(review.feedback.trim() ? [review.feedback.trim()] : []),
      ...(score < threshold ? [`Alignment score ${score} is below ${threshold}: ${alignment.rationale.trim() || "no reason given"}`] : []),
    ];
    const result: Omit<ValidationResult, "report"> = {
      passed,
      alignmentScore: score,
      alignmentRationale: alignment.rationale,
      threshold,
      attempt,
      checks,
      changedFiles,
      outOfScopeFiles,
      findings,
      planChecks,
      feedback: passed ? "" : feedbackParts.join("\n"),
    };
    return { ...result, report: validationReport({ plan, result }) };
  }
}

export function validationReport({ plan, result }: { plan: Plan; result: Omit<ValidationResult, "report"> }): string {
  const lines = [
    `# Validation report`,
    "",
    `**Result:** ${result.passed ? "passed" : "failed"} · alignment ${result.alignmentScore}/10 (threshold ${result.threshold}) · attempt ${result.attempt}`,
    "",
    `**Alignment** (scored in its own call, without the checks or the review): ${result.alignmentRationale.trim() || "no reason given"}`,
    "",
    `## Plan`,
    "",
    plan.summary,
    "",
    `## Acceptance criteria`,
    "",
    "| Criterion | Command | Result |",
    "|---|---|---|",
  ];
  for (const c of plan.acceptanceCriteria) {
    const check = result.checks.find((k) => k.criterionId === c.id);
    const outcome = check ? (check.passed ? "✅ passed" : check.timedOut ? "❌ timed out" : `❌ exit ${check.exitCode}`) : "reviewed";
    lines.push(`| ${c.id}: ${c.description.replace(/\|/g, "\\|")} | ${c.command ? `\`${c.command}\`` : "—"} | ${outcome} |`);
  }
  lines.push("", "## Plan constraints (checked by Gatehouse, not by the model)", "");
  lines.push(...(result.planChecks.length ? result.planChecks.map((c) => `- ${c.passed ? "passed" : "**failed**"} — ${c.kind}: ${c.detail}`) : ["(none)"]));
  lines.push("", "## Changed files", "");
  lines.push(...(result.changedFiles.length ? result.changedFiles.map((f) => `- \`${f}\`${result.outOfScopeFiles.includes(f) ? " — **outside the plan's scope**" : ""}`) : ["(none)"]));
  lines.push("", "## Findings", "");
  lines.push(...(result.findings.length ? result.findings.map((f) => `- **${f.severity}** (${f.criterion}): ${f.evidence}`) : ["(none)"]));
  const failed = result.checks.filter((c) => !c.passed);
  if (failed.length) {
    lines.push("", "## Failed checks", "");
    for (const c of failed) lines.push(`### ${c.criterionId}: \`${c.command}\``, "", "```", c.output || "(no output)", "```", "");
  }
  if (result.feedback) lines.push("", "## Feedback for the next attempt", "", result.feedback);
  lines.push("");
  return lines.join("\n");
}
