"use client";

import Link from "next/link";
import { useEffect, useMemo, useState } from "react";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { ChevronRight, ExternalLink, GitBranch, GitMerge, GitPullRequest, Info, TriangleAlert } from "lucide-react";
import { Alert, AlertDescription, AlertTitle } from "@/components/ui/alert";
import { Button } from "@/components/ui/button";
import { Card, CardContent } from "@/components/ui/card";
import { Skeleton } from "@/components/ui/skeleton";
import { Tabs, TabsContent, TabsList, TabsTrigger } from "@/components/ui/tabs";
import { StatusBadge } from "@/components/runs/status-badge";
import { Markdown } from "@/components/runs/markdown";
import { apiGet, runKeys, type RunDetail } from "@/components/runs/api";
import { useProjects } from "@/components/runs/use-projects";
import { isTerminal } from "@/lib/dashboard/filters";
import { formatUsd, humanize } from "@/lib/dashboard/format";
import { Age } from "@/components/layout/client-time";
import { planVersions, stageProgress, taskTriage, validations, type ApiEvent } from "@/lib/dashboard/timeline";
import { nextStep } from "@/lib/dashboard/delivery";
import { approachLabel, approachOf } from "@/lib/runs/approach";
import { taskBranches, taskStatuses } from "@/lib/workflow/task-status";
import type { PlanDocument } from "@/lib/workflow/events";
import { BranchDiff } from "./branch-diff";
import { MergeButton } from "./merge-button";
import { ClarificationForm } from "./clarification-form";
import { EstimateComparison } from "./estimate-table";
import { ApprovalCard, BudgetCard, FixDecisionCard, GateCard, PausedCard } from "./decision-cards";
import { ScopeGateCard, scopeOf } from "./scope-gate-card";
import { StuckGateCard, stuckOf } from "./stuck-gate-card";
import { ModelCalls } from "./model-calls";
import { PlanPanel } from "./plan-panel";
import { RepositoryInstructions } from "./repository-instructions";
import { StageProgress } from "./stage-progress";
import { Timeline } from "./timeline";
import { useDecision } from "./use-decision";
import { useRunEvents } from "./use-run-events";

/** The run and its events 1..N as the server read them together (getRunSnapshot): the page's first render. */
export type RunSnapshot = RunDetail & { events: ApiEvent[] };

export function RunView({ runId, initial }: { runId: string; initial?: RunSnapshot }) {
  const queryClient = useQueryClient();
  const { events, connection, error: streamError } = useRunEvents(runId, initial?.events);
  const [initialDetail] = useState(() => {
    if (!initial) return undefined;
    const { events: _events, ...rest } = initial;
    return rest as RunDetail;
  });
  const detail = useQuery({
    queryKey: runKeys.detail(runId),
    queryFn: () => apiGet<RunDetail>(`/api/runs/${runId}`),
    initialData: initialDetail,
    refetchInterval: (q) => (q.state.data && isTerminal(q.state.data.run.status) ? false : 5_000),
  });
  const lastSequence = events.at(-1)?.sequence ?? 0;
  // A new event changes the projection: refresh the run (status, gates, questions) right away.
  useEffect(() => {
    if (lastSequence > 0) void queryClient.invalidateQueries({ queryKey: runKeys.detail(runId) });
  }, [lastSequence, runId, queryClient]);

  const versions = useMemo(() => planVersions(events), [events]);
  const triage = useMemo(() => taskTriage(events), [events]);
  const statuses = useMemo(() => taskStatuses(events), [events]);
  const branches = useMemo(() => taskBranches(events), [events]);
  const progress = useMemo(() => stageProgress(events), [events]);
  const results = useMemo(() => validations(events), [events]);
  // An approach of an "explore N" group: its RUN_CREATED (sequence 1) names the group, which the header links to.
  const groupId = useMemo(() => {
    const created = events.find((e) => e.type === "RUN_CREATED");
    const id = created ? (created.payload as { groupId?: unknown }).groupId : null;
    return typeof id === "string" && id ? id : null;
  }, [events]);

  if (detail.isPending) {
    return (
      <div className="space-y-4" aria-busy="true">
        <Skeleton className="h-8 w-2/3" />
        <Skeleton className="h-40 w-full" />
      </div>
    );
  }
  if (detail.error) {
    return (
      <Alert variant="destructive">
        <AlertTitle>Could not load this run</AlertTitle>
        <AlertDescription>
          {detail.error.message} <Link href="/" className="underline">Back to runs</Link>
        </AlertDescription>
      </Alert>
    );
  }
  const { run, gates, clarifications, cost } = detail.data;
  const pendingGate = run.pendingGate ? gates.find((g) => g.id === run.pendingGate!.gateId) ?? null : null;
  const pendingQuestion = run.pendingClarification ? clarifications.find((c) => c.id === run.pendingClarification!.clarificationId) ?? null : null;
  const gatePlan = (pendingGate?.context as { plan?: PlanDocument } | null)?.plan ?? versions.at(-1)?.plan ?? null;
  const lastReport = results.at(-1);
  const planGate = run.status === "awaiting_approval" && pendingGate?.kind === "plan" ? pendingGate : null;
  const planWaitsForAnswer = run.status === "awaiting_clarification" && run.pendingClarification?.stage === "planning";

  return (
    <div className="space-y-6" data-testid="run-view" data-status={run.status}>
      <RunHeader detail={detail.data} stage={progress?.stage ?? null} groupId={groupId} />
      {detail.data.sandbox?.warning && !isTerminal(run.status) && (
        <Alert data-testid="sandbox-warning">
          <TriangleAlert className="size-4" />
          <AlertTitle>{detail.data.sandbox.isolated ? "Weaker sandbox on this server" : "Agent commands are not isolated on this server"}</AlertTitle>
          <AlertDescription>{detail.data.sandbox.warning}</AlertDescription>
        </Alert>
      )}
      {streamError && connection === "polling" && <p className="text-muted-foreground text-xs">{streamError}</p>}
      {/* Where an inbox item's link lands (/runs/<id>#gate-<id>, #question-<id>): just above the card that decides it. */}
      {pendingGate && <span id={`gate-${pendingGate.id}`} className="absolute" aria-hidden="true" />}
      {pendingQuestion && <span id={`question-${pendingQuestion.id}`} className="absolute" aria-hidden="true" />}

      {planGate && scopeOf(planGate) && <ScopeGateCard key={planGate.id} run={run} gate={planGate} />}
      {planGate && !scopeOf(planGate) && (
        <ApprovalCard key={planGate.id} run={run} gate={planGate} plan={gatePlan}>
          <PlanPanel versions={versions} fallback={gatePlan} people={detail.data.people} triage={triage} />
        </ApprovalCard>
      )}
      {run.status === "awaiting_approval" && pendingGate?.kind === "budget" && <BudgetCard key={pendingGate.id} run={run} gate={pendingGate} />}
      {run.status === "awaiting_approval" && pendingGate && !["plan", "fix", "budget"].includes(pendingGate.kind) && <GateCard key={pendingGate.id} run={run} gate={pendingGate} />}
      {pendingGate?.kind === "fix" && stuckOf(pendingGate) && <StuckGateCard key={pendingGate.id} run={run} gate={pendingGate} />}
      {(run.status === "awaiting_fix_decision" || (run.status === "awaiting_approval" && pendingGate?.kind === "fix")) && !stuckOf(pendingGate) && (
        <FixDecisionCard key={pendingGate?.id ?? "fix"} run={run} gate={pendingGate} fallbackReport={lastReport?.report} />
      )}
      {run.status === "awaiting_clarification" && pendingQuestion && <ClarificationForm key={pendingQuestion.id} run={run} clarification={pendingQuestion} />}
      {run.status === "paused" && <PausedCard run={run} />}
      {run.status === "completed" && <DeliveryCard detail={detail.data} />}
      {run.status === "completed" && detail.data.estimate && (
        <Card>
          <CardContent>
            <EstimateComparison report={detail.data.estimate} />
          </CardContent>
        </Card>
      )}
      {run.status === "failed" && run.error && (
        <Alert variant="destructive">
          <AlertTitle>The run failed</AlertTitle>
          <AlertDescription>{run.error}</AlertDescription>
        </Alert>
      )}

      <div className="grid gap-6 lg:grid-cols-[1fr_18rem]">
        <div className="min-w-0 space-y-4">
          {progress && !isTerminal(run.status) && <StageProgress progress={progress} active={run.status === "running"} />}
          <Tabs defaultValue="plan">
            <TabsList className="flex-wrap">
              <TabsTrigger value="plan">Plan{versions.length > 1 ? ` (${versions.length})` : ""}</TabsTrigger>
              <TabsTrigger value="diff">Diff</TabsTrigger>
              <TabsTrigger value="validation">Validation</TabsTrigger>
              <TabsTrigger value="cost">Model calls</TabsTrigger>
            </TabsList>
            <TabsContent value="plan" className="pt-2">
              {planGate ? (
                <p className="text-muted-foreground text-sm" data-testid="plan-in-approval">
                  The plan waiting for your decision is shown above, beside the decision.
                </p>
              ) : (
                <PlanPanel
                  versions={versions}
                  people={detail.data.people}
                  triage={triage}
                  statuses={statuses}
                  branches={branches}
                  costs={Object.fromEntries((cost.byTask ?? []).map((c) => [c.taskId, c]))}
                  emptyText={planWaitsForAnswer ? "No plan yet: the planner is waiting for your answer to its question above." : undefined}
                />
              )}
              <RepositoryInstructions files={detail.data.instructions ?? []} />
            </TabsContent>
            <TabsContent value="diff" className="pt-2">
              <BranchDiff runId={runId} refreshKey={lastSequence} />
            </TabsContent>
            <TabsContent value="validation" className="space-y-4 pt-2">
              {run.outcome === "accepted_failed_validation" && (
                <Alert data-testid="accepted-anyway">
                  <TriangleAlert aria-hidden />
                  <AlertTitle>Accepted after validation failed</AlertTitle>
                  <AlertDescription>A person accepted this run although its last validation did not pass; the report below says what failed.</AlertDescription>
                </Alert>
              )}
              {results.length === 0 ? (
                <p className="text-muted-foreground text-sm">Not validated yet.</p>
              ) : (
                [...results].reverse().map((r) => (
                  <Card key={`${r.attempt}-${r.timestamp}`} data-testid="validation-result" data-passed={r.passed}>
                    <CardContent className="space-y-2">
                      <p className="text-sm font-medium">
                        Attempt {r.attempt}: {r.passed ? "passed" : "failed"}
                        {r.score !== undefined ? ` · score ${r.score}/10` : ""}
                      </p>
                      {r.report ? <Markdown>{r.report}</Markdown> : r.summary ? <p className="text-sm">{r.summary}</p> : null}
                    </CardContent>
                  </Card>
                ))
              )}
            </TabsContent>
            <TabsContent value="cost" className="space-y-4 pt-2">
              {detail.data.estimate && !planGate && <EstimateComparison report={detail.data.estimate} />}
              <ModelCalls runId={runId} cost={cost} refreshKey={lastSequence} />
            </TabsContent>
          </Tabs>
        </div>
        <aside className="lg:border-l lg:pl-6">
          <Timeline events={events} connection={connection} people={detail.data.people} chatOrigins={detail.data.chatOrigins} />
        </aside>
      </div>
    </div>
  );
}

function RunHeader({ detail, stage, groupId }: { detail: RunDetail; stage: string | null; groupId: string | null }) {
  const { run, cost } = detail;
  const approach = approachOf(run.originalRequest);
  const projects = useProjects();
  const project = projects.data?.find((p) => p.id === run.projectId);
  const cancel = useDecision(run.id);
  const [confirming, setConfirming] = useState(false);
  const repo = project?.repository;
  const branchUrl = repo?.type === "github" && run.branch ? `https://github.com/${repo.owner}/${repo.repo}/tree/${run.branch}` : null;
  return (
    <header className="space-y-3">
      <div className="flex flex-wrap items-start justify-between gap-3">
        <div className="min-w-0 space-y-1">
          <h1 className="text-xl font-semibold tracking-tight break-words" data-testid="run-title">
            {run.title}
          </h1>
          <div className="text-muted-foreground flex flex-wrap items-center gap-x-3 gap-y-1 text-sm">
            <StatusBadge status={run.status} outcome={run.outcome} />
            {/* The stage the stage bar shows (from the same events), so the two never disagree. */}
            <span data-testid="run-stage">stage: {humanize(stage ?? run.currentStage)}</span>
            {project && <span>project: {project.name}</span>}
            <span data-testid="run-started">started <Age iso={run.createdAt} /> ago</span>
            <span data-testid="run-cost">cost {formatUsd(cost.usd)}</span>
            {run.planVersion > 0 && <span>plan v{run.planVersion}</span>}
            {groupId && (
              <Link href={`/compare?group=${groupId}`} className="underline" data-testid="run-group-link">
                {approach ? approachLabel(approach) : "one of several approaches"} · compare the approaches
              </Link>
            )}
          </div>
        </div>
        {!isTerminal(run.status) && (
          <div className="flex gap-2">
            {confirming ? (
              <>
                <Button
                  variant="destructive"
                  size="sm"
                  data-testid="confirm-cancel"
                  disabled={cancel.isPending}
                  onClick={() => cancel.mutate({ url: `/api/runs/${run.id}/cancel`, success: "Run cancelled" }, { onSettled: () => setConfirming(false) })}
                >
                  Yes, cancel the run
                </Button>
                <Button variant="ghost" size="sm" onClick={() => setConfirming(false)}>
                  Keep it
                </Button>
              </>
            ) : (
              <>
                {run.status === "running" && (
                  <Button
                    variant="outline"
                    size="sm"
                    data-testid="pause-run"
                    title="Pauses at the next step: the work so far is committed and the sandbox freed"
                    disabled={cancel.isPending}
                    onClick={() => cancel.mutate({ url: `/api/runs/${run.id}/pause`, success: "Pause requested; the run pauses at its next step" })}
                  >
                    Pause
                  </Button>
                )}
                {run.status === "paused" && run.pauseReason?.reason === "by_person" && (
                  <Button
                    size="sm"
                    data-testid="resume-run"
                    disabled={cancel.isPending}
                    onClick={() => cancel.mutate({ url: `/api/runs/${run.id}/resume`, success: "Resumed" })}
                  >
                    Resume
                  </Button>
                )}
                <Button variant="outline" size="sm" data-testid="cancel-run" onClick={() => setConfirming(true)}>
                  Cancel run
                </Button>
              </>
            )}
          </div>
        )}
      </div>
      {cancel.error && <p className="text-destructive text-sm">{cancel.error.message}</p>}
      <details className="group rounded-md border" data-testid="run-request-details">
        <summary className="text-muted-foreground hover:text-foreground flex cursor-pointer list-none items-center gap-1.5 px-3 py-2 text-sm select-none">
          <ChevronRight className="size-4 transition-transform group-open:rotate-90" aria-hidden />
          Request
        </summary>
        <div className="border-t px-3 py-2" data-testid="run-request">
          {/* A request is written by a person, line by line: its line breaks stay (Markdown would join them). */}
          <Markdown className="[&_p]:whitespace-pre-line">{run.originalRequest}</Markdown>
        </div>
      </details>
      <div className="flex flex-wrap items-center gap-3 text-sm">
        {run.branch && (
          <span className="inline-flex items-center gap-1.5" data-testid="run-branch">
            <GitBranch className="size-4" aria-hidden />
            {branchUrl ? (
              <a href={branchUrl} target="_blank" rel="noreferrer" className="font-mono underline">
                {run.branch}
              </a>
            ) : (
              <code className="bg-muted rounded px-1 text-xs">{run.branch}</code>
            )}
          </span>
        )}
        {run.pullRequest && (
          <a href={run.pullRequest.url} target="_blank" rel="noreferrer" className="inline-flex items-center gap-1 underline" data-testid="run-pr">
            Pull request #{run.pullRequest.number} ({run.pullRequest.state}
            {run.pullRequest.draft ? ", draft" : ""}) <ExternalLink className="size-3.5" aria-hidden />
          </a>
        )}
        {run.merged && !run.pullRequest && <span className="text-emerald-600 dark:text-emerald-400">merged</span>}
      </div>
    </header>
  );
}

/** A completed run: the next action (review the PR, open one, merge by hand) or why there is none. */
function DeliveryCard({ detail }: { detail: RunDetail }) {
  const { run } = detail;
  const projects = useProjects();
  const project = projects.data?.find((p) => p.id === run.projectId);
  if (projects.isPending) return null;
  const step = nextStep({ run, repository: project?.repository ?? null });
  if (!step) return null;
  const base = ((run.config as { git?: { baseBranch?: string } }).git?.baseBranch ?? "main") as string;
  // A person may merge what was delivered without a merge (accepted after failed validation, or autoMerge off):
  // POST /merge records the decision and the merge follows (or says why it could not be made).
  const canMerge = step.kind === "merge_locally" || step.kind === "review_pr";
  const Icon = step.kind === "merged" ? GitMerge : step.kind === "review_pr" || step.kind === "open_pr" ? GitPullRequest : Info;
  return (
    <Alert data-testid="next-step" data-kind={step.kind}>
      <Icon aria-hidden />
      <AlertTitle>{step.title}</AlertTitle>
      <AlertDescription className="space-y-2">
        <p>{step.detail}</p>
        {"command" in step && (
          <code className="bg-muted block overflow-x-auto rounded px-2 py-1 font-mono text-xs whitespace-pre" data-testid="next-step-command">
            {step.command}
          </code>
        )}
        {canMerge && <MergeButton runId={run.id} base={base} />}
        {"url" in step && step.url && (
          <Button asChild size="sm" variant={step.kind === "merged" ? "outline" : "default"}>
            <a href={step.url} target="_blank" rel="noreferrer">
              {step.kind === "open_pr" ? "Open a pull request on GitHub" : step.kind === "review_pr" ? "Review the pull request" : "View the pull request"}
              <ExternalLink className="size-3.5" aria-hidden />
            </a>
          </Button>
        )}
      </AlertDescription>
    </Alert>
  );
}
