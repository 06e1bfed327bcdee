import { getEnv } from "@/lib/env";
import { isAppError } from "@/lib/errors";
import { listProjectsForUser } from "@/lib/projects/queries";
import { listInbox } from "@/lib/runs/inbox";
import { notLinkedText, type ChatDeciders } from "./actions";
import { linkedUser, redeemLinkCode, type ChatIdentity } from "./link";

/* The chat commands both providers share: link an account, start a run, list what waits for you. */

export async function linkCommand({ identity, code }: { identity: ChatIdentity; code: string }): Promise<string> {
  if (!code.trim()) return "Send the code from Gatehouse → Settings → Chat accounts: link <code>.";
  const linked = await redeemLinkCode({ identity, code });
  if (!linked) return "That code is unknown, used or expired. Create a new one in Gatehouse → Settings → Chat accounts.";
  return `Linked: this ${identity.provider === "slack" ? "Slack" : "Telegram"} account now acts as ${linked.name ?? linked.userId} in Gatehouse.`;
}

/**
 * Start a run as the linked user. `project` is a project's id or name (Slack names it; a Telegram bot belongs to one
 * project, which it passes as `projectId`). The run start's own rules apply: only approvers and owners start runs.
 */
export async function runCommand({
  identity,
  project,
  request,
  deciders,
}: {
  identity: ChatIdentity;
  project: { id?: string; ref?: string };
  request: string;
  deciders: ChatDeciders;
}): Promise<string> {
  const user = await linkedUser(identity);
  if (!user) return notLinkedText(identity.provider);
  const projects = await listProjectsForUser({ userId: user.id });
  const ref = project.ref?.trim().toLowerCase();
  const found = projects.find((p) => p.id === project.id || (ref !== undefined && (p.id === ref || p.name.toLowerCase() === ref)));
  if (!found) {
    return project.ref !== undefined
      ? `No project "${project.ref}" of yours. Yours: ${projects.map((p) => p.name).join(", ") || "none"}.`
      : "You are not a member of this bot's project.";
  }
  if (!request.trim()) return "Say what the run should do: run <project> <request>.";
  try {
    const run = await deciders.startRun({ user, projectId: found.id, request: request.trim() });
    return `Run started on ${found.name}: ${getEnv().publicUrl}/runs/${run.id}`;
  } catch (error) {
    if (!isAppError(error)) throw error;
    if (error.type === "forbidden") return `Refused: you are a ${found.role} on ${found.name}; only approvers and owners start runs.`;
    return `Not started: ${error.message}`;
  }
}

/** The open gates and questions the linked user may decide, newest first, with links. */
export async function waitingCommand({ identity, limit = 10 }: { identity: ChatIdentity; limit?: number }): Promise<{ text: string; items: Awaited<ReturnType<typeof listInbox>>["items"] }> {
  const user = await linkedUser(identity);
  if (!user) return { text: notLinkedText(identity.provider), items: [] };
  const inbox = await listInbox({ user, filter: "open", limit });
  if (inbox.items.length === 0) return { text: "Nothing waits for you.", items: [] };
  const base = getEnv().publicUrl;
  const lines = inbox.items.map((i) => `• [${i.projectName}] ${i.runTitle}: ${i.summary} — ${i.link.startsWith("http") ? i.link : `${base}${i.link}`}`);
  return { text: [`${inbox.open} waiting for you:`, ...lines, inbox.truncated ? "…and more in the inbox." : ""].filter(Boolean).join("\n"), items: inbox.items };
}
