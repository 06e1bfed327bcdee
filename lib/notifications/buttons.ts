import type { clarificationRequests, gates } from "@/lib/db/schema";

/*
 * The buttons a notice carries (Slack Block Kit buttons, Telegram inline keyboards), by what it asks. lib/chat applies
 * them when pressed (applyChatAction).
 */

/**
 * What a button carries, short enough for Telegram's 64-byte callback_data: `<verb>:<id>[:<option index>]`. The verbs
 * that need text first (reject, ask back, a text answer) open a Slack modal or ask for a Telegram reply.
 */
export const VERBS = {
  ap: "approve",
  rj: "reject",
  ak: "ask back",
  fr: "retry the fix",
  fa: "accept anyway",
  fc: "cancel at the fix decision",
  ch: "answer",
  tx: "answer",
  rt: "retry",
  ex: "extend",
  cn: "cancel",
  br: "raise the budget",
  bx: "raise the budget",
  bf: "finish the task, then stop",
  bc: "cancel at the budget gate",
} as const;
export type Verb = keyof typeof VERBS;

export type ChatCode = { verb: Verb; id: string; option?: number };

export function encodeCode({ verb, id, option }: ChatCode): string {
  return option === undefined ? `${verb}:${id}` : `${verb}:${id}:${option}`;
}

export function parseCode(code: string): ChatCode | null {
  const m = /^([a-z]{2}):((?:gate|clr|run)_[0-9a-z]{10,40})(?::(\d{1,3}))?$/.exec(code);
  if (!m || !(m[1]! in VERBS)) return null;
  return { verb: m[1] as Verb, id: m[2]!, ...(m[3] !== undefined ? { option: Number(m[3]) } : {}) };
}

/** A button: its label and the code it carries. */
export type ChatButton = { label: string; code: string; style?: "primary" | "danger" };


type GateRow = Pick<typeof gates.$inferSelect, "id" | "kind"> & { context?: unknown };
type QuestionRow = Pick<typeof clarificationRequests.$inferSelect, "id" | "responseType" | "options">;

export function gateButtons(gate: GateRow): ChatButton[] {
  const id = gate.id;
  if (gate.kind === "fix") {
    // A stopped implementer (context.stuck) left nothing finished to accept; "back to planning" is on the run page.
    const stuck = !!(gate.context as { stuck?: unknown } | null)?.stuck;
    return [
      { label: stuck ? "Retry" : "Retry the fix", code: encodeCode({ verb: "fr", id }), style: "primary" },
      ...(stuck ? [] : [{ label: "Accept anyway", code: encodeCode({ verb: "fa", id }) }]),
      { label: "Cancel the run", code: encodeCode({ verb: "fc", id }), style: "danger" },
    ];
  }
  // A budget gate: the run page's ways on (raise by an amount, finish the task in progress, cancel the run).
  if (gate.kind === "budget") {
    const { stage } = (gate.context ?? {}) as { stage?: string };
    const raise = suggestedRaise(gate.context);
    return [
      { label: `Raise by ${raise.text}`, code: encodeCode({ verb: "br", id }), style: "primary" },
      { label: "Raise by…", code: encodeCode({ verb: "bx", id }) },
      // Only implementation has a task in progress to finish (decideBudget refuses it elsewhere).
      ...(stage === "implementation" ? [{ label: "Finish this task, then stop", code: encodeCode({ verb: "bf", id }) }] : []),
      { label: "Cancel the run", code: encodeCode({ verb: "bc", id }), style: "danger" as const },
    ];
  }
  return [
    { label: "Approve", code: encodeCode({ verb: "ap", id }), style: "primary" },
    { label: "Reject…", code: encodeCode({ verb: "rj", id }), style: "danger" },
    ...(gate.kind === "plan" ? [{ label: "Ask back…", code: encodeCode({ verb: "ak", id }) }] : []),
  ];
}

export type BudgetMetric = "tokens" | "costUsd" | "minutes";

/** A budget gate's amount: in what it is counted, and the words for an amount of it. */
export function budgetMetric(context: unknown): { metric: BudgetMetric; unit: string; text: (n: number) => string } {
  const metric = (context as { metric?: string } | null)?.metric;
  if (metric === "costUsd") return { metric, unit: "USD", text: (n) => `$${n}` };
  if (metric === "minutes") return { metric, unit: "minutes", text: (n) => `${n} minute${n === 1 ? "" : "s"}` };
  return { metric: "tokens", unit: "tokens", text: (n) => `${n} tokens` };
}

/**
 * The raise the one-press button gives, as the run page suggests it: the gate's limit again (room for more than the
 * turn that crossed it), or 10000 tokens, $1, 30 minutes when the gate names none.
 */
export function suggestedRaise(context: unknown): { metric: BudgetMetric; amount: number; text: string } {
  const m = budgetMetric(context);
  const limit = (context as { limit?: unknown } | null)?.limit;
  const fallback = { tokens: 10_000, costUsd: 1, minutes: 30 }[m.metric];
  const base = typeof limit === "number" && limit > 0 ? limit : fallback;
  const amount = m.metric === "tokens" ? Math.ceil(base) : Number(base.toFixed(4));
  return { metric: m.metric, amount, text: m.text(amount) };
}

export function questionButtons(row: QuestionRow): ChatButton[] {
  const options = row.options ?? [];
  if (row.responseType === "single_choice" && options.length > 0 && options.length <= 10) {
    return options.map((option, i) => ({ label: option.slice(0, 70), code: encodeCode({ verb: "ch", id: row.id, option: i }) }));
  }
  // A file is uploaded on the run page.
  if (row.responseType === "file") return [];
  return [{ label: "Answer…", code: encodeCode({ verb: "tx", id: row.id }), style: "primary" }];
}

/** A paused run: extend or cancel after a timeout, retry (or cancel) otherwise. */
export function pauseButtons({ runId, reason }: { runId: string; reason: string }): ChatButton[] {
  return [
    reason === "timeout"
      ? { label: "Extend", code: encodeCode({ verb: "ex", id: runId }), style: "primary" }
      : { label: "Retry", code: encodeCode({ verb: "rt", id: runId }), style: "primary" },
    { label: "Cancel the run", code: encodeCode({ verb: "cn", id: runId }), style: "danger" },
  ];
}
