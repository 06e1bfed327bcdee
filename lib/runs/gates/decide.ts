import { and, desc, eq } from "drizzle-orm";
import type { z } from "zod";
import { getDb, write, type Db, type Tx } from "@/lib/db";
import { gates } from "@/lib/db/schema";
import { appendEventsWith } from "@/lib/db/event-store";
import type { NativeConnection } from "@/lib/db/statements";
import { AppError } from "@/lib/errors";
import type { SessionUser } from "@/lib/auth/guard";
import { redactDeep } from "@/lib/redact";
import type { NewRunEvent } from "@/lib/workflow";
import { getVisibleRun } from "../service";
import { mayDecideEscalated } from "../deadlines";

/*
 * Human decisions. Each is written to the database first — the gate/clarification row and the run's event in ONE
 * transaction, guarded by `status = 'pending'` so that of N concurrent identical decisions exactly one applies — and
 * announced afterwards by the caller (inngest/decide.ts: one function per decision kind). The workflow re-reads the
 * stored decision, so an announcement that is lost or early never loses a decision.
 *
 * This file is the shape every gate decision shares; the kinds are beside it: decide-gate.ts (approve, reject, ask
 * back, fix), decide-budget.ts, decide-run.ts (cancel, pause, resume, merge), decide-clarification.ts (answer, skip).
 */

/** Decisions are stored (gates, events) and later read by models: a secret typed into one is redacted on the way in. */
export const redacted = <T>(value: T): T => redactDeep(value);

export type GateRow = typeof gates.$inferSelect;

/** What every gate decision takes: who decides, on which run, and the request's parsed input. */
export type GateDecision<S extends z.ZodType> = { user: SessionUser; runId: string; input: z.output<S> };

async function findGate(tx: Tx | Db, runId: string, gateId: string | undefined): Promise<GateRow> {
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

type GateChange = { status: string; decision: string; decidedBy: string; notes?: string | null; payload?: Record<string, unknown> };

/** Mark a pending gate decided; exactly one concurrent caller wins, the rest get 409. */
async function claimGate(tx: Tx, gate: GateRow, change: GateChange) {
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

/** A claim that found the gate no longer pending (another decision won): nothing of this one is written. */
class ClaimLost extends Error {}

/**
 * claimGate on the native writer, as one prepared UPDATE (inside appendEventsWith's group commit, with the decision's
 * events): the columns it sets as Drizzle encodes them, and the row as claimGate's RETURNING gives it.
 */
function claimGateNative(w: NativeConnection, gate: GateRow, change: GateChange): GateRow {
  const decidedAt = new Date();
  const set: string[] = ["status = ?", "decision = ?", "decided_by = ?", "decided_at = ?"];
  const args: (string | number | null)[] = [change.status, change.decision, change.decidedBy, decidedAt.getTime()];
  if (change.notes !== undefined) {
    set.push("notes = ?");
    args.push(change.notes);
  }
  if (change.payload !== undefined) {
    set.push("payload = ?");
    args.push(JSON.stringify(change.payload));
  }
  const { rows } = w.execute<{ context: string | null }>(`UPDATE gates SET ${set.join(", ")} WHERE id = ? AND status = 'pending' RETURNING context`, [...args, gate.id]);
  if (rows.length !== 1) throw new ClaimLost();
  const context = rows[0]!.context;
  return { ...gate, ...change, decidedAt, context: context === null ? null : (JSON.parse(context) as GateRow["context"]) };
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
  // The gate is read before the write (its kind and context, which the checks and events look at, are fixed when it
  // opens); the claim, guarded by `status = 'pending'`, and the events are one transaction: on a file database the
  // native writer's group commit, not a Drizzle transaction (a few ms of the decision's route).
  const gate = await findGate(await getDb(), runId, gateId);
  check(gate);
  const change = { ...claim, decidedBy: user.id };
  try {
    const { value } = await appendEventsWith(runId, { native: (w) => claimGateNative(w, gate, change), tx: (tx) => claimGate(tx, gate, change) }, events(gate));
    return value;
  } catch (error) {
    if (!(error instanceof ClaimLost)) throw error;
    throw alreadyDecided((await findGate(await getDb(), runId, gate.id).catch(() => null)) ?? gate);
  }
}
