import crypto from "node:crypto";
import { eq } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { appendEventsTx } from "@/lib/db/event-store";
import { createRun } from "@/lib/db/queries/runs";
import { describeExcess } from "@/lib/runs/budget";
import { openGate } from "@/lib/runs/gates/open";
import { runNoticeHook } from "@/lib/runs/steps/notices";
import { chatDecisions, gates } from "@/lib/db/schema";
import { ORIGIN } from "../api/helpers";

/* Requests as Slack sends them: form-encoded, signed with the app's signing secret (v0). */

export const SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5";

export function slackRequest(path: string, body: string, { secret = SIGNING_SECRET, at = Math.floor(Date.now() / 1000), signature }: { secret?: string; at?: number; signature?: string } = {}) {
  const sig = signature ?? `v0=${crypto.createHmac("sha256", secret).update(`v0:${at}:${body}`).digest("hex")}`;
  return new Request(`${ORIGIN}${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": String(at), "x-slack-signature": sig },
    body,
  });
}

/** A slash command's form fields, as Slack documents them. */
export function commandBody({ user, team = "T0001", text, responseUrl }: { user: string; team?: string; text: string; responseUrl?: string }) {
  return new URLSearchParams({
    token: "gIkuvaNzQIHg97ATvDxqgjtO",
    team_id: team,
    team_domain: "example",
    enterprise_id: "",
    channel_id: "C2147483705",
    channel_name: "approvals",
    user_id: user,
    user_name: user.toLowerCase(),
    command: "/gatehouse",
    text,
    api_app_id: "A123456",
    is_enterprise_install: "false",
    response_url: responseUrl ?? "https://hooks.slack.com/commands/1234/5678",
    trigger_id: "13345224609.738474920.8088930838d88f008e0",
  }).toString();
}

/** A block_actions interaction for a button press, as Slack posts it (payload=<JSON>). */
export function buttonBody({ user, team = "T0001", value, responseUrl, blocks = [] }: { user: string; team?: string; value: string; responseUrl: string; blocks?: unknown[] }) {
  const payload = {
    type: "block_actions",
    user: { id: user, username: user.toLowerCase(), name: user.toLowerCase(), team_id: team },
    api_app_id: "A123456",
    token: "9s8d9as89d8as9d8as989",
    container: { type: "message", message_ts: "1548261231.000200", channel_id: "C2147483705", is_ephemeral: false },
    trigger_id: "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
    team: { id: team, domain: "example" },
    channel: { id: "C2147483705", name: "approvals" },
    response_url: responseUrl,
    message: { type: "message", text: "notice", ts: "1548261231.000200", blocks },
    actions: [{ action_id: value, block_id: "decide", text: { type: "plain_text", text: "Approve" }, value, type: "button", action_ts: "1548426417.840180" }],
  };
  return `payload=${encodeURIComponent(JSON.stringify(payload))}`;
}

/** A view_submission of the decision modal. */
export function submissionBody({ user, team = "T0001", metadata, value, selected }: { user: string; team?: string; metadata: string; value?: string; selected?: string[] }) {
  const field = selected ? { type: "checkboxes", selected_options: selected.map((v) => ({ value: v, text: { type: "plain_text", text: v } })) } : { type: "plain_text_input", value };
  const payload = {
    type: "view_submission",
    team: { id: team, domain: "example" },
    user: { id: user, username: user.toLowerCase(), name: user.toLowerCase(), team_id: team },
    api_app_id: "A123456",
    trigger_id: "12466734323.1395872398",
    view: { id: "V123", type: "modal", callback_id: "gatehouse-decision", private_metadata: metadata, state: { values: { answer: { value: field } } } },
  };
  return `payload=${encodeURIComponent(JSON.stringify(payload))}`;
}

export async function gateRow(id: string) {
  const db = await getDb();
  return (await db.query.gates.findFirst({ where: eq(gates.id, id) }))!;
}

export async function chatDecisionsOf(runId: string) {
  const db = await getDb();
  return db.select().from(chatDecisions).where(eq(chatDecisions.workflowRunId, runId));
}

/**
 * A run stopped at a budget gate, opened as the workflow opens one (openGate: the gate, its events, and the pause
 * notice it emits). `sent` collects the run notices the step hook sent.
 */
export async function runAtBudgetGate({
  projectId,
  userId,
  request,
  stage = "implementation",
  metric = "tokens",
  used = 6000,
  limit = 5000,
}: {
  projectId: string;
  userId: string;
  request: string;
  stage?: "planning" | "implementation" | "validation";
  metric?: "tokens" | "costUsd" | "minutes";
  used?: number;
  limit?: number;
}) {
  const run = await createRun({ projectId, userId, request, config: {} });
  await write((tx) => appendEventsTx(tx, run.id, [{ type: "RUN_STARTED", payload: {} }, { type: "STAGE_STARTED", payload: { stage } }] as never));
  const sent: Array<{ runId: string; kind: string; key: string; gateId?: string }> = [];
  const before = runNoticeHook.send;
  runNoticeHook.send = async (n) => void sent.push(n);
  try {
    const exceeded = { stage, metric, used, limit };
    const { gateId } = await openGate({ runId: run.id, stepKey: "impl:1:budget", kind: "budget", context: { reason: describeExcess(exceeded), ...exceeded } });
    return { runId: run.id, gateId, sent };
  } finally {
    runNoticeHook.send = before;
  }
}
