import path from "node:path";
import { eq } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { repositoryKeyOf } from "@/lib/db/repository-key";
import { importRun } from "@/lib/db/event-store";
import { artifacts, clarificationRequests, gates, modelCalls, projectMembers, projects, users } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import type { StoredRunEvent } from "@/lib/workflow";
import { AUTONOMOUS_DIR, parseEvents, parseRunContext, type RunContext } from "./records";
import { readBlobs } from "./commit-files";
import { git } from "./run";

type Found = { runId: string; ref: string; events?: string; context?: string };

export type RebuildResult = {
  runs: number;
  events: number;
  clarifications: number;
  /** Gate rows (with their decisions) and model calls (tokens, costs) restored from context.json's `rows`. */
  gates: number;
  modelCalls: number;
  errors: { runId: string; message: string }[];
};

/**
 * Rebuild runs, events, clarifications, gates (with their decisions), model calls (costs) and artifacts in the database from the `.autonomous/runs/<run-id>/` records on every
 * branch of the repository (run branches and the base branch, where merged runs land). For each run the most complete
 * record wins (the longest event log). The projection is recomputed by the reducer (importRun); clarifications come
 * from context.json (with answers) or, failing that, from the events. Missing users and the project are recreated.
 */
export async function rebuildFromGit({ repoPath }: { repoPath: string }): Promise<RebuildResult> {
  const refs = (await git(repoPath, ["for-each-ref", "--format=%(refname)", "refs/heads/"])).stdout.split("\n").filter(Boolean);
  const found = new Map<string, Found[]>();
  for (const ref of refs) {
    const listing = await git(repoPath, ["ls-tree", "-r", ref, "--", `${AUTONOMOUS_DIR}/runs/`], { allowFailure: true });
    const perRun = new Map<string, Found>();
    for (const line of listing.stdout.split("\n")) {
      const m = /^\d+ blob ([0-9a-f]{40})\t\.autonomous\/runs\/(run_[a-z0-9]+)\/(context\.json|events\.jsonl)$/.exec(line);
      if (!m) continue;
      const [, sha, runId, file] = m as unknown as [string, string, string, string];
      const entry = perRun.get(runId) ?? { runId, ref };
      if (file === "events.jsonl") entry.events = sha;
      else entry.context = sha;
      perRun.set(runId, entry);
    }
    for (const [runId, entry] of perRun) found.set(runId, [...(found.get(runId) ?? []), entry]);
  }
  const shas = [...new Set([...found.values()].flat().flatMap((f) => [f.events, f.context]).filter((s): s is string => !!s))];
  // One git process for every record found (a blob id, read through the git helper).
  const read = await readBlobs(repoPath, shas);
  const blobs = new Map<string, string>();
  shas.forEach((sha, i) => {
    const blob = read[i];
    if (blob) blobs.set(sha, blob.content);
  });

  const result: RebuildResult = { runs: 0, events: 0, clarifications: 0, gates: 0, modelCalls: 0, errors: [] };
  const knownUsers = new Set<string>();
  const knownProjects = new Set<string>();
  for (const [runId, candidates] of [...found.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    try {
      const parsed = candidates
        .filter((c) => c.events)
        .map((c) => ({
          events: parseEvents(runId, blobs.get(c.events!) ?? ""),
          context: c.context && blobs.has(c.context) ? parseRunContext(blobs.get(c.context)!) : null,
        }))
        .sort((a, b) => b.events.length - a.events.length);
      const best = parsed[0];
      if (!best || best.events.length === 0) throw new Error("no events.jsonl");
      const created = best.events.find((e) => e.type === "RUN_CREATED");
      if (!created || created.type !== "RUN_CREATED") throw new Error("events.jsonl has no RUN_CREATED");
      const { projectId, userId } = created.payload;
      await ensureOwner({ repoPath, projectId, userId, knownUsers, knownProjects });
      await importRun({ runId, events: best.events });
      const context = best.context ?? parsed.find((p) => p.context)?.context ?? null;
      result.clarifications += await restoreRunRows({ runId, events: best.events, context });
      result.gates += context?.rows?.gates.length ?? 0;
      result.modelCalls += context?.rows?.modelCalls.length ?? 0;
      result.runs++;
      result.events += best.events.length;
    } catch (error) {
      result.errors.push({ runId, message: (error as Error).message });
    }
  }
  return result;
}

async function ensureOwner({
  repoPath,
  projectId,
  userId,
  knownUsers,
  knownProjects,
}: {
  repoPath: string;
  projectId: string;
  userId: string;
  knownUsers: Set<string>;
  knownProjects: Set<string>;
}) {
  if (knownUsers.has(userId) && knownProjects.has(projectId)) return;
  const db = await getDb();
  const hasUser = await db.query.users.findFirst({ where: eq(users.id, userId) });
  const hasProject = await db.query.projects.findFirst({ where: eq(projects.id, projectId) });
  if (!hasUser || !hasProject) {
    await write(async (tx) => {
      if (!hasUser) await tx.insert(users).values({ id: userId, name: userId === "usr_local_owner" ? "Owner" : userId }).onConflictDoNothing();
      if (!hasProject) {
        const abs = path.resolve(repoPath);
        await tx
          .insert(projects)
          .values({
            id: projectId,
            name: path.basename(abs),
            ownerId: userId,
            repository: { type: "local", path: abs },
            repositoryKey: repositoryKeyOf({ type: "local", path: abs }),
          })
          .onConflictDoNothing();
        await tx.insert(projectMembers).values({ projectId, userId, role: "owner" }).onConflictDoNothing();
      }
    });
  }
  knownUsers.add(userId);
  knownProjects.add(projectId);
}

const toDate = (v: string | number | null | undefined) => (v === null || v === undefined ? null : new Date(v));

/** A row from context.json's `rows`, for this run, with its timestamp columns as Dates again. */
function asRow(row: Record<string, unknown>, runId: string, dateKeys: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = { ...row, workflowRunId: runId };
  for (const key of dateKeys) out[key] = toDate(row[key] as number | null | undefined);
  return out;
}

/** Clarification and artifact rows for one run: replaced wholesale, from context.json or (without it) the events. */
async function restoreRunRows({ runId, events, context }: { runId: string; events: StoredRunEvent[]; context: RunContext | null }) {
  const clarifications: RunContext["clarifications"] = context?.clarifications ?? [];
  if (!context) {
    for (const e of events) {
      if (e.type === "CLARIFICATION_REQUESTED") {
        clarifications.push({ id: e.payload.clarificationId, stage: e.payload.stage, question: e.payload.question, context: null, options: null, responseType: "text", status: "pending", response: null, answeredBy: null, answeredAt: null, attemptNumber: 1, createdAt: e.timestamp });
      } else if (e.type === "CLARIFICATION_ANSWERED") {
        const c = clarifications.find((x) => x.id === e.payload.clarificationId);
        if (c) Object.assign(c, { status: "answered", answeredBy: e.payload.by, answeredAt: e.timestamp });
      }
    }
  }
  await write(async (tx) => {
    await tx.delete(clarificationRequests).where(eq(clarificationRequests.workflowRunId, runId));
    for (const c of clarifications) {
      await tx.insert(clarificationRequests).values({
        id: c.id,
        workflowRunId: runId,
        stage: c.stage,
        question: c.question,
        context: c.context,
        options: c.options,
        responseType: c.responseType,
        status: c.status,
        response: c.response ?? null,
        answeredBy: c.answeredBy,
        answeredAt: toDate(c.answeredAt),
        attemptNumber: c.attemptNumber,
        createdAt: toDate(c.createdAt)!,
      });
    }
    if (context?.rows) {
      // The rows as the database held them: gates with their decisions, model calls with their costs, the artifact index.
      await tx.delete(gates).where(eq(gates.workflowRunId, runId));
      await tx.delete(modelCalls).where(eq(modelCalls.workflowRunId, runId));
      await tx.delete(artifacts).where(eq(artifacts.workflowRunId, runId));
      for (const g of context.rows.gates) await tx.insert(gates).values(asRow(g, runId, ["decidedAt", "createdAt"]) as typeof gates.$inferInsert);
      for (const c of context.rows.modelCalls) await tx.insert(modelCalls).values(asRow(c, runId, ["createdAt"]) as typeof modelCalls.$inferInsert).onConflictDoNothing();
      for (const a of context.rows.artifacts) await tx.insert(artifacts).values(asRow(a, runId, ["createdAt"]) as typeof artifacts.$inferInsert);
    } else if (context) {
      await tx.delete(artifacts).where(eq(artifacts.workflowRunId, runId));
      for (const a of context.artifacts) {
        await tx.insert(artifacts).values({ id: newId("art"), workflowRunId: runId, stage: a.stage, type: a.type, path: a.path, commitSha: a.commitSha, version: a.version });
      }
    }
  });
  return clarifications.length;
}
