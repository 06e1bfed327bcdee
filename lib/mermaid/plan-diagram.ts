import type { PlanDocument } from "@/lib/workflow/events";

/*
 * The plan's flowchart, coloured: by task status as a run moves (classDef/class lines appended to the planner's own
 * diagram), and as a visual diff of two plan versions (one merged diagram, regenerated from both parsed graphs).
 *
 * The diagram is model output, so nothing of it is copied into a line we write except node ids that mermaid's own parser
 * produced and that pass a strict pattern; the merged diff diagram uses ids of our own and escaped labels. This module
 * is pure (no mermaid import): the server parses with lib/mermaid/graph.ts, the browser with the mermaid it renders with,
 * and both hand the parsed flowchart here.
 */

/** A parsed flowchart as this module needs it: nodes (id, label, shape) and edges, in the parser's order. */
export type FlowGraph = {
  nodes: Array<{ id: string; label: string; shape: string }>;
  edges: Array<{ from: string; to: string; label: string }>;
};

export type TaskStatus = "pending" | "running" | "done" | "failed" | "skipped";

export const TASK_STATUSES: readonly TaskStatus[] = ["pending", "running", "done", "failed", "skipped"];

/** The class each status gets, and its look. Fixed strings: no part of a plan ever reaches these lines. */
const STATUS_CLASS: Record<TaskStatus, { name: string; style: string }> = {
  pending: { name: "ghPending", style: "fill:#f1f5f9,stroke:#94a3b8,color:#334155" },
  running: { name: "ghRunning", style: "fill:#dbeafe,stroke:#2563eb,stroke-width:3px,color:#1e3a8a" },
  done: { name: "ghDone", style: "fill:#dcfce7,stroke:#16a34a,color:#14532d" },
  failed: { name: "ghFailed", style: "fill:#fee2e2,stroke:#dc2626,stroke-width:3px,color:#7f1d1d" },
  skipped: { name: "ghSkipped", style: "fill:#fafafa,stroke:#a3a3a3,stroke-dasharray:4 3,color:#737373" },
};

export type DiffMark = "added" | "removed" | "changed" | "same";

const DIFF_CLASS: Record<Exclude<DiffMark, "same">, { name: string; style: string }> = {
  added: { name: "ghAdded", style: "fill:#dcfce7,stroke:#16a34a,stroke-width:3px,color:#14532d" },
  removed: { name: "ghRemoved", style: "fill:#fee2e2,stroke:#dc2626,stroke-width:2px,stroke-dasharray:5 3,color:#7f1d1d" },
  changed: { name: "ghChanged", style: "fill:#fef3c7,stroke:#d97706,stroke-width:3px,color:#78350f" },
};

const EDGE_STYLE: Record<Exclude<DiffMark, "same">, string> = {
  added: "stroke:#16a34a,stroke-width:3px",
  removed: "stroke:#dc2626,stroke-width:2px,stroke-dasharray:5 3",
  changed: "stroke:#d97706,stroke-width:3px",
};

/** Words mermaid reads as syntax where a node id stands; a node so named is left uncoloured rather than risked. */
const RESERVED = new Set(["end", "graph", "flowchart", "subgraph", "class", "classdef", "style", "linkstyle", "click", "call", "href", "default", "direction"]);

/** A node id we may write into a `class` line: letters, digits and underscores only, as the parser gave it. */
export function isSafeNodeId(id: string): boolean {
  return /^[A-Za-z_][A-Za-z0-9_]{0,79}$/.test(id) && !RESERVED.has(id.toLowerCase());
}

/** Whether the diagram text is a flowchart (the only kind coloured); other kinds are shown as they are. */
export function isFlowchartSource(source: string): boolean {
  const first = source
    .split("\n")
    .map((l) => l.trim())
    .find((l) => l && !l.startsWith("%%") && l !== "---");
  return !!first && /^(?:flowchart|graph)\b/i.test(first);
}

function normalise(text: string): string {
  return text
    .replace(/<br\s*\/?>/gi, " ")
    .replace(/<[^>]*>/g, "")
    .replace(/[`*_]/g, "")
    .replace(/\s+/g, " ")
    .trim()
    .toLowerCase();
}

/**
 * Which diagram node shows which task: a node whose id is the task's id (or tasks.md's `t_<id>`), else one whose label
 * starts with the task's id ("T1: …") or is the task's title. Each node shows at most one task.
 */
export function taskNodes({ graph, tasks }: { graph: FlowGraph; tasks: PlanDocument["tasks"] }): Map<string, string> {
  const byTask = new Map<string, string>();
  const taken = new Set<string>();
  const pick = (taskId: string, match: (n: FlowGraph["nodes"][number]) => boolean) => {
    if (byTask.has(taskId)) return;
    const node = graph.nodes.find((n) => !taken.has(n.id) && match(n));
    if (!node) return;
    byTask.set(taskId, node.id);
    taken.add(node.id);
  };
  for (const t of tasks) pick(t.id, (n) => n.id === t.id);
  for (const t of tasks) pick(t.id, (n) => n.id === `t_${t.id.replace(/[^A-Za-z0-9_]/g, "_")}`);
  for (const t of tasks) {
    const id = t.id.toLowerCase();
    pick(t.id, (n) => {
      const label = normalise(n.label);
      return label === id || label.startsWith(`${id}:`) || label.startsWith(`${id} `) || label.startsWith(`${id}.`) || label.startsWith(`${id})`);
    });
  }
  for (const t of tasks) {
    const title = normalise(t.title);
    if (title) pick(t.id, (n) => normalise(n.label) === title);
  }
  return byTask;
}

/**
 * The planner's flowchart with each task's node coloured by its status (tasks without one are pending). Only classDef
 * lines of our own and `class` lines naming parser-given, pattern-checked ids are appended; the diagram itself is not
 * changed. A diagram that is not a flowchart comes back as it was.
 */
export function colourByStatus({
  source,
  graph,
  tasks,
  statuses,
}: {
  source: string;
  graph: FlowGraph | null;
  tasks: PlanDocument["tasks"];
  statuses: Record<string, TaskStatus>;
}): { source: string; coloured: Record<string, TaskStatus> } {
  if (!graph || !isFlowchartSource(source)) return { source, coloured: {} };
  const nodes = taskNodes({ graph, tasks });
  const groups = new Map<TaskStatus, string[]>();
  const coloured: Record<string, TaskStatus> = {};
  for (const task of tasks) {
    const node = nodes.get(task.id);
    if (!node || !isSafeNodeId(node)) continue;
    const status = TASK_STATUSES.includes(statuses[task.id]!) ? statuses[task.id]! : "pending";
    groups.set(status, [...(groups.get(status) ?? []), node]);
    coloured[task.id] = status;
  }
  if (groups.size === 0) return { source, coloured };
  const lines = TASK_STATUSES.filter((s) => groups.has(s)).flatMap((s) => [
    `  classDef ${STATUS_CLASS[s].name} ${STATUS_CLASS[s].style}`,
    `  class ${groups.get(s)!.join(",")} ${STATUS_CLASS[s].name}`,
  ]);
  return { source: `${source.replace(/\s+$/, "")}\n${lines.join("\n")}\n`, coloured };
}

/** A label as plain text inside `["…"]`: no markup, no quotes, no entity of the model's making. */
export function escapeLabel(text: string): string {
  const plain = text
    .replace(/<br\s*\/?>/gi, " ")
    .replace(/<[^>]*>/g, "")
    .replace(/[\r\n\t]+/g, " ")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, 120);
  return plain
    .replace(/#/g, "#35;")
    .replace(/"/g, "#quot;")
    .replace(/</g, "#lt;")
    .replace(/>/g, "#gt;")
    .replace(/`/g, "#96;")
    .replace(/[%|]/g, (c) => `#${c.charCodeAt(0)};`);
}

export type DiagramDiff = {
  /** The merged diagram: both versions' nodes and edges, marked. */
  source: string;
  nodes: { added: string[]; removed: string[]; changed: string[] };
  edges: { added: string[]; removed: string[]; changed: string[] };
};

const edgeKey = (e: { from: string; to: string }) => `${e.from}->${e.to}`;

/**
 * Two plan versions on one diagram: nodes and edges that were added (green), removed (red, dashed) or changed (amber:
 * another label or shape, or the task it shows was edited), the rest as they were. Nodes are matched by id, edges by
 * their ends. The diagram is written afresh with ids of our own (n0, n1 …) and escaped labels, so nothing of either
 * version can inject a line; subgraphs are flattened.
 */
export function diffDiagrams({
  from,
  to,
  changedTasks = [],
  fromTasks = [],
  toTasks = [],
}: {
  from: FlowGraph;
  to: FlowGraph;
  /** Ids of tasks whose definition changed between the versions: their nodes count as changed. */
  changedTasks?: string[];
  fromTasks?: PlanDocument["tasks"];
  toTasks?: PlanDocument["tasks"];
}): DiagramDiff {
  const fromNodes = new Map(from.nodes.map((n) => [n.id, n]));
  const toNodes = new Map(to.nodes.map((n) => [n.id, n]));
  // Ends of edges that name no declared node (a subgraph, say) still need a box.
  for (const [graph, nodes] of [
    [from, fromNodes],
    [to, toNodes],
  ] as const) {
    for (const e of graph.edges) for (const id of [e.from, e.to]) if (!nodes.has(id)) nodes.set(id, { id, label: id, shape: "square" });
  }
  const taskNodeIds = new Set<string>();
  const changedSet = new Set(changedTasks);
  for (const [graph, tasks] of [
    [from, fromTasks],
    [to, toTasks],
  ] as const) {
    for (const [task, node] of taskNodes({ graph, tasks })) if (changedSet.has(task)) taskNodeIds.add(node);
  }

  const order = [...toNodes.keys(), ...[...fromNodes.keys()].filter((id) => !toNodes.has(id))];
  const ours = new Map(order.map((id, i) => [id, `n${i}`]));
  const marks = new Map<string, DiffMark>();
  for (const id of order) {
    const a = fromNodes.get(id);
    const b = toNodes.get(id);
    marks.set(id, !a ? "added" : !b ? "removed" : normalise(a.label) !== normalise(b.label) || a.shape !== b.shape || taskNodeIds.has(id) ? "changed" : "same");
  }

  const lines = ["flowchart TD"];
  for (const id of order) {
    const node = toNodes.get(id) ?? fromNodes.get(id)!;
    const before = fromNodes.get(id);
    const label = marks.get(id) === "changed" && before && normalise(before.label) !== normalise(node.label) ? `${node.label} (was: ${before.label})` : node.label;
    lines.push(`  ${ours.get(id)}["${escapeLabel(label || id)}"]`);
  }

  const fromEdges = new Map<string, FlowGraph["edges"][number]>();
  for (const e of from.edges) if (!fromEdges.has(edgeKey(e))) fromEdges.set(edgeKey(e), e);
  const toEdges = new Map<string, FlowGraph["edges"][number]>();
  for (const e of to.edges) if (!toEdges.has(edgeKey(e))) toEdges.set(edgeKey(e), e);
  const edgeOrder = [...toEdges.keys(), ...[...fromEdges.keys()].filter((k) => !toEdges.has(k))];
  const edgeMarks: Array<{ key: string; mark: DiffMark }> = [];
  for (const key of edgeOrder) {
    const a = fromEdges.get(key);
    const b = toEdges.get(key);
    const e = (b ?? a)!;
    const mark: DiffMark = !a ? "added" : !b ? "removed" : normalise(a.label) !== normalise(b.label) ? "changed" : "same";
    const arrow = mark === "removed" ? "-.->" : mark === "same" ? "-->" : "==>";
    const label = e.label.trim() ? `|"${escapeLabel(e.label)}"|` : "";
    lines.push(`  ${ours.get(e.from)} ${arrow}${label} ${ours.get(e.to)}`);
    edgeMarks.push({ key, mark });
  }

  const nodeIds = (m: DiffMark) => order.filter((id) => marks.get(id) === m);
  for (const m of ["added", "removed", "changed"] as const) {
    const ids = nodeIds(m);
    if (!ids.length) continue;
    lines.push(`  classDef ${DIFF_CLASS[m].name} ${DIFF_CLASS[m].style}`, `  class ${ids.map((id) => ours.get(id)).join(",")} ${DIFF_CLASS[m].name}`);
  }
  edgeMarks.forEach(({ mark }, i) => {
    if (mark !== "same") lines.push(`  linkStyle ${i} ${EDGE_STYLE[mark]}`);
  });
  const edgesMarked = (m: DiffMark) => edgeMarks.filter((e) => e.mark === m).map((e) => e.key);
  return {
    source: `${lines.join("\n")}\n`,
    nodes: { added: nodeIds("added"), removed: nodeIds("removed"), changed: nodeIds("changed") },
    edges: { added: edgesMarked("added"), removed: edgesMarked("removed"), changed: edgesMarked("changed") },
  };
}

/** Tasks present in both plans whose title, description, files or dependencies differ. */
export function changedTaskIds(from: PlanDocument["tasks"], to: PlanDocument["tasks"]): string[] {
  const before = new Map(from.map((t) => [t.id, t]));
  const sig = (t: PlanDocument["tasks"][number]) => JSON.stringify([t.title, t.description ?? "", [...(t.files ?? [])].sort(), [...(t.dependsOn ?? [])].sort()]);
  return to.filter((t) => before.has(t.id) && sig(before.get(t.id)!) !== sig(t)).map((t) => t.id);
}

/** A flowchart database (mermaid's FlowDB after a parse) as a FlowGraph. */
export function graphFromFlowDb(db: unknown): FlowGraph | null {
  const flow = db as {
    getVertices?: () => Map<string, { id: string; text?: string; type?: string }> | Record<string, { id: string; text?: string; type?: string }>;
    getEdges?: () => Array<{ start: string; end: string; text?: string }>;
  };
  if (typeof flow?.getVertices !== "function" || typeof flow.getEdges !== "function") return null;
  const vertices = flow.getVertices();
  const list = vertices instanceof Map ? [...vertices.values()] : Object.values(vertices);
  return {
    nodes: list.map((v) => ({ id: String(v.id), label: String(v.text ?? v.id), shape: String(v.type ?? "square") })),
    edges: flow.getEdges().map((e) => ({ from: String(e.start), to: String(e.end), label: String(e.text ?? "") })),
  };
}
