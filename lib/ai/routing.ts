import { getEnv, type Env } from "@/lib/env";
import type { RunConfig, Stage } from "@/lib/workflow/config";
import { isProviderId, PROVIDER_IDS, PROVIDERS } from "./providers";

export type ModelRouting = RunConfig["modelRouting"];
export type AgentRole = keyof ModelRouting;

export const ROLE_BY_STAGE: Partial<Record<Stage, AgentRole>> = {
  planning: "planner",
  implementation: "implementer",
  validation: "validator",
};

export const DEMO_MODEL_ID = "demo:default";

/** The seed's choices per stage, and the order in which a configured provider stands in for a missing one. */
const SEED_CHOICE: Record<AgentRole, string> = {
  planner: "deepseek:deepseek-reasoner",
  implementer: "anthropic:claude-sonnet-4-5",
  validator: "openai:gpt-4o-mini",
};
const STAND_INS: Record<AgentRole, string[]> = {
  planner: ["anthropic:claude-sonnet-4-5", "openai:gpt-4o", "google:gemini-2.5-pro"],
  implementer: ["openai:gpt-4.1", "google:gemini-2.5-pro", "deepseek:deepseek-chat"],
  validator: ["anthropic:claude-haiku-4-5", "google:gemini-2.5-flash", "deepseek:deepseek-chat"],
};

function available(id: string, env: Env): boolean {
  return checkModelId(id, env) === undefined;
}

/**
 * Default routing: each stage's seed model when its provider's key is present, otherwise another configured provider's
 * model, and the demo model only when no provider is configured at all (a run never mixes demo and real stages by
 * default).
 */
export function defaultRouting({ env = getEnv() }: { env?: Env } = {}): ModelRouting {
  const pick = (role: AgentRole) =>
    [SEED_CHOICE[role], ...STAND_INS[role]].find((id) => available(id, env)) ?? DEMO_MODEL_ID;
  return { planner: pick("planner"), implementer: pick("implementer"), validator: pick("validator") };
}

/** Why a model id cannot be used with this environment, or undefined when it can. */
export function checkModelId(id: string, env: Env = getEnv()): string | undefined {
  const at = id.indexOf(":");
  const provider = at > 0 ? id.slice(0, at) : "";
  if (!isProviderId(provider) || at === id.length - 1) {
    return `"${id}" is not a known model: use provider:model with provider one of ${PROVIDER_IDS.join(", ")}.`;
  }
  const info = PROVIDERS[provider];
  if (info.requiredEnv && !env[info.requiredEnv]) {
    return `"${id}" uses ${info.label}, which is not configured: set ${info.requiredEnv}.`;
  }
  return undefined;
}

/**
 * What the run-creation API calls: every problem with a routing, as messages naming the stage and the variable to set.
 * An empty list means the run may start.
 */
export function checkRouting(
  routing: Partial<ModelRouting>,
  { env = getEnv() }: { env?: Env } = {},
): Array<{ role: AgentRole; modelId: string; message: string }> {
  const problems: Array<{ role: AgentRole; modelId: string; message: string }> = [];
  for (const role of ["planner", "implementer", "validator"] as const) {
    const id = routing[role];
    if (id === undefined) continue;
    const problem = checkModelId(id, env);
    if (problem) problems.push({ role, modelId: id, message: `modelRouting.${role}: ${problem}` });
  }
  return problems;
}

/** The model id a stage of a run uses. */
export function modelIdForStage(config: Pick<RunConfig, "modelRouting">, stage: Stage): string {
  const role = ROLE_BY_STAGE[stage];
  if (!role) throw new Error(`Stage "${stage}" does not call a model.`);
  return config.modelRouting[role];
}
