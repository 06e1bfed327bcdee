import { withParsedDiagram, type DiagramKind } from "./parser";

/**
 * What a plan's diagram commits the implementation to (the seed's constraint extraction). The validator and the
 * dashboard read these; the implementer sees them as part of the plan.
 */
export type ConditionalBranch = {
  /** The decision node's text, e.g. "Authenticated?". */
  condition: string;
  branches: Array<{ label: string; target: string }>;
};

export type DataEntity = { name: string; attributes: Array<{ type: string; name: string; keys: string[] }> };

export type MermaidConstraints = {
  diagramType: DiagramKind;
  /** Flowchart nodes that are places the user reaches (plain, rounded, stadium … boxes). */
  requiredRoutes: string[];
  /** Building blocks: flowchart databases / subroutines / subgraphs, classes of a class diagram. */
  requiredComponents: string[];
  conditionalBranches: ConditionalBranch[];
  dataEntities: DataEntity[];
  relationships: Array<{ from: string; to: string; label: string }>;
  participants: string[];
  /** States of a state diagram (start and end markers excluded). */
  states: string[];
  /** Plain-language rules a reviewer can check one by one. */
  validationRules: string[];
};

type Vertex = { id: string; text?: string; type?: string };
type Edge = { start: string; end: string; text?: string };

const COMPONENT_SHAPES = new Set(["cylinder", "subroutine", "hexagon", "doublecircle", "lean_right", "lean_left"]);
const DECISION_SHAPES = new Set(["diamond"]);

function clean(text: string | undefined): string {
  return (text ?? "")
    .replace(/<br\s*\/?>/gi, " ")
    .replace(/\\/g, "")
    .replace(/\s+/g, " ")
    .trim();
}

function empty(kind: DiagramKind): MermaidConstraints {
  return {
    diagramType: kind,
    requiredRoutes: [],
    requiredComponents: [],
    conditionalBranches: [],
    dataEntities: [],
    relationships: [],
    participants: [],
    states: [],
    validationRules: [],
  };
}

function fromFlowchart(db: {
  getVertices(): Map<string, Vertex>;
  getEdges(): Edge[];
  getSubGraphs(): Array<{ title?: string }>;
}): MermaidConstraints {
  const out = empty("flowchart");
  const vertices = [...db.getVertices().values()];
  const label = new Map(vertices.map((v) => [v.id, clean(v.text) || v.id]));
  const edges = db.getEdges();
  for (const v of vertices) {
    const text = label.get(v.id)!;
    if (DECISION_SHAPES.has(v.type ?? "")) {
      const branches = edges
        .filter((e) => e.start === v.id)
        .map((e) => ({ label: clean(e.text), target: label.get(e.end) ?? e.end }));
      out.conditionalBranches.push({ condition: text, branches });
    } else if (COMPONENT_SHAPES.has(v.type ?? "")) {
      out.requiredComponents.push(text);
    } else {
      out.requiredRoutes.push(text);
    }
  }
  for (const sg of db.getSubGraphs()) {
    const title = clean(sg.title);
    if (title && !out.requiredComponents.includes(title)) out.requiredComponents.push(title);
  }
  for (const e of edges) {
    out.relationships.push({ from: label.get(e.start) ?? e.start, to: label.get(e.end) ?? e.end, label: clean(e.text) });
  }
  out.validationRules.push(...out.requiredRoutes.map((r) => `Route "${r}" exists`));
  out.validationRules.push(...out.requiredComponents.map((c) => `Component "${c}" exists`));
  for (const b of out.conditionalBranches) {
    for (const br of b.branches) {
      out.validationRules.push(
        br.label ? `When "${b.condition}" is "${br.label}", go to "${br.target}"` : `"${b.condition}" can lead to "${br.target}"`,
      );
    }
  }
  return out;
}

function fromSequence(db: {
  getActors(): Map<string, { name: string; description?: string }>;
  getMessages(): Array<{ from?: string; to?: string; message?: string }>;
}): MermaidConstraints {
  const out = empty("sequence");
  const actors = [...db.getActors().values()];
  const name = new Map(actors.map((a) => [a.name, clean(a.description) || a.name]));
  out.participants = actors.map((a) => name.get(a.name)!);
  for (const m of db.getMessages()) {
    if (!m.from || !m.to || !m.message) continue;
    const rel = { from: name.get(m.from) ?? m.from, to: name.get(m.to) ?? m.to, label: clean(m.message) };
    out.relationships.push(rel);
    out.validationRules.push(`${rel.from} sends "${rel.label}" to ${rel.to}`);
  }
  return out;
}

function fromClass(db: {
  getClasses(): Map<string, { id: string; label?: string }>;
  getRelations(): Array<{ id1: string; id2: string; title?: string }>;
}): MermaidConstraints {
  const out = empty("class");
  out.requiredComponents = [...db.getClasses().values()].map((c) => clean(c.label) || c.id);
  for (const r of db.getRelations()) out.relationships.push({ from: r.id1, to: r.id2, label: clean(r.title) });
  out.validationRules.push(...out.requiredComponents.map((c) => `Class "${c}" exists`));
  return out;
}

function fromEr(db: {
  getEntities(): Map<string, { id: string; label?: string; attributes?: Array<{ type?: string; name?: string; keys?: string[] }> }>;
  getRelationships(): Array<{ entityA: string; entityB: string; roleA?: string }>;
}): MermaidConstraints {
  const out = empty("er");
  const entities = [...db.getEntities().entries()];
  const nameById = new Map<string, string>();
  for (const [key, e] of entities) {
    const name = clean(e.label) || key;
    nameById.set(e.id, name);
    nameById.set(key, name);
    out.dataEntities.push({
      name,
      attributes: (e.attributes ?? []).map((a) => ({ type: clean(a.type), name: clean(a.name), keys: a.keys ?? [] })),
    });
  }
  for (const r of db.getRelationships()) {
    const rel = { from: nameById.get(r.entityA) ?? r.entityA, to: nameById.get(r.entityB) ?? r.entityB, label: clean(r.roleA) };
    out.relationships.push(rel);
    out.validationRules.push(`${rel.from} ${rel.label || "relates to"} ${rel.to}`);
  }
  out.validationRules.unshift(...out.dataEntities.map((e) => `Entity "${e.name}" is stored`));
  return out;
}

function fromState(db: {
  getStates(): Map<string, { id: string; descriptions?: string[] }>;
  getRelations(): Array<{ id1: string; id2: string; relationTitle?: string }>;
}): MermaidConstraints {
  const out = empty("state");
  const isMarker = (id: string) => /(^|_)(start|end)$/.test(id) && id.startsWith("root_");
  out.states = [...db.getStates().keys()].filter((id) => !isMarker(id));
  const show = (id: string) => (isMarker(id) ? (id.endsWith("start") ? "[*] start" : "[*] end") : id);
  for (const r of db.getRelations()) {
    const rel = { from: show(r.id1), to: show(r.id2), label: clean(r.relationTitle) };
    out.relationships.push(rel);
    out.validationRules.push(`${rel.from} → ${rel.to}${rel.label ? ` on "${rel.label}"` : ""}`);
  }
  return out;
}

/** Validate a diagram with mermaid's grammar and extract its constraints. Throws MermaidError with the line. */
export async function extractConstraints(source: string): Promise<MermaidConstraints> {
  return withParsedDiagram(source, ({ kind, db }) => {
    switch (kind) {
      case "flowchart":
        return fromFlowchart(db as Parameters<typeof fromFlowchart>[0]);
      case "sequence":
        return fromSequence(db as Parameters<typeof fromSequence>[0]);
      case "class":
        return fromClass(db as Parameters<typeof fromClass>[0]);
      case "er":
        return fromEr(db as Parameters<typeof fromEr>[0]);
      case "state":
        return fromState(db as Parameters<typeof fromState>[0]);
    }
  });
}

/** Validate only; resolves to the diagram kind. */
export async function validateMermaid(source: string): Promise<{ kind: DiagramKind }> {
  return withParsedDiagram(source, ({ kind }) => ({ kind }));
}
