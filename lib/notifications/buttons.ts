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
  // A budget gate has its own ways on (raise, finish the task): decided on the run page.
  if (gate.kind === "budget") return [];
  return [
    { label: "Approve", code: encodeCode({ verb: "ap", id }), style: "primary" },
    { label: "Reject…", code: encodeCode({ verb: "rj", id }), style: "danger" },
    ...(gate.kind === "plan" ? [{ label: "Ask back…", code: encodeCode({ verb: "ak", id }) }] : []),
  ];
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
