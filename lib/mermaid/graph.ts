import { graphFromFlowDb, type FlowGraph } from "./plan-diagram";
import { withParsedDiagram } from "./parser";

/** A flowchart's nodes and edges, read with mermaid's own grammar; null for another kind of diagram. Throws MermaidError. */
export async function parseFlowGraph(source: string): Promise<FlowGraph | null> {
  return withParsedDiagram(source, ({ kind, db }) => (kind === "flowchart" ? graphFromFlowDb(db) : null));
}
