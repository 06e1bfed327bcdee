import { createAnthropic } from "@ai-sdk/anthropic";
import { createDeepSeek } from "@ai-sdk/deepseek";
import { createGoogleGenerativeAI } from "@ai-sdk/google";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModel } from "ai";
import { getEnv, type Env } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { createDemoModel } from "./demo/model";

/**
 * The provider registry: every model Gatehouse talks to is named `provider:model` and built here, so tests and the
 * demo model swap in behind the same interface.
 */

export const PROVIDER_IDS = ["openai", "anthropic", "deepseek", "google", "openai-compatible", "demo"] as const;
export type ProviderId = (typeof PROVIDER_IDS)[number];

type ProviderInfo = {
  label: string;
  /**
   * Context windows in tokens: `default` for a model of this provider not listed, `models` by name prefix (the longest
   * matching prefix wins). The implementer's conversation is summarised before it nears this (lib/agents/context.ts);
   * a run's `context.window` overrides it.
   */
  contextWindow: { default: number; models?: Record<string, number> };
  /** The variable that must be set before a run may use this provider. */
  requiredEnv?: keyof Env;
  create(env: Env, modelName: string): LanguageModel;
};

export const PROVIDERS: Record<ProviderId, ProviderInfo> = {
  openai: {
    label: "OpenAI",
    requiredEnv: "OPENAI_API_KEY",
    contextWindow: { default: 128_000, models: { "gpt-4.1": 1_047_576, "gpt-5": 400_000, o3: 200_000, "o4-mini": 200_000, "gpt-4o": 128_000 } },
    create: (env, name) => createOpenAI({ apiKey: env.OPENAI_API_KEY })(name),
  },
  anthropic: {
    label: "Anthropic",
    requiredEnv: "ANTHROPIC_API_KEY",
    contextWindow: { default: 200_000 },
    create: (env, name) => createAnthropic({ apiKey: env.ANTHROPIC_API_KEY })(name),
  },
  deepseek: {
    label: "DeepSeek",
    requiredEnv: "DEEPSEEK_API_KEY",
    contextWindow: { default: 64_000, models: { "deepseek-chat": 128_000, "deepseek-reasoner": 128_000 } },
    create: (env, name) => createDeepSeek({ apiKey: env.DEEPSEEK_API_KEY })(name),
  },
  google: {
    label: "Google",
    requiredEnv: "GOOGLE_GENERATIVE_AI_API_KEY",
    contextWindow: { default: 1_000_000 },
    create: (env, name) => createGoogleGenerativeAI({ apiKey: env.GOOGLE_GENERATIVE_AI_API_KEY })(name),
  },
  "openai-compatible": {
    label: "OpenAI-compatible server",
    requiredEnv: "OPENAI_COMPATIBLE_BASE_URL",
    // Local servers (Ollama, llama.cpp, vLLM) run with whatever context they were started with: a common size is
    // assumed; a server started with less needs the run's (or project's) context.window.
    contextWindow: { default: 32_768 },
    create: (env, name) =>
      createOpenAICompatible({
        name: "openai-compatible",
        baseURL: env.OPENAI_COMPATIBLE_BASE_URL!,
        apiKey: env.OPENAI_COMPATIBLE_API_KEY,
        includeUsage: true,
      }).chatModel(name),
  },
  demo: {
    label: "demo (scripted)",
    // Scripted, so no real limit; it follows its script by counting the turns it is sent, so it gets them all unless a
    // run sets context.window.
    contextWindow: { default: 10_000_000 },
    create: (_env, name) => createDemoModel(name),
  },
};

export type ParsedModelId = { provider: ProviderId; model: string; id: string };

export function isProviderId(value: string): value is ProviderId {
  return (PROVIDER_IDS as readonly string[]).includes(value);
}

/** Split `provider:model`; the model part may itself contain colons (e.g. Ollama tags `llama3.1:8b`). */
export function parseModelId(id: string): ParsedModelId {
  const at = id.indexOf(":");
  const provider = at > 0 ? id.slice(0, at) : "";
  const model = at > 0 ? id.slice(at + 1) : "";
  if (!isProviderId(provider) || !model) {
    throw new AppError(
      "bad_request:model",
      `Unknown model "${id}": use provider:model with provider one of ${PROVIDER_IDS.join(", ")}.`,
    );
  }
  return { provider, model, id };
}

export function isDemoModel(id: string): boolean {
  return id.startsWith("demo:");
}

/** The model's context window in tokens (the provider registry's), unless `override` (a run's `context.window`) is set. */
export function contextWindowOf(id: string, override?: number | null): number {
  if (override) return override;
  const { provider, model } = parseModelId(id);
  const { default: fallback, models = {} } = PROVIDERS[provider].contextWindow;
  const prefix = Object.keys(models)
    .filter((p) => model.startsWith(p))
    .sort((a, b) => b.length - a.length)[0];
  return prefix ? models[prefix]! : fallback;
}

/** How a model is shown in the dashboard; the demo model is always labelled as such. */
export function modelLabel(id: string): string {
  const { provider, model } = parseModelId(id);
  return provider === "demo" ? `demo (scripted) · ${model}` : `${PROVIDERS[provider].label} · ${model}`;
}

/** The one way to get a model: `getLanguageModel("anthropic:claude-sonnet-4-5")`. */
export function getLanguageModel(id: string, { env = getEnv() }: { env?: Env } = {}): LanguageModel {
  const { provider, model } = parseModelId(id);
  const info = PROVIDERS[provider];
  if (info.requiredEnv && !env[info.requiredEnv]) {
    throw new AppError("bad_request:model", `Model "${id}" needs ${info.requiredEnv} to be set.`);
  }
  return info.create(env, model);
}
