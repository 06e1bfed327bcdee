import { eq } from "drizzle-orm";
import { write } from "@/lib/db";
import { artifacts, workflowRuns } from "@/lib/db/schema";
import { planHash } from "@/lib/workflow/plan-hash";
import { appendEventsTx } from "@/lib/db/event-store";
import { newId } from "@/lib/ids";
import { redact } from "@/lib/redact";
import { isModelCallError } from "@/lib/ai";
import { PlannerError, StepBudgetExceededError, runPlanner, type Plan, type PlannerResult, type PlannerRetry } from "@/lib/agents";
import { extractConstraints } from "@/lib/mermaid";
import { commitSpec, git, readLatestMemory } from "@/lib/git";
import { TERMINAL_STATUSES, type PlanDocument, type RunState } from "@/lib/workflow";
import { firstLine, loadRun, modelCallKey, RunEndedError, stepBudget, workflowClock, type WithNow } from "./context";
import { endedStatus, stageSignal } from "./end";
import { planFromTasksFile } from "./tasks-file";
import { stageInstructions } from "./instructions";

/* Planning: the planner's step (or a tasks.md's plan), a plan recorded as a spec on the branch, and the plan as agents read it. */

export type PlanStepResult =
  | WithNow<{ kind: "plan"; plan: PlanDocument; diagramsProduced: number; answer?: string }>
  | WithNow<{ kind: "timeout" }>
  | WithNow<Extract<PlannerResult, { kind: "clarification" }>>
  | WithNow<{ kind: "invalid"; message: string; diagramsProduced: number; /** The plan with its invalid diagram, to fix by hand. */ draft: PlanDocument | null }>
  | WithNow<{ kind: "model_error"; reason: string; message: string }>
  /**
   * The planner's model call had not answered when the step's time ran out: the call is made again in a fresh step,
   * as the retry it was when `retry` is set (not a model error, no pause).
   */
  | WithNow<{ kind: "step_budget"; retry: PlannerRetry | null }>;

export type PlanRetry = PlannerRetry;

async function repositoryFiles(repoPath: string, ref: string): Promise<string[]> {
  const out = await git(repoPath, ["ls-tree", "-r", "--name-only", ref], { allowFailure: true });
  return out.stdout.split("\n").filter(Boolean).slice(0, 2000);
}

export async function plan({
  runId,
  stepKey,
  feedback,
  clarifications,
  diagramAttempt,
  deadline,
  planQuestion,
  retry,
}: {
  runId: string;
  stepKey: string;
  feedback: string[];
  clarifications: Array<{ question: string; answer: string }>;
  diagramAttempt: number;
  /** The diagram retry an earlier step's budget cut (its `step_budget` result): made again, as a retry. */
  retry?: PlannerRetry | null;
  /** "Ask back": a person's question about `plan`; the planner answers it and revises the plan. */
  planQuestion?: { question: string; plan: PlanDocument };
  /** The planning stage's deadline (epoch ms): the model call is aborted when it passes, and the step says timeout. */
  deadline?: number;
}): Promise<PlanStepResult> {
  if (deadline !== undefined && workflowClock.now() > deadline) return { kind: "timeout", now: workflowClock.now() };
  const run = await loadRun({ runId });
  const fromTasks = await planFromTasksFile(run);
  if (fromTasks) return { ...fromTasks, now: workflowClock.now() };
  const memory = await readLatestMemory({ repoPath: run.repoPath, ref: run.branch });
  const stage = stageSignal(runId, deadline);
  // Real time, not workflowClock: the host cuts the call by the wall clock.
  const stepEndsAt = Date.now() + stepBudget.ms();
  try {
    const result = await runPlanner({
      input: {
        request: run.request,
        memory: memory.raw ?? undefined,
        instructions: await stageInstructions({ run, stage: "planning" }),
        clarifications,
        rejectionFeedback: feedback,
        repositoryFiles: await repositoryFiles(run.repoPath, run.branch),
        diagramAttempt,
        ...(planQuestion ? { planQuestion: { question: planQuestion.question, plan: describePlanDocument(planQuestion.plan) } } : {}),
        ...(retry ? { retry } : {}),
      },
      modelId: run.config.modelRouting.planner,
      context: { runId, stepKey: modelCallKey(runId, stepKey) },
      signal: stage.signal,
      stepEndsAt,
    });
    if (result.kind === "plan") {
      const answer = result.answer ? redact(result.answer) : undefined;
      return { kind: "plan", plan: toPlanDocument(result.plan), diagramsProduced: result.diagramsProduced, ...(answer ? { answer } : {}), now: workflowClock.now() };
    }
    return { ...result, now: workflowClock.now() };
  } catch (error) {
    if (stage.cancelled()) throw new RunEndedError((await endedStatus(runId)) ?? "cancelled");
    if (stage.overtime()) return { kind: "timeout", now: Math.max(workflowClock.now(), deadline ?? 0) + 1 };
    if (error instanceof StepBudgetExceededError) return { kind: "step_budget", retry: (error.resume as PlannerRetry | undefined) ?? null, now: workflowClock.now() };
    if (error instanceof PlannerError) {
      const draft = error.draft ? toPlanDocument({ ...error.draft, mermaid: error.mermaid }) : null;
      return { kind: "invalid", message: error.message, diagramsProduced: error.diagramsProduced, draft, now: workflowClock.now() };
    }
    if (isModelCallError(error)) return { kind: "model_error", reason: error.reason, message: redact(error.message), now: workflowClock.now() };
    throw error;
  } finally {
    stage.stop();
  }
}

/** A stored plan as the planner reads it back when a person asks about it. */
function describePlanDocument(doc: PlanDocument): string {
  const lines = [`Summary: ${doc.summary}`, "", "Tasks:"];
  for (const t of doc.tasks) {
    lines.push(`- ${t.id}: ${t.title}${t.dependsOn?.length ? ` (after ${t.dependsOn.join(", ")})` : ""}${t.files?.length ? ` [files: ${t.files.join(", ")}]` : ""}`);
  }
  lines.push("", "Acceptance criteria:", ...doc.acceptanceCriteria.map((c) => `- ${c.description}${c.command ? ` (\`${c.command}\`)` : ""}`));
  lines.push("", "Diagram:", doc.mermaid);
  return lines.join("\n");
}

function toPlanDocument(plan: Omit<Plan, "constraints">): PlanDocument {
  return {
    summary: plan.summary,
    mermaid: plan.mermaid,
    tasks: plan.tasks.map((t) => ({
      id: t.id,
      title: t.title,
      description: t.description,
      dependsOn: t.dependsOn,
      files: t.files,
      ...(t.checks?.length ? { checks: t.checks } : {}),
    })),
    acceptanceCriteria: plan.acceptanceCriteria.map((c) => ({ id: c.id, description: c.description, command: c.command })),
    risks: plan.risks,
  };
}

/** The planner's Plan from a stored PlanDocument (the validator and implementer take the agents' type). */
export async function toAgentPlan(plan: PlanDocument): Promise<Plan> {
  return {
    constraints: await extractConstraints(plan.mermaid),
    summary: plan.summary,
    mermaid: plan.mermaid,
    tasks: plan.tasks.map((t) => ({
      id: t.id,
      title: t.title,
      description: t.description ?? "",
      dependsOn: t.dependsOn ?? [],
      files: t.files ?? [],
      checks: t.checks ?? [],
    })),
    acceptanceCriteria: plan.acceptanceCriteria.map((c, i) => ({ id: c.id ?? `ac${i + 1}`, description: c.description, command: c.command })),
    risks: plan.risks ?? [],
  };
}

export async function recordPlan({
  runId,
  stepKey,
  plan: doc,
  version,
  edited,
  by,
  feedback,
  answered,
}: {
  runId: string;
  stepKey: string;
  plan: PlanDocument;
  version: number;
  edited?: boolean;
  by?: string;
  feedback?: string | null;
  /** This version answers a person's question on a plan gate: PLAN_QUESTION_ANSWERED is recorded with it. */
  answered?: { gateId: string; question: string; answer: string };
}) {
  const run = await loadRun({ runId });
  const spec = await commitSpec({
    repoPath: run.repoPath,
    branch: run.branch,
    runId,
    title: firstLine(run.request),
    version,
    status: edited ? "edited" : "draft",
    request: run.request,
    mermaid: doc.mermaid,
    tasks: doc.tasks.map((t) => ({ id: t.id, title: t.title, dependsOn: t.dependsOn })),
    summary: doc.summary,
    planHash: planHash(doc),
  });
  await write(async (tx) => {
    const current = await tx.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
    if (current && TERMINAL_STATUSES.has(current.status as RunState["status"])) throw new RunEndedError(current.status);
    const result = await appendEventsTx(
      tx,
      runId,
      [
        edited
          ? { type: "PLAN_EDITED", payload: { version, by: by ?? "unknown", plan: doc, path: spec.path, commitSha: spec.sha } }
          : { type: "PLAN_CREATED", payload: { version, plan: doc, path: spec.path, commitSha: spec.sha, feedback: feedback ?? null } },
        ...(answered ? [{ type: "PLAN_QUESTION_ANSWERED" as const, payload: { ...answered, version } }] : []),
      ],
      { stepKey },
    );
    if (!result.duplicate) {
      await tx.insert(artifacts).values({
        id: newId("art"),
        workflowRunId: runId,
        stage: "planning",
        type: "spec",
        path: spec.path,
        commitSha: spec.sha,
        version,
      });
    }
  });
  return { path: spec.path, sha: spec.sha };
}
