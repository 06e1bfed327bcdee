import { eq } from "drizzle-orm";
import { write } from "@/lib/db";
import { projects } from "@/lib/db/schema";
import { getRunState, listEvents } from "@/lib/db/event-store";
import { log } from "@/lib/log";
import { redact } from "@/lib/redact";
import { releaseSandbox } from "@/lib/sandbox";
import { readMemorySnapshot, squashMerge, updateMemory } from "@/lib/git";
import { append, firstLine, loadRun, type RunContext } from "./context";
import { mergePullRequestByDecision } from "./github";
import { decisionsOf, lastValidationReport, writeRecords } from "./records";
import { runSandbox } from "./workspace";
import { emitRunNotice } from "./notices";

/* Delivery on the local repository (GitHub's is ./github.ts), a person's merge decision, and the run's completion. */

/** Commit the run's records and memory on its branch, then squash-merge when the config allows. */
export async function deliver({ runId, stepKey, merge }: { runId: string; stepKey: string; merge: boolean }) {
  const run = await loadRun({ runId });
  await releaseSandbox(runSandbox(run));
  const report = await lastValidationReport(runId);
  await writeRecords(run, report, { completing: merge });
  const state = await getRunState({ id: runId });
  await updateMemory({
    repoPath: run.repoPath,
    branch: run.branch,
    runId,
    title: firstLine(run.request),
    outcome: `Delivered on ${run.branch}${state?.lastValidation === "passed" ? " (validation passed)" : " (accepted without passing validation)"}`,
    decisions: await decisionsOf(runId),
  });
  const merged = await mergeIfAllowed({ run, merge, validated: state?.lastValidation === "passed", stepKey });
  await refreshLocalMemory(run);
  return merged;
}

async function mergeIfAllowed({ run, merge, validated, stepKey }: { run: RunContext; merge: boolean; validated: boolean; stepKey: string }) {
  // Only work that passed validation is merged automatically; "accept anyway" delivers the branch, never a merge.
  if (!merge || !validated) return { merge: "skipped" as const, files: [] as string[] };
  const result = await squashMerge({
    repoPath: run.repoPath,
    branch: run.branch,
    baseBranch: run.config.git.baseBranch,
    runId: run.runId,
    title: firstLine(run.request),
  });
  if (result.status === "conflict") return { merge: "conflict" as const, files: result.files, reason: result.reason };
  await append(run.runId, stepKey, [{ type: "PR_MERGED", payload: { number: null, sha: result.sha, method: "squash" } }]);
  return { merge: result.status, files: [] as string[] };
}

/**
 * Keep a local project's cached memory (projects.memory, what the Projects page and GET /api/projects show) equal to
 * `.autonomous/memory.md` on its base branch. Refreshed here — after every local delivery and merge — rather than read
 * on GET, so listing projects runs no git; a delivery also picks up a merge someone made by hand since the last one.
 * A GitHub project's copy is refreshed by the pull request's merge webhook (lib/github/handlers.ts). Git stays the
 * source of truth: a failure only logs.
 */
async function refreshLocalMemory(run: RunContext): Promise<void> {
  if (run.github) return;
  try {
    const memory = await readMemorySnapshot({ repoPath: run.repoPath, ref: `refs/heads/${run.config.git.baseBranch}` });
    if (memory === null) return;
    await write(async (tx) => {
      await tx.update(projects).set({ memory, updatedAt: new Date() }).where(eq(projects.id, run.projectId));
    });
  } catch (error) {
    log.warn("could not refresh the project memory after a delivery", { projectId: run.projectId, error: String(error) });
  }
}

/**
 * Carry out a person's merge decision (MERGE_DECIDED, see decideMerge): squash-merge the run branch into its base
 * (local) or merge its pull request (GitHub), recording PR_MERGED with who decided, or MERGE_FAILED with the reason
 * and the conflicting files. Idempotent: a decision already carried out (or a run merged meanwhile) does nothing again.
 */
export async function mergeByDecision({ runId }: { runId: string }) {
  const events = await listEvents({ runId, limit: 100_000 });
  const decision = [...events].reverse().find((e) => e.type === "MERGE_DECIDED" || e.type === "MERGE_FAILED" || e.type === "PR_MERGED");
  if (decision?.type !== "MERGE_DECIDED") return { outcome: "nothing to do" as const };
  const by = decision.payload.by;
  const stepKey = `merge-decision:${decision.sequence}`;
  const run = await loadRun({ runId });
  const failed = async (reason: string, files: string[] = []) => {
    await append(runId, `${stepKey}:failed`, [{ type: "MERGE_FAILED", payload: { reason: redact(reason).slice(0, 2000), files } }], { afterEnd: true });
    return { outcome: "failed" as const, reason };
  };
  if (run.github) {
    const result = await mergePullRequestByDecision(run, { by, stepKey });
    if (result.kind === "auth") return failed(`GitHub refused the App's credentials: ${result.message}`);
    if (!result.merged) return failed(result.reason);
    return { outcome: "merged" as const };
  }
  const result = await squashMerge({ repoPath: run.repoPath, branch: run.branch, baseBranch: run.config.git.baseBranch, runId, title: firstLine(run.request) });
  if (result.status === "conflict") return failed(result.reason, result.files);
  await append(runId, stepKey, [{ type: "PR_MERGED", payload: { number: null, sha: result.sha, method: "squash", by } }], { afterEnd: true });
  await refreshLocalMemory(run);
  return { outcome: "merged" as const };
}

export async function complete({ runId, stepKey }: { runId: string; stepKey: string }) {
  const run = await loadRun({ runId });
  await append(runId, stepKey, [{ type: "RUN_COMPLETED", payload: {} }]);
  await emitRunNotice({ runId, kind: "completed", key: stepKey });
  await writeRecords(run, await lastValidationReport(runId));
  return { userId: run.userId };
}
