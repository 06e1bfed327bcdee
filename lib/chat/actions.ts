import { and, desc, eq } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { chatDecisions, clarificationRequests, gates, users, workflowEvents, workflowRuns } from "@/lib/db/schema";
import { eventTypeIn } from "@/lib/db/event-store";
import { getMembership } from "@/lib/db/queries/members";
import { isAppError, type AppError } from "@/lib/errors";
import type { SessionUser } from "@/lib/auth/guard";
import { newUlid } from "@/lib/ids";
import { log } from "@/lib/log";
import type { Answer } from "@/lib/runs/gates/answer";
import { budgetMetric, suggestedRaise, VERBS, type ChatCode, type Verb } from "@/lib/notifications/buttons";
import { linkedUser, type ChatIdentity } from "./link";

/*
 * A button pressed (or a form sent) in Slack or Telegram, applied as the linked user through the very functions the
 * HTTP routes call (passed in as ChatDeciders: they store the decision, then announce it), so the routes' role rules
 * and exactly-once hold: of two presses, from one place or two, one decision applies and the other is told who decided
 * it and when. Every applied decision is recorded with the user, the chat account and the place (chat_decisions).
 */

/** The decision functions of inngest/decide.ts and the run start, handed in by the route (lib does not import inngest). */
export type ChatDeciders = {
  approve: (a: { user: SessionUser; runId: string; input: { gateId?: string } }) => Promise<unknown>;
  reject: (a: { user: SessionUser; runId: string; input: { gateId?: string; feedback: string } }) => Promise<unknown>;
  askBack: (a: { user: SessionUser; runId: string; input: { gateId?: string; question: string } }) => Promise<unknown>;
  fix: (a: { user: SessionUser; runId: string; input: { gateId?: string; decision: "retry" | "accept" | "cancel" } }) => Promise<unknown>;
  answer: (a: { user: SessionUser; clarificationId: string; response: Answer }) => Promise<unknown>;
  resume: (a: { user: SessionUser; runId: string; action: "retry" | "extend" }) => Promise<unknown>;
  cancel: (a: { user: SessionUser; runId: string; reason?: string }) => Promise<unknown>;
  budget: (a: {
    user: SessionUser;
    runId: string;
    input: { gateId?: string; action: "raise" | "finish_task"; tokens?: number; costUsd?: number; minutes?: number };
  }) => Promise<unknown>;
  startRun: (a: { user: SessionUser; projectId: string; request: string }) => Promise<{ id: string }>;
};

export type ChatOutcome = { ok: boolean; text: string };

const when = (at: Date) => `${at.toISOString().replace("T", " ").slice(0, 16)} UTC`;

async function nameOf(userId: string | null | undefined): Promise<string> {
  if (!userId) return "someone";
  const db = await getDb();
  const user = await db.query.users.findFirst({ where: eq(users.id, userId) });
  return user?.name ?? user?.email ?? userId;
}

export function notLinkedText(provider: ChatIdentity["provider"]): string {
  const how = provider === "slack" ? "`/gatehouse link <code>`" : "/link <code> to this bot";
  return `This ${provider === "slack" ? "Slack" : "Telegram"} account is not linked to a Gatehouse user, so it can decide nothing. Open Gatehouse → Settings → Chat accounts, create a code, and send ${how}.`;
}

/** The stored decision on a subject that is no longer open: "already decided by … at …". */
async function staleText(code: ChatCode): Promise<string | null> {
  const db = await getDb();
  if (code.id.startsWith("gate_")) {
    const gate = await db.query.gates.findFirst({ where: eq(gates.id, code.id) });
    if (!gate || gate.status === "pending") return null;
    return `Already decided by ${await nameOf(gate.decidedBy)}${gate.decidedAt ? ` at ${when(gate.decidedAt)}` : ""}: ${gate.status}.`;
  }
  if (code.id.startsWith("clr_")) {
    const row = await db.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, code.id) });
    if (!row || row.status === "pending") return null;
    if (row.status === "cancelled") return "This question was closed: its run was cancelled.";
    return `Already answered by ${await nameOf(row.answeredBy)}${row.answeredAt ? ` at ${when(row.answeredAt)}` : ""}.`;
  }
  const run = await db.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, code.id) });
  if (!run || run.status === "paused") return null;
  const [last] = await db
    .select({ payload: workflowEvents.payload, timestamp: workflowEvents.timestamp })
    .from(workflowEvents)
    .where(and(eq(workflowEvents.workflowRunId, code.id), eventTypeIn(["RUN_RESUMED", "RUN_CANCELLED"])))
    .orderBy(desc(workflowEvents.sequence))
    .limit(1);
  const by = (last?.payload as { by?: string } | undefined)?.by;
  return last && by
    ? `Already decided by ${await nameOf(by)} at ${when(new Date(last.timestamp))}: the run is ${run.status.replaceAll("_", " ")}.`
    : `The run is ${run.status.replaceAll("_", " ")}; there is nothing to ${VERBS[code.verb]}.`;
}

/** The run and project a code's subject belongs to, or null when it does not exist. */
export async function subjectOf(code: ChatCode): Promise<{ runId: string; projectId: string } | null> {
  const db = await getDb();
  let runId: string | undefined = code.id;
  if (code.id.startsWith("gate_")) runId = (await db.query.gates.findFirst({ where: eq(gates.id, code.id) }))?.workflowRunId;
  if (code.id.startsWith("clr_")) runId = (await db.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, code.id) }))?.workflowRunId;
  if (!runId) return null;
  const run = await db.query.workflowRuns.findFirst({ where: eq(workflowRuns.id, runId) });
  return run ? { runId, projectId: run.projectId } : null;
}

/** Why a linked user may not decide here: the role rule's own answer, in words. */
async function refusalText(user: SessionUser, projectId: string, error: AppError): Promise<string> {
  const role = await getMembership({ projectId, userId: user.id });
  if (!role) return "Refused: you are not a member of this run's project.";
  if (error.type === "forbidden") return `Refused: you are a ${role} on this project; only approvers and owners may decide.`;
  return `Refused: ${error.message}`;
}

/**
 * Apply a pressed button (with the text or answer it needs) as the chat account's linked user. Never throws for what
 * the person did wrong: the outcome's text says what happened, fit to show in the chat.
 */
export async function applyChatAction({
  identity,
  place,
  code,
  text,
  response,
  deciders,
}: {
  identity: ChatIdentity;
  /** Where it was pressed, for the record: "slack T1/C2", "telegram chat 42". */
  place: string;
  code: ChatCode;
  /** Feedback (reject), the question (ask back), or a typed answer (tx). */
  text?: string;
  /** A chosen answer that is not a single option (a multiple choice from a Slack modal). */
  response?: Answer;
  deciders: ChatDeciders;
}): Promise<ChatOutcome> {
  const user = await linkedUser(identity);
  if (!user) return { ok: false, text: notLinkedText(identity.provider) };
  const subject = await subjectOf(code);
  if (!subject) return { ok: false, text: "This item no longer exists." };
  const stale = await staleText(code);
  if (stale) return { ok: false, text: stale };
  const { runId } = subject;
  const gateId = code.id;
  try {
    switch (code.verb) {
      case "ap":
        await deciders.approve({ user, runId, input: { gateId } });
        break;
      case "rj":
        if (!text?.trim()) return { ok: false, text: "A rejection needs feedback: say what to change." };
        await deciders.reject({ user, runId, input: { gateId, feedback: text.trim() } });
        break;
      case "ak":
        if (!text?.trim()) return { ok: false, text: "Ask back needs a question for the planner." };
        await deciders.askBack({ user, runId, input: { gateId, question: text.trim() } });
        break;
      case "fr":
      case "fa":
      case "fc":
        await deciders.fix({ user, runId, input: { gateId, decision: code.verb === "fr" ? "retry" : code.verb === "fa" ? "accept" : "cancel" } });
        break;
      case "ch":
      case "tx": {
        const answer = await answerFor(code, text, response);
        if (typeof answer === "object" && "error" in answer) return { ok: false, text: answer.error };
        await deciders.answer({ user, clarificationId: code.id, response: answer });
        break;
      }
      case "rt":
      case "ex":
        await deciders.resume({ user, runId, action: code.verb === "rt" ? "retry" : "extend" });
        break;
      case "cn":
        await deciders.cancel({ user, runId, reason: `cancelled from ${identity.provider}` });
        break;
      case "br":
      case "bx": {
        const raise = await raiseFor(code, text);
        if ("error" in raise) return { ok: false, text: raise.error };
        await deciders.budget({ user, runId, input: { gateId, action: "raise", [raise.metric]: raise.amount } });
        break;
      }
      case "bf":
        await deciders.budget({ user, runId, input: { gateId, action: "finish_task" } });
        break;
      case "bc":
        await deciders.cancel({ user, runId, reason: `cancelled at a budget gate from ${identity.provider}` });
        break;
    }
  } catch (error) {
    if (!isAppError(error)) throw error;
    if (error.type === "conflict") return { ok: false, text: (await staleText(code)) ?? error.message };
    if (error.type === "forbidden" || error.type === "not_found") return { ok: false, text: await refusalText(user, subject.projectId, error) };
    return { ok: false, text: error.message };
  }
  await write((tx) =>
    tx.insert(chatDecisions).values({
      id: `chd_${newUlid().toLowerCase()}`,
      provider: identity.provider,
      externalId: identity.externalId,
      place,
      userId: user.id,
      workflowRunId: runId,
      subjectId: code.id,
      action: VERBS[code.verb],
    }),
  ).catch((error) => log.warn("could not record a chat decision", { error: String(error) }));
  const who = user.name ?? user.id;
  return { ok: true, text: `${capitalize(pastTense(code.verb))} by ${who} (from ${identity.provider === "slack" ? "Slack" : "Telegram"}) at ${when(new Date())}.` };
}

function pastTense(verb: Verb): string {
  const words: Record<Verb, string> = {
    ap: "approved",
    rj: "rejected",
    ak: "asked back",
    fr: "fix retried",
    fa: "accepted anyway",
    fc: "cancelled",
    ch: "answered",
    tx: "answered",
    rt: "retried",
    ex: "extended",
    cn: "cancelled",
    br: "budget raised",
    bx: "budget raised",
    bf: "told to finish the task, then stop,",
    bc: "cancelled",
  };
  return words[verb];
}

const capitalize = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/** How much a budget raise adds: the suggested amount (br), or the typed one (bx), in the gate's own unit. */
async function raiseFor(code: ChatCode, text: string | undefined): Promise<{ metric: "tokens" | "costUsd" | "minutes"; amount: number } | { error: string }> {
  const db = await getDb();
  const gate = await db.query.gates.findFirst({ where: eq(gates.id, code.id) });
  if (code.verb === "br") return suggestedRaise(gate?.context);
  const { metric, unit } = budgetMetric(gate?.context);
  const typed = (text ?? "").trim().replace(/^\$/, "").replaceAll(",", "").replaceAll("_", "");
  const amount = Number(typed);
  if (!typed || !Number.isFinite(amount) || amount <= 0) return { error: `Type how much to add, in ${unit}: a number above 0.` };
  if (metric === "tokens" && !Number.isInteger(amount)) return { error: "Type a whole number of tokens." };
  return { metric, amount };
}

/** The answer a choice button or a typed reply stands for, checked against the question's options. */
async function answerFor(code: ChatCode, text: string | undefined, response: Answer | undefined): Promise<Answer | { error: string }> {
  if (response !== undefined) return response;
  const db = await getDb();
  const row = await db.query.clarificationRequests.findFirst({ where: eq(clarificationRequests.id, code.id) });
  const options = row?.options ?? [];
  if (code.verb === "ch") {
    const chosen = code.option !== undefined ? options[code.option] : undefined;
    if (chosen === undefined) return { error: "That option is not one the question offers." };
    return row?.responseType === "multiple_choice" ? [chosen] : chosen;
  }
  const typed = text?.trim();
  if (!typed) return { error: "The answer is empty: type your answer." };
  if (row?.responseType === "multiple_choice") {
    // "1, 3" or the options' own words, comma-separated.
    const picked = typed.split(",").map((p) => p.trim()).filter(Boolean).map((p) => (/^\d+$/.test(p) ? options[Number(p) - 1] : options.find((o) => o.toLowerCase() === p.toLowerCase())));
    if (picked.some((p) => p === undefined)) return { error: `Choose by number or name among: ${options.map((o, i) => `${i + 1}. ${o}`).join(", ")}.` };
    return [...new Set(picked as string[])];
  }
  if (row?.responseType === "single_choice") {
    const chosen = /^\d+$/.test(typed) ? options[Number(typed) - 1] : options.find((o) => o.toLowerCase() === typed.toLowerCase());
    if (chosen === undefined) return { error: `Choose one of: ${options.map((o, i) => `${i + 1}. ${o}`).join(", ")}.` };
    return chosen;
  }
  return typed;
}

