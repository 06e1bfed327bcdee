import { useEffect, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";
import { QueryClient, QueryClientProvider, useQuery, useQueryClient } from "@tanstack/react-query";
import { apiGet, runKeys, type RunDetail } from "../../../../components/runs/api";
import { Markdown } from "../../../../components/runs/markdown";
import { StatusBadge } from "../../../../components/runs/status-badge";
import { ClarificationForm } from "../../../../components/run/clarification-form";
import { ApprovalCard, FixDecisionCard, GateCard, PausedCard } from "../../../../components/run/decision-cards";
import { PlanPanel } from "../../../../components/run/plan-panel";
import { planVersions, taskTriage, validations, type ApiEvent } from "../../../../lib/dashboard/timeline";
import type { PlanDocument } from "../../../../lib/workflow/events";
import { installFetchBridge, type VsCodeApi } from "./fetch-bridge";

/*
 * The run panel: the dashboard's own decision cards, question forms, plan panel (with its Mermaid diagram) and report,
 * composed the way components/run/run-view.tsx composes them, minus the parts a browser tab needs (links, SSE). The host
 * posts "refresh" when the run's stream moves, and the cards' own mutations invalidate the queries as they do on the web.
 */

declare function acquireVsCodeApi(): VsCodeApi;

type Section = "decide" | "plan" | "report";

function RunPanel({ runId, initialSection, vscode }: { runId: string; initialSection: Section; vscode: VsCodeApi }) {
  const [section, setSection] = useState<Section>(initialSection);
  const queryClient = useQueryClient();
  useEffect(() => {
    const onSection = (event: MessageEvent<{ type?: string; section?: Section }>) => {
      if (event.data?.type === "section" && event.data.section) setSection(event.data.section);
    };
    window.addEventListener("message", onSection);
    return () => window.removeEventListener("message", onSection);
  }, []);
  const detail = useQuery({ queryKey: runKeys.detail(runId), queryFn: () => apiGet<RunDetail>(`/api/runs/${encodeURIComponent(runId)}`) });
  const events = useQuery({
    queryKey: runKeys.events(runId),
    queryFn: async () => (await apiGet<{ events: ApiEvent[] }>(`/api/runs/${encodeURIComponent(runId)}/events?after=0&limit=2000`)).events,
  });
  const lastSequence = detail.data?.run.lastSequence;
  // A decision made here changes the run: re-read its events too, and let the tree refresh at once.
  useEffect(() => {
    if (lastSequence === undefined) return;
    void queryClient.invalidateQueries({ queryKey: runKeys.events(runId), exact: true });
    vscode.postMessage({ type: "decided" });
  }, [lastSequence, queryClient, runId, vscode]);
  const list = events.data ?? [];
  const versions = useMemo(() => planVersions(list), [list]);
  const triage = useMemo(() => taskTriage(list), [list]);
  const results = useMemo(() => validations(list), [list]);

  if (detail.error) {
    return (
      <p role="alert" className="text-destructive p-4 text-sm" data-testid="panel-error">
        Could not load {runId}: {detail.error.message}
      </p>
    );
  }
  if (!detail.data) return <p className="text-muted-foreground p-4 text-sm">Loading {runId}…</p>;
  const { run, gates, clarifications } = detail.data;
  const pendingGate = run.pendingGate ? gates.find((g) => g.id === run.pendingGate!.gateId) ?? null : null;
  const pendingQuestion = run.pendingClarification ? clarifications.find((c) => c.id === run.pendingClarification!.clarificationId) ?? null : null;
  const gatePlan = (pendingGate?.context as { plan?: PlanDocument } | null)?.plan ?? versions.at(-1)?.plan ?? null;
  const lastReport = results.at(-1);
  const planGate = run.status === "awaiting_approval" && pendingGate?.kind === "plan" ? pendingGate : null;
  const tab = (value: Section, label: string) => (
    <button
      type="button"
      role="tab"
      aria-selected={section === value}
      onClick={() => setSection(value)}
      className={`rounded-md px-3 py-1 text-sm ${section === value ? "bg-secondary font-medium" : "text-muted-foreground"}`}
    >
      {label}
    </button>
  );

  return (
    <div className="space-y-4 p-4" data-testid="run-panel" data-status={run.status}>
      <header className="flex flex-wrap items-center gap-2">
        <h1 className="text-lg font-semibold">{run.title}</h1>
        <StatusBadge status={run.status} />
        <span className="text-muted-foreground font-mono text-xs">{run.id}</span>
      </header>
      <nav role="tablist" className="flex gap-1">
        {tab("decide", "Decision")}
        {tab("plan", `Plan${versions.length > 1 ? ` (${versions.length})` : ""}`)}
        {tab("report", "Report")}
        <button type="button" className="text-muted-foreground px-3 py-1 text-sm underline" onClick={() => vscode.postMessage({ type: "open-diff" })}>
          Branch diff ↗
        </button>
      </nav>

      {section === "decide" && (
        <div className="space-y-4" data-testid="decide">
          {planGate && (
            <ApprovalCard key={planGate.id} run={run} gate={planGate} plan={gatePlan}>
              <PlanPanel versions={versions} fallback={gatePlan} people={detail.data.people} triage={triage} />
            </ApprovalCard>
          )}
          {run.status === "awaiting_approval" && pendingGate && pendingGate.kind !== "plan" && pendingGate.kind !== "fix" && <GateCard key={pendingGate.id} run={run} gate={pendingGate} />}
          {(run.status === "awaiting_fix_decision" || (run.status === "awaiting_approval" && pendingGate?.kind === "fix")) && (
            <FixDecisionCard key={pendingGate?.id ?? "fix"} run={run} gate={pendingGate} fallbackReport={lastReport?.report} />
          )}
          {run.status === "awaiting_clarification" && pendingQuestion && <ClarificationForm key={pendingQuestion.id} run={run} clarification={pendingQuestion} />}
          {run.status === "paused" && <PausedCard run={run} />}
          {!pendingGate && !pendingQuestion && run.status !== "paused" && run.status !== "awaiting_fix_decision" && (
            <p className="text-muted-foreground text-sm" data-testid="nothing-to-decide">
              Nothing waits for you on this run ({run.status.replace(/_/g, " ")}).
            </p>
          )}
        </div>
      )}
      {section === "plan" && (
        <div data-testid="plan">
          <PlanPanel versions={versions} fallback={gatePlan} people={detail.data.people} triage={triage} />
        </div>
      )}
      {section === "report" && (
        <div className="space-y-3" data-testid="report">
          {results.length === 0 && <p className="text-muted-foreground text-sm">No validation report yet.</p>}
          {results.map((r) => (
            <section key={`${r.attempt}-${r.timestamp}`} className="rounded-md border p-3">
              <h2 className="mb-2 text-sm font-medium">
                Validation attempt {r.attempt}: {r.passed ? "passed" : "failed"}
                {r.score !== undefined ? ` (alignment ${r.score})` : ""}
              </h2>
              {r.report ? <Markdown>{r.report}</Markdown> : r.summary ? <p className="text-sm">{r.summary}</p> : null}
            </section>
          ))}
        </div>
      )}
    </div>
  );
}

const root = document.getElementById("root")!;
const vscode = acquireVsCodeApi();
const queryClient = new QueryClient({ defaultOptions: { queries: { retry: false, refetchOnWindowFocus: false } } });
installFetchBridge({
  vscode,
  onMessage: (message) => {
    if (message.type === "refresh") void queryClient.invalidateQueries({ queryKey: ["run"] });
  },
});
createRoot(root).render(
  <QueryClientProvider client={queryClient}>
    <RunPanel runId={root.dataset.runId!} initialSection={(root.dataset.section as Section) ?? "decide"} vscode={vscode} />
  </QueryClientProvider>,
);
