"use client";

import { useEffect, useMemo, useState } from "react";
import { MermaidDiagram, loadMermaid } from "./mermaid-diagram";
import {
  changedTaskIds,
  colourByStatus,
  diffDiagrams,
  graphFromFlowDb,
  isFlowchartSource,
  TASK_STATUSES,
  type FlowGraph,
  type TaskStatus,
} from "@/lib/mermaid/plan-diagram";
import type { PlanDocument } from "@/lib/workflow/events";

// mermaid keeps per-diagram-type state while it parses: one parse at a time.
let queue: Promise<unknown> = Promise.resolve();

/** A flowchart's nodes and edges, read with the mermaid the browser renders with (null: not a flowchart, or unreadable). */
function parseInBrowser(source: string): Promise<FlowGraph | null> {
  const run = queue.then(async () => {
    if (!isFlowchartSource(source)) return null;
    const mermaid = await loadMermaid();
    const diagram = await mermaid.mermaidAPI.getDiagramFromText(source);
    return graphFromFlowDb(diagram.db);
  });
  queue = run.catch(() => undefined);
  return run.catch(() => null);
}

/** The parsed graph of each source; undefined while parsing. */
function useFlowGraphs(sources: string[]): Array<FlowGraph | null> | undefined {
  const key = JSON.stringify(sources);
  const [graphs, setGraphs] = useState<{ key: string; graphs: Array<FlowGraph | null> } | null>(null);
  useEffect(() => {
    let cancelled = false;
    void Promise.all((JSON.parse(key) as string[]).map(parseInBrowser)).then((g) => !cancelled && setGraphs({ key, graphs: g }));
    return () => {
      cancelled = true;
    };
  }, [key]);
  return graphs?.key === key ? graphs.graphs : undefined;
}

const STATUS_SWATCH: Record<TaskStatus, string> = {
  pending: "bg-slate-100 border-slate-400",
  running: "bg-blue-100 border-blue-600",
  done: "bg-green-100 border-green-600",
  failed: "bg-red-100 border-red-600",
  skipped: "bg-neutral-50 border-neutral-400 border-dashed",
};

function Legend({ items, testId }: { items: Array<{ key: string; label: string; swatch: string; count?: number }>; testId: string }) {
  return (
    <ul className="text-muted-foreground flex flex-wrap gap-3 text-xs" data-testid={testId}>
      {items.map((i) => (
        <li key={i.key} className="flex items-center gap-1.5" data-key={i.key}>
          <span aria-hidden className={`inline-block size-3 rounded-sm border-2 ${i.swatch}`} />
          {i.label}
          {i.count !== undefined ? ` (${i.count})` : ""}
        </li>
      ))}
    </ul>
  );
}

/**
 * The plan's diagram with each task's node coloured by its status (from the run's events, live over the stream). A
 * diagram that is not a flowchart, or whose nodes name no task, is shown as it is.
 */
export function StatusDiagram({ plan, statuses }: { plan: PlanDocument; statuses: Record<string, TaskStatus> }) {
  const graphs = useFlowGraphs([plan.mermaid]);
  const coloured = useMemo(
    () => (graphs ? colourByStatus({ source: plan.mermaid, graph: graphs[0] ?? null, tasks: plan.tasks, statuses }) : null),
    [graphs, plan, statuses],
  );
  const shown = coloured && Object.keys(coloured.coloured).length ? coloured : null;
  const counts = TASK_STATUSES.map((s) => ({ s, n: Object.values(shown?.coloured ?? {}).filter((v) => v === s).length }));
  // The statuses as data attributes: what a browser check reads without parsing the SVG.
  const data = Object.entries(shown?.coloured ?? {})
    .map(([task, status]) => `${task}:${status}`)
    .join(" ");
  return (
    <div className="space-y-2" data-testid="status-diagram" data-statuses={data}>
      <MermaidDiagram source={shown?.source ?? plan.mermaid} label="Plan diagram, coloured by task status" />
      {shown && (
        <Legend
          testId="status-legend"
          items={counts.filter(({ s, n }) => n > 0 || s !== "skipped").map(({ s, n }) => ({ key: s, label: s, swatch: STATUS_SWATCH[s], count: n }))}
        />
      )}
    </div>
  );
}

/**
 * Two plan versions on one diagram: added (green), removed (red, dashed) and changed (amber) nodes and edges, with a
 * legend. Only flowcharts can be merged; otherwise the text diff below says what changed.
 */
export function PlanDiagramDiff({ from, to, fromVersion, toVersion }: { from: PlanDocument; to: PlanDocument; fromVersion: number; toVersion: number }) {
  const graphs = useFlowGraphs([from.mermaid, to.mermaid]);
  const diff = useMemo(() => {
    if (!graphs || !graphs[0] || !graphs[1]) return null;
    return diffDiagrams({ from: graphs[0], to: graphs[1], changedTasks: changedTaskIds(from.tasks, to.tasks), fromTasks: from.tasks, toTasks: to.tasks });
  }, [graphs, from, to]);
  if (!graphs) return null;
  if (!diff) {
    return (
      <p className="text-muted-foreground text-xs" data-testid="plan-diagram-diff-unavailable">
        The visual comparison is for flowcharts; the text comparison below shows what changed.
      </p>
    );
  }
  const n = (k: "added" | "removed" | "changed") => diff.nodes[k].length + diff.edges[k].length;
  return (
    <div
      className="space-y-2"
      data-testid="plan-diagram-diff"
      data-added={diff.nodes.added.join(" ")}
      data-removed={diff.nodes.removed.join(" ")}
      data-changed={diff.nodes.changed.join(" ")}
    >
      <div className="bg-background rounded-md border p-3">
        <MermaidDiagram source={diff.source} label={`Plan v${fromVersion} and v${toVersion} on one diagram`} />
      </div>
      <Legend
        testId="plan-diagram-diff-legend"
        items={[
          { key: "added", label: `added in v${toVersion}`, swatch: "bg-green-100 border-green-600", count: n("added") },
          { key: "removed", label: `removed since v${fromVersion}`, swatch: "bg-red-100 border-red-600 border-dashed", count: n("removed") },
          { key: "changed", label: "changed", swatch: "bg-amber-100 border-amber-600", count: n("changed") },
        ]}
      />
    </div>
  );
}
