export { callModel, classifyError, defaultBackoff, isModelCallError, ModelCallError, type ModelCallContext, type ModelFailureReason } from "./call";
export { createDemoModel, DEMO_LABEL } from "./demo/model";
export { parseInstructions, slugify, type DemoInstructions } from "./demo/instructions";
export { costUsd, priceOf } from "./prices";
export { readSection, section } from "./prompt-sections";
export {
  contextWindowOf,
  getLanguageModel,
  isDemoModel,
  modelLabel,
  parseModelId,
  PROVIDER_IDS,
  PROVIDERS,
  type ParsedModelId,
  type ProviderId,
} from "./providers";
export {
  checkModelId,
  checkRouting,
  DEMO_MODEL_ID,
  defaultRouting,
  modelIdForStage,
  ROLE_BY_STAGE,
  type AgentRole,
  type ModelRouting,
} from "./routing";
export { createScriptedModel, estimateTokens, instructionText, promptText, type ScriptedReply, type ScriptedRespond } from "./scripted-model";
