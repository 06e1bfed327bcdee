export {
  answerClarification,
  applyPolicyDecision,
  applyDebugReplan,
  applyReplanDecision,
  applySentBackDecision,
  collectCommand,
  DEFAULT_MAX_ITERATIONS,
  implementerTurn,
  reopenTask,
  StepBudgetExceededError,
  startImplementer,
  type ContextBudget,
  type PromptInfo,
  type ImplementerFailureReason,
  type ImplementerState,
  type ImplementerTurnResult,
} from "./implementer";
export { checkCommand, checkWrite, deleteTargets, destructive, matchesGlob, type Policy, type PolicyAction, type PolicyRefusal } from "./policy";
export { changedFilesOfDiff, inScope, workspacePath } from "./paths";
export { commandArgv } from "@/lib/sandbox/command-line";
export { describePlan, planScope, plannerOutputSchema, type AcceptanceCriterion, type Plan, type PlanTask } from "./plan";
export { PlannerError, runPlanner, type PlannerInput, type PlannerResult, type PlannerRetry } from "./planner";
export { CLARIFICATION_RESPONSE_TYPES, implementerTools, type ClarificationResponseType, type Todo } from "./tools";
export {
  DEFAULT_SCORE_THRESHOLD,
  reviewSchema,
  runChecks,
  runValidateStep,
  runValidator,
  validationReport,
  type CheckResult,
  type Finding,
  type PendingCheck,
  type ValidationProgress,
  type ValidationResult,
} from "./validator";
export {
  DEBUG_ACTIONS,
  DEBUG_CATEGORIES,
  parseDebugVerdict,
  runDebugger,
  type DebugAction,
  type DebugCategory,
  type DebugVerdict,
  type VerifyFailure,
} from "./debugger";
export { boundConversation, conversationTokens, messageTokens, type BoundedPrompt } from "./context";
export { canDetach, execWithinStep, stepBudgetSignal, waitDetached } from "./step-budget";
export { INSTRUCTION_LIMITS, instructionCandidates, loadRepositoryInstructions, type InstructionFile, type RepositoryInstructions } from "./instructions";
