import { getEnv, type Env } from "@/lib/env";
import { checkModelId, DEMO_MODEL_ID, defaultRouting, modelLabel, PROVIDER_IDS, PROVIDERS } from "@/lib/ai";

/** Models offered per provider in the New run form; any other `provider:model` id still works through the API. */
const SUGGESTED: Record<string, string[]> = {
  openai: ["gpt-4.1", "gpt-4o", "gpt-4o-mini", "gpt-5", "gpt-5-mini"],
  anthropic: ["claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"],
  deepseek: ["deepseek-reasoner", "deepseek-chat"],
  google: ["gemini-2.5-pro", "gemini-2.5-flash"],
  demo: ["default"],
};

export type ModelChoice = { id: string; label: string; provider: string; demo: boolean };

/**
 * The model choices of this deployment: every suggested model of each configured provider (the demo model always,
 * labelled as scripted), plus whatever the default routing picks, and the defaults per stage.
 */
export function modelChoices({ env = getEnv() }: { env?: Env } = {}): {
  choices: ModelChoice[];
  defaults: { planner: string; implementer: string; validator: string };
} {
  const defaults = defaultRouting({ env });
  const ids = new Set<string>();
  for (const provider of PROVIDER_IDS) {
    for (const model of SUGGESTED[provider] ?? []) ids.add(`${provider}:${model}`);
  }
  ids.add(DEMO_MODEL_ID);
  for (const id of Object.values(defaults)) ids.add(id);
  const choices = [...ids]
    .filter((id) => checkModelId(id, env) === undefined)
    .map((id) => {
      const provider = id.slice(0, id.indexOf(":"));
      return { id, label: modelLabel(id), provider, demo: provider === "demo" };
    })
    // Real providers first, the scripted demo model last.
    .sort((a, b) => Number(a.demo) - Number(b.demo) || a.id.localeCompare(b.id));
  return { choices, defaults };
}

/** Providers and whether each is configured (for the projects page's help text). */
export function providerStatus({ env = getEnv() }: { env?: Env } = {}) {
  return PROVIDER_IDS.map((id) => {
    const info = PROVIDERS[id];
    return { id, label: info.label, configured: !info.requiredEnv || !!env[info.requiredEnv], requiredEnv: info.requiredEnv ?? null };
  });
}
