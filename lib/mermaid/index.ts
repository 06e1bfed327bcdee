export { MermaidError, MermaidTooComplexError } from "./errors";
export { DIAGRAM_LIMITS } from "./limits";
export { SUPPORTED_DIAGRAMS, stripFence, warmUpMermaid, type DiagramKind } from "./parser";
export {
  extractConstraints,
  validateMermaid,
  type ConditionalBranch,
  type DataEntity,
  type MermaidConstraints,
} from "./constraints";
export { hasExternalContent, sanitizeDiagram } from "./sanitize";
export { parseFlowGraph } from "./graph";
export {
  changedTaskIds,
  colourByStatus,
  diffDiagrams,
  isSafeNodeId,
  taskNodes,
  TASK_STATUSES,
  type DiagramDiff,
  type FlowGraph,
  type TaskStatus,
} from "./plan-diagram";
