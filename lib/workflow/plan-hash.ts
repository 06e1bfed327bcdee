import { createHash } from "node:crypto";
import type { PlanDocument, StoredRunEvent } from "./events";

/*
 * The approved plan is frozen (seed 003): its hash is taken over what a person approves — the tasks, the scope (the
 * files the tasks name), the acceptance criteria and the diagram — and recorded on the approval (APPROVAL_GRANTED
 * `planHash`), in each spec file's front matter and in context.json (`approvedPlanHash`). The validator checks the plan
 * it validates against it. The summary, risks and tasks.md bookkeeping are not part of it: they change no contract.
 */

/** JSON with object keys sorted at every level and undefined left out: the same plan always gives the same text. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** What the hash covers, in canonical form (tasks and criteria keep their order: the order is part of the plan). */
export function frozenPlanParts(plan: PlanDocument) {
  return {
    mermaid: plan.mermaid,
    tasks: plan.tasks.map((t) => ({ id: t.id, title: t.title, description: t.description, dependsOn: t.dependsOn ?? [], files: t.files ?? [] })),
    scope: [...new Set(plan.tasks.flatMap((t) => t.files ?? []))].sort(),
    acceptanceCriteria: plan.acceptanceCriteria.map((c) => ({ id: c.id, description: c.description, command: c.command })),
  };
}

/** sha256 (hex) of the plan's canonical JSON. */
export function planHash(plan: PlanDocument): string {
  return createHash("sha256").update(canonicalJson(frozenPlanParts(plan))).digest("hex");
}

/**
 * The hash of the plan in force, from the run's events: the last approval of a plan (APPROVAL_GRANTED with planHash);
 * without one (trustMode.planning "auto": no plan gate), the last plan recorded, which the run took as approved.
 */
export function approvedPlanHash(events: Array<Pick<StoredRunEvent, "type" | "payload">>): string | null {
  let approved: string | null = null;
  let recorded: string | null = null;
  for (const e of events) {
    const p = e.payload as { plan?: PlanDocument; planHash?: string };
    if ((e.type === "PLAN_CREATED" || e.type === "PLAN_EDITED") && p.plan) recorded = planHash(p.plan);
    if (e.type === "APPROVAL_GRANTED" && typeof p.planHash === "string") approved = p.planHash;
  }
  return approved ?? recorded;
}
