import { and, desc, eq, inArray } from "drizzle-orm";
import { z } from "zod";
import { getDb, write, type Tx } from "@/lib/db";
import { clarificationRequests, gates, workflowEvents } from "@/lib/db/schema";
import { pendingPauseRequest } from "@/lib/db/queries/runs";
import { appendEventsTx, eventTypeIn } from "@/lib/db/event-store";
import { AppError } from "@/lib/errors";
import { requireProjectRole, type SessionUser } from "@/lib/auth/guard";
import { sanitizeDiagram, validateMermaid } from "@/lib/mermaid";
import { redact, redactBase64File, redactDeep } from "@/lib/redact";

/** Decisions are stored (gates, events) and later read by models: a secret typed into one is redacted on the way in. */
const redacted = <T>(value: T): T => redactDeep(value);
import { TERMINAL_STATUSES, type NewRunEvent, type PlanDocument } from "@/lib/workflow";
import { getVisibleRun } from "./service";
import { applyPlanEdits } from "./plan-edits";
import { planHash } from "@/lib/workflow/plan-hash";
import { mayDecideEscalated } from "./deadlines";

/*
 * Human decisions. Each is written to the database first — the gate/clarification row and the run's event in ONE
 * transaction, guarded by `status = 'pending'` so that of N concurrent identical decisions exactly one applies — and
 * announced afterwards by the caller (an Inngest event). The workflow re-reads the stored decision, so an announcement
 * that is lost or early never loses a decision.
 */

export const planTaskSchema = z.strictObject({
  id: z.string().trim().min(1).max(100),
  title: z.string().trim().min(1).max(500),
  description: z.string().max(20_000).optional(),
  dependsOn: z.array(z.string().max(100)).max(100).optional(),
  files: z.array(z.string().max(1000)).max(500).optional(),
  /** The task's own acceptance commands, run right after it (per-task verification). */
  checks: z.array(z.string().trim().min(1, "must not be empty").max(2_000)).max(20).optional(),
});

export const acceptanceCriterionSchema = z.strictObject({
  id: z.string().trim().min(1).max(100).optional(),
  description: z.string().trim().min(1, "must say what is checked").max(5_000),
  /** Runs in the repository during validation; exit 0 = the criterion holds. */
  command: z.string().trim().min(1, "must not be empty (leave it out for a criterion without a command)").max(2_000).optional(),
});

/** A scope entry: a relative path inside the repository (a file or a folder), never absolute or climbing out. */
const scopePath = z
  .string()
  .trim()
  .min(1, "must not be empty")
  .max(1000)
  .refine((p) => !p.startsWith("/") && !/^[A-Za-z]:/.test(p) && !p.split(/[\\/]/).includes(".."), "must be a path inside the repository (relative, no ..)");

export const editedPlanSchema = z
  .strictObject({
    // Stored as sanitized: no external images or links in labels (see lib/mermaid/sanitize.ts).
    mermaid: z.string().trim().min(1, "must not be empty").max(100_000).transform(sanitizeDiagram),
    // Each task's `files` is its scope: validation fails changes outside the union of them.
    tasks: z.array(planTaskSchema.extend({ files: z.array(scopePath).max(500).optional() })).max(200).optional(),
    acceptanceCriteria: z.array(acceptanceCriterionSchema).min(1, "keep at least one criterion").max(100).optional(),
    summary: z.string().max(5_000).optional(),
  })
  .superRefine((plan, ctx) => {
    const ids = new Set<string>();
    for (const [i, task] of (plan.tasks ?? []).entries()) {
      if (ids.has(task.id)) ctx.addIssue({ code: "custom", path: ["tasks", i, "id"], message: `"${task.id}" is used by another task; ids must be unique` });
      ids.add(task.id);
    }
    for (const [i, task] of (plan.tasks ?? []).entries()) {
      for (const dep of task.dependsOn ?? []) {
        if (dep === task.id) ctx.addIssue({ code: "custom", path: ["tasks", i, "dependsOn"], message: "a task cannot depend on itself" });
        else if (!ids.has(dep)) ctx.addIssue({ code: "custom", path: ["tasks", i, "dependsOn"], message: `"${dep}" is not a task of this plan` });
      }
    }
    const criteria = new Set<string>();
    for (const [i, c] of (plan.acceptanceCriteria ?? []).entries()) {
      if (c.id && criteria.has(c.id)) ctx.addIssue({ code: "custom", path: ["acceptanceCriteria", i, "id"], message: `"${c.id}" is used by another criterion` });
      if (c.id) criteria.add(c.id);
    }
    if (plan.tasks && hasCycle(plan.tasks)) ctx.addIssue({ code: "custom", path: ["tasks"], message: "the dependencies form a cycle; tasks must have an order" });
  });

/** Whether tasks' dependsOn form a cycle (then no order does them all). */
function hasCycle(tasks: Array<{ id: string; dependsOn?: string[] }>): boolean {
  const deps = new Map(tasks.map((t) => [t.id, t.dependsOn ?? []]));
  const state = new Map<string, "visiting" | "done">();
  const visit = (id: string): boolean => {
    if (state.get(id) === "done") return false;
    if (state.get(id) === "visiting") return true;
    state.set(id, "visiting");
    if ((deps.get(id) ?? []).some((d) => deps.has(d) && visit(d))) return true;
    state.set(id, "done");
    return false;
  };
  return tasks.some((t) => visit(t.id));
}

export const approveSchema = z
  .strictObject({
    gateId: z.string().max(100).optional(),
    notes: z.string().max(20_000).optional(),
    editedPlan: editedPlanSchema.optional(),
    /** An escalated question's answer, typed as the question asked it (see answerSchema). */
    response: z.lazy(() => responseSchema).optional(),
  })
  .transform(redacted);

export const askBackSchema = z
  .strictObject({
    gateId: z.string().max(100).optional(),
    question: z.string({ error: "is required" }).trim().min(1, "must ask the planner something").max(5_000),
  })
  .transform(redacted);

export const rejectSchema = z
  .strictObject({
    gateId: z.string().max(100).optional(),
    feedback: z.string({ error: "is required" }).trim().min(1, "must say what to change").max(20_000),
  })
  .transform(redacted);

export const fixDecisionSchema = z
  .strictObject({
    gateId: z.string().max(100).optional(),
    decision: z.enum(["retry", "accept", "cancel"], { error: 'must be "retry", "accept" or "cancel"' }),
    notes: z.string().max(20_000).optional(),
  })
  .transform(redacted);

export const cancelSchema = z.strictObject({ reason: z.string().max(2_000).optional() }).transform(redacted);
export const resumeSchema = z
  .strictObject({
    minutes: z.number().int().min(1).max(60 * 24 * 7).optional(),
    notes: z.string().max(2_000).optional(),
    /** Only for a run paused with an invalid plan: the plan fixed by hand, which the run then uses. */
    editedPlan: editedPlanSchema.optional(),
  })
  .transform(redacted);

export type GateRow = typeof gates.$inferSelect;
export type ClarificationRow = typeof clarificationRequests.$inferSelect;

async function findGate(tx: Tx, runId: string, gateId: string | undefined): Promise<GateRow> {
  const gate = gateId
    ? await tx.query.gates.findFirst({ where: and(eq(gates.id, gateId), eq(gates.workflowRunId, runId)) })
    : await tx.query.gates.findFirst({ where: eq(gates.workflowRunId, runId), orderBy: desc(gates.gateNumber) });
  if (!gate) throw new AppError("not_found:gate", gateId ? `Gate ${gateId} does not exist on this run.` : "This run has no gate.");
  return gate;
}

function alreadyDecided(gate: GateRow): AppError {
  const when = gate.decidedAt ? ` at ${gate.decidedAt.toISOString()}` : "";
  return new AppError(
    "conflict:gate",
    gate.status === "pending"
      ? `Gate ${gate.gateNumber} is not waiting for this decision.`
      : `Gate ${gate.gateNumber} is not pending: it was ${gate.status}${gate.decidedBy ? ` by ${gate.decidedBy}` : ""}${when}.`,
    { details: { gateId: gate.id, status: gate.status } },
  );
}

/** Mark a pending gate decided; exactly one concurrent caller wins, the rest get 409. */
async function claimGate(
  tx: Tx,
  gate: GateRow,
  change: { status: string; decision: string; decidedBy: string; notes?: string | null; payload?: Record<string, unknown> },
) {
  const updated = await tx
    .update(gates)
    .set({ ...change, decidedAt: new Date() })
    .where(and(eq(gates.id, gate.id), eq(gates.status, "pending")))
    .returning();
  if (updated.length !== 1) {
    const current = (await tx.query.gates.findFirst({ where: eq(gates.id, gate.id) })) ?? gate;
    throw alreadyDecided(current);
  }
  return updated[0]!;
}

/** Validate an edited plan with mermaid's own grammar; a 400 names the line. */
export async function checkEditedPlan(plan: z.output<typeof editedPlanSchema>): Promise<void> {
  try {
    await validateMermaid(plan.mermaid);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new AppError("bad_request:mermaid", `editedPlan.mermaid: ${message}`);
  }
}

/**
 * The shared shape of every gate decision: the caller may decide on this run, the gate is found and fits, it is claimed
 * (exactly one concurrent caller wins) and the run's events are appended — all in one transaction.
 */
export async function decide({
  user,
  runId,
  gateId,
  check,
  claim,
  events,
}: {
  user: SessionUser;
  runId: string;
  gateId: string | undefined;
  check: (gate: GateRow) => void;
  claim: Omit<Parameters<typeof claimGate>[2], "decidedBy">;
  events: (gate: GateRow) => NewRunEvent[];
}): Promise<GateRow> {
  await getVisibleRun({ user, runId, action: "decide" }).catch(async (error) => {
    // Not an approver: still allowed as the backup approver a gate's deadline escalated it to (config.deadlines).
    if (!(error instanceof AppError && error.type === "forbidden")) throw error;
    const run = await getVisibleRun({ user, runId });
    // No such open gate: the caller's lack of the role is the answer, not a 404 about a gate they may not decide anyway.
    const gate = await write((tx) => findGate(tx, runId, gateId)).catch(() => {
      throw error;
    });
    if (!(await mayDecideEscalated({ runId, projectId: run.projectId, subject: { type: "gate", id: gate.id }, userId: user.id }))) throw error;
  });
  return write(async (tx) => {
    const gate = await findGate(tx, runId, gateId);
    check(gate);
    const decided = await claimGate(tx, gate, { ...claim, decidedBy: user.id });
    await appendEventsTx(tx, runId, events(gate));
    return decided;
  });
}

/**
 * The hash of the plan a plan gate's approval approves: the gate's plan with the person's edits applied exactly as the
 * workflow applies them (applyPlanEdits), so the run's plan and this hash agree. Frozen from here: a later change to
 * it needs a new approval, and the validator checks the plan it validates against this hash.
 */
function approvedHash(gate: GateRow, editedPlan: z.output<typeof approveSchema>["editedPlan"]): { planHash?: string } {
  const plan = gate.kind === "plan" ? (gate.context as { plan?: PlanDocument } | null)?.plan : undefined;
  if (!plan) return {};
  return { planHash: planHash(editedPlan ? applyPlanEdits({ drafted: plan, edited: editedPlan }) : plan) };
}

function notAFixGate(gate: GateRow) {
  if (gate.kind === "fix") {
    throw new AppError("conflict:gate", "This gate asks for a fix decision: use POST /api/runs/:id/fix-decision.");
  }
  // A budget gate has its own ways on (raise, finish the task then stop); a plain approve or reject would say neither.
  if (gate.kind === "budget") {
    throw new AppError("conflict:gate", 'This gate is a budget gate: use POST /api/runs/:id/budget ({action: "raise" | "finish_task"}) or POST /api/runs/:id/cancel.');
  }
}

export async function approveGate({
  user,
  runId,
  input,
}: {
  user: SessionUser;
  runId: string;
  input: z.output<typeof approveSchema>;
}) {
  if (input.editedPlan) await checkEditedPlan(input.editedPlan);
  return decide({
    user,
    runId,
    gateId: input.gateId,
    check: (gate) => {
      notAFixGate(gate);
      if (input.editedPlan && gate.kind !== "plan") {
        throw new AppError("bad_request:gate", "editedPlan: only a plan gate takes an edited plan.");
      }
      if (input.response !== undefined) {
        if (gate.kind !== "escalation") throw new AppError("bad_request:gate", "response: only an escalated question takes a typed response.");
        // Checked as the question asked it: a chosen option must be one offered, a file must be a file.
        const context = (gate.context ?? {}) as { responseType?: string; options?: string[] };
        checkAnswer({ responseType: context.responseType ?? "text", options: context.options?.length ? context.options : null }, input.response);
      }
    },
    claim: {
      status: "approved",
      decision: "approve",
      notes: input.notes ?? null,
      payload: input.editedPlan
        ? { editedPlan: input.editedPlan }
        : input.response !== undefined
          ? { response: redactAnswer(input.response) }
          : undefined,
    },
    events: (gate) => [
      {
        type: "APPROVAL_GRANTED",
        payload: { gateId: gate.id, by: user.id, notes: input.notes ?? null, editedPlan: !!input.editedPlan, ...approvedHash(gate, input.editedPlan) },
      },
    ],
  });
}

/**
 * "Ask back" on a plan gate: a person's question to the planner (PLAN_QUESTION_ASKED). The planner answers it and
 * gives a revised plan (a new version, at a new plan gate, with PLAN_QUESTION_ANSWERED); unlike a rejection it does
 * not count toward limits.maxReplans.
 */
export async function askBack({ user, runId, input }: { user: SessionUser; runId: string; input: z.output<typeof askBackSchema> }) {
  return decide({
    user,
    runId,
    gateId: input.gateId,
    check: (gate) => {
      if (gate.kind !== "plan") throw new AppError("conflict:gate", `Gate ${gate.gateNumber} is a ${gate.kind} gate; only a plan gate takes a question to the planner.`);
    },
    claim: { status: "asked", decision: "ask", notes: input.question },
    events: (gate) => [{ type: "PLAN_QUESTION_ASKED", payload: { gateId: gate.id, by: user.id, question: input.question } }],
  });
}

export async function rejectGate({
  user,
  runId,
  input,
}: {
  user: SessionUser;
  runId: string;
  input: z.output<typeof rejectSchema>;
}) {
  return decide({
    user,
    runId,
    gateId: input.gateId,
    check: notAFixGate,
    claim: { status: "rejected", decision: "reject", notes: input.feedback },
    events: (gate) => [{ type: "APPROVAL_REJECTED", payload: { gateId: gate.id, by: user.id, feedback: input.feedback } }],
  });
}

export async function decideFix({
  user,
  runId,
  input,
}: {
  user: SessionUser;
  runId: string;
  input: z.output<typeof fixDecisionSchema>;
}) {
  return decide({
    user,
    runId,
    gateId: input.gateId,
    check: (gate) => {
      if (gate.kind !== "fix") throw new AppError("conflict:gate", `Gate ${gate.gateNumber} is a ${gate.kind} gate, not a fix decision.`);
    },
    claim: { status: "decided", decision: input.decision, notes: input.notes ?? null },
    events: (gate) => [
      { type: "FIX_DECISION_MADE", payload: { gateId: gate.id, by: user.id, decision: input.decision } },
      ...(input.decision === "cancel"
        ? [{ type: "RUN_CANCELLED", payload: { by: user.id, reason: "cancelled at the fix decision" } } satisfies NewRunEvent]
        : []),
    ],
  });
}

/** Cancel a run in any non-final state; pending gates and questions are closed with it. */
export async function cancelRun({ user, runId, reason }: { user: SessionUser; runId: string; reason?: string }) {
  const run = await getVisibleRun({ user, runId, action: "decide" });
  if (TERMINAL_STATUSES.has(run.status)) {
    throw new AppError("conflict:run", `The run is already ${run.status}; there is nothing to cancel.`);
  }
  return write(async (tx) => {
    const { state } = await appendEventsTx(tx, runId, [{ type: "RUN_CANCELLED", payload: { by: user.id, reason } }]);
    await tx
      .update(gates)
      .set({ status: "cancelled", decidedAt: new Date(), decidedBy: user.id })
      .where(and(eq(gates.workflowRunId, runId), eq(gates.status, "pending")));
    await tx
      .update(clarificationRequests)
      .set({ status: "cancelled" })
      .where(and(eq(clarificationRequests.workflowRunId, runId), eq(clarificationRequests.status, "pending")));
    return state;
  });
}

export const mergeSchema = z.strictObject({ notes: z.string().trim().max(2000, "notes: at most 2000 characters").optional() });

/**
 * A person's decision to merge a completed run that was delivered without a merge: accepted after failed validation
 * (never merged automatically), or finished with autoMerge off. Recorded as MERGE_DECIDED; the run-merge function then
 * squash-merges (local) or merges the pull request (GitHub) and records PR_MERGED or MERGE_FAILED. 409 for a run that
 * is not completed, already merged, or has a merge decision under way. Checked and written in one transaction, so two
 * people clicking at once make one decision.
 */
export async function decideMerge({ user, runId, notes }: { user: SessionUser; runId: string; notes?: string }) {
  const run = await getVisibleRun({ user, runId, action: "decide" });
  if (run.status !== "completed") {
    throw new AppError("conflict:run", `The run is ${run.status.replaceAll("_", " ")}; only a completed run can be merged.`);
  }
  return write(async (tx) => {
    const [last] = await tx
      .select({ type: workflowEvents.type })
      .from(workflowEvents)
      .where(and(eq(workflowEvents.workflowRunId, runId), eventTypeIn(["MERGE_DECIDED", "MERGE_FAILED", "PR_MERGED"])))
      .orderBy(desc(workflowEvents.sequence))
      .limit(1);
    if (last?.type === "PR_MERGED") throw new AppError("conflict:run", "The run is already merged.");
    if (last?.type === "MERGE_DECIDED") throw new AppError("conflict:run", "A merge of this run is already under way.");
    const { state } = await appendEventsTx(tx, runId, [{ type: "MERGE_DECIDED", payload: { by: user.id, notes: notes ? redact(notes) : null } }]);
    return state;
  });
}

export const pauseSchema = z.strictObject({ note: z.string().trim().max(2000, "note: at most 2000 characters").optional() });

/**
 * Ask a computing run to pause (PAUSE_REQUESTED): it parks at its next turn boundary — work in progress committed to
 * the branch, sandbox freed, no slot held — and waits for POST /resume. 409 unless the run is computing, or when a
 * pause is already requested.
 */
export async function requestPause({ user, runId, note }: { user: SessionUser; runId: string; note?: string }) {
  const run = await getVisibleRun({ user, runId, action: "decide" });
  if (run.status !== "running") {
    throw new AppError("conflict:run", `The run is ${run.status.replaceAll("_", " ")}; only a running run can be paused.`);
  }
  // Planning, implementation and validation pause at their next step boundary (an implementation turn, or the start of
  // the next stage). Delivery is the run's last step, with no boundary left to stop at.
  if (run.currentStage === "delivery") {
    throw new AppError("conflict:run", "The run is delivering its work (its last step) and cannot pause now; let it finish, or cancel it.");
  }
  if (await pendingPauseRequest({ runId })) throw new AppError("conflict:run", "A pause is already requested; the run pauses at its next step.");
  const { state } = await write((tx) =>
    appendEventsTx(tx, runId, [{ type: "PAUSE_REQUESTED", payload: { by: user.id, note: note ? redact(note) : null } }]),
  );
  return state;
}

/**
 * Resume a paused run: `retry` after a model outage or failure, `extend` after a stage timeout. A run paused for an
 * invalid plan may instead be resumed with the plan fixed by hand (`editedPlan`, checked with Mermaid's grammar): the
 * planner's draft with these edits becomes the run's next plan version.
 */
export async function resumeRun({
  user,
  runId,
  action,
  editedPlan,
}: {
  user: SessionUser;
  runId: string;
  action: "retry" | "extend";
  editedPlan?: z.output<typeof editedPlanSchema>;
}) {
  const run = await getVisibleRun({ user, runId, action: "decide" });
  if (run.status !== "paused") {
    throw new AppError("conflict:run", `The run is ${run.status.replaceAll("_", " ")}, not paused; there is nothing to ${action}.`);
  }
  if (action === "extend" && run.pauseReason?.reason !== "timeout") {
    throw new AppError("conflict:run", `The run is paused for ${run.pauseReason?.reason ?? "another reason"}, not a timeout; use retry.`);
  }
  let fixed: PlanDocument | null = null;
  if (editedPlan) {
    if (run.pauseReason?.reason !== "invalid_plan") {
      throw new AppError(
        "conflict:run",
        `editedPlan: the run is paused for ${run.pauseReason?.reason?.replaceAll("_", " ") ?? "another reason"}, not an invalid plan; resume it without a plan.`,
      );
    }
    await checkEditedPlan(editedPlan);
    const draft: PlanDocument = run.pauseReason.plan ?? { summary: "", mermaid: "", tasks: [], acceptanceCriteria: [] };
    fixed = applyPlanEdits({ drafted: draft, edited: editedPlan });
    if (fixed.tasks.length === 0) {
      throw new AppError("bad_request:api", "editedPlan.tasks: the planner's draft has no tasks to keep; give at least one task.");
    }
  }
  const { state } = await write((tx) =>
    appendEventsTx(tx, runId, [{ type: "RUN_RESUMED", payload: { by: user.id, action, ...(fixed ? { editedPlan: fixed } : {}) } }]),
  );
  return state;
}

// ---------------------------------------------------------------------------------------------------------------------
// Clarifications

const MAX_UPLOAD_BYTES = 256 * 1024;

const responseSchema = z.union(
    [
      z.string().trim().min(1, "must not be empty").max(20_000),
      z.array(z.string().max(1_000)).min(1, "choose at least one option").max(50),
      z.strictObject({
        fileName: z.string().trim().min(1).max(255),
        contentBase64: z
          .string()
          .max(Math.ceil((MAX_UPLOAD_BYTES * 4) / 3) + 4, `must be at most ${MAX_UPLOAD_BYTES} bytes`)
          // Buffer.from(…, "base64") silently skips anything that is not base64: refuse it instead of storing garbage.
          .regex(/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/, "must be base64 (A-Z a-z 0-9 + /, padded with =)"),
        contentType: z.string().max(200).optional(),
      }),
    ],
    { error: "must be text, a list of chosen options, or a file {fileName, contentBase64}" },
  );

export const answerSchema = z.strictObject({ response: responseSchema });

/** An answer as it may be stored and shown to a model: redacted, an uploaded file in its decoded text (re-encoded). */
function redactAnswer(response: z.output<typeof answerSchema>["response"]): z.output<typeof answerSchema>["response"] {
  if (typeof response === "object" && !Array.isArray(response)) {
    return { ...redacted(response), contentBase64: redactBase64File(response.contentBase64) };
  }
  return redacted(response);
}

/** Check an answer against the question's response type and options. */
export function checkAnswer(
  clarification: Pick<ClarificationRow, "responseType" | "options">,
  response: z.output<typeof answerSchema>["response"],
): void {
  const options = clarification.options ?? [];
  switch (clarification.responseType) {
    case "text":
      if (typeof response !== "string") throw new AppError("bad_request:clarification", "response: this question takes text.");
      return;
    case "single_choice":
      if (typeof response !== "string" || !options.includes(response)) {
        throw new AppError("bad_request:clarification", `response: choose one of: ${options.join(", ")}.`);
      }
      return;
    case "multiple_choice":
      if (!Array.isArray(response) || response.some((r) => !options.includes(r)) || new Set(response).size !== response.length) {
        throw new AppError("bad_request:clarification", `response: choose one or more distinct options of: ${options.join(", ")}.`);
      }
      return;
    case "file":
      if (typeof response !== "object" || Array.isArray(response)) {
        throw new AppError("bad_request:clarification", "response: this question takes a file {fileName, contentBase64}.");
      }
      return;
    default:
      throw new AppError("bad_request:clarification", `Unknown response type ${clarification.responseType}.`);
  }
}

/** An approver of the project, or the backup approver the question's deadline escalated it to (config.deadlines). */
async function requireClarificationDecider({ user, runId, projectId, clarificationId }: { user: SessionUser; runId: string; projectId: string; clarificationId: string }) {
  await requireProjectRole({ user, projectId, action: "decide", notFound: "not_found:clarification" }).catch(async (error) => {
    if (!(error instanceof AppError && error.type === "forbidden")) throw error;
    if (!(await mayDecideEscalated({ runId, projectId, subject: { type: "clarification", id: clarificationId }, userId: user.id }))) throw error;
  });
}

export async function answerClarification({
  user,
  clarificationId,
  response,
}: {
  user: SessionUser;
  clarificationId: string;
  response: z.output<typeof answerSchema>["response"];
}) {
  const db = await getDb();
  const clarification = await db.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, clarificationId) });
  if (!clarification) throw new AppError("not_found:clarification");
  const run = await getVisibleRun({ user, runId: clarification.workflowRunId }).catch((error) => {
    // Not a member: the question does not exist for them.
    if (error instanceof AppError && error.type === "not_found") throw new AppError("not_found:clarification");
    throw error;
  });
  await requireClarificationDecider({ user, runId: run.id, projectId: run.projectId, clarificationId });
  checkAnswer(clarification, response);
  // Checked as given (a chosen option must match), stored redacted.
  const stored = redactAnswer(response);
  return write(async (tx) => {
    const updated = await tx
      .update(clarificationRequests)
      .set({ status: "answered", response: stored, answeredBy: user.id, answeredAt: new Date() })
      .where(and(eq(clarificationRequests.id, clarificationId), eq(clarificationRequests.status, "pending")))
      .returning();
    if (updated.length !== 1) {
      throw new AppError("conflict:clarification", `This question is not open: it is ${clarification.status === "pending" ? "answered" : clarification.status}.`);
    }
    await appendEventsTx(tx, clarification.workflowRunId, [
      { type: "CLARIFICATION_ANSWERED", payload: { clarificationId, by: user.id } },
    ]);
    return updated[0]!;
  });
}

/**
 * Skip a question: the asking stage proceeds with its best judgement and notes the assumption (CLARIFICATION_IGNORED).
 * Same guards as an answer; a question already answered or skipped is a 409.
 */
export async function skipClarification({ user, clarificationId }: { user: SessionUser; clarificationId: string }) {
  const db = await getDb();
  const clarification = await db.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, clarificationId) });
  if (!clarification) throw new AppError("not_found:clarification");
  const run = await getVisibleRun({ user, runId: clarification.workflowRunId }).catch((error) => {
    if (error instanceof AppError && error.type === "not_found") throw new AppError("not_found:clarification");
    throw error;
  });
  await requireClarificationDecider({ user, runId: run.id, projectId: run.projectId, clarificationId });
  return write(async (tx) => {
    const updated = await tx
      .update(clarificationRequests)
      .set({ status: "ignored", response: null, answeredBy: user.id, answeredAt: new Date() })
      .where(and(eq(clarificationRequests.id, clarificationId), eq(clarificationRequests.status, "pending")))
      .returning();
    if (updated.length !== 1) throw new AppError("conflict:clarification", `This question is not open: it is ${clarification.status}.`);
    await appendEventsTx(tx, clarification.workflowRunId, [{ type: "CLARIFICATION_IGNORED", payload: { clarificationId, by: user.id } }]);
    return updated[0]!;
  });
}

export type { PlanDocument };
