import type { LanguageModel } from "ai";
import type { ModelCallContext } from "@/lib/ai/call";

/** What an agent's model step is given: which model, the call's context, the run's cancellation and the step's end. */
export type ModelStepOptions = {
  modelId: string;
  /** A model object instead of the registry's (tests, the eval). */
  model?: LanguageModel;
  context: Omit<ModelCallContext, "stage">;
  /** Aborts the model call where it is (the run was cancelled, or the stage ran past its deadline). */
  signal?: AbortSignal;
  /**
   * The end of the durable step (epoch ms on `now`): a model call unanswered by then is aborted with
   * StepBudgetExceededError (lib/agents/step-budget.ts), to be made again in a fresh step.
   */
  stepEndsAt?: number;
  now?: () => number;
};
