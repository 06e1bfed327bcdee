import type { ParsedModelId } from "./providers";

/** USD per million tokens, [input, output]. Matched by exact name, then by the longest prefix (dated variants). */
const PRICES: Record<string, Record<string, [number, number]>> = {
  openai: {
    "gpt-4o-mini": [0.15, 0.6],
    "gpt-4o": [2.5, 10],
    "gpt-4.1": [2, 8],
    "gpt-4.1-mini": [0.4, 1.6],
    "gpt-4.1-nano": [0.1, 0.4],
    "gpt-5": [1.25, 10],
    "gpt-5-mini": [0.25, 2],
    "gpt-5-nano": [0.05, 0.4],
    o3: [2, 8],
    "o4-mini": [1.1, 4.4],
  },
  anthropic: {
    "claude-sonnet-4-5": [3, 15],
    "claude-sonnet-4": [3, 15],
    "claude-3-7-sonnet": [3, 15],
    "claude-haiku-4-5": [1, 5],
    "claude-3-5-haiku": [0.8, 4],
    "claude-opus-4-1": [15, 75],
    "claude-opus-4": [15, 75],
  },
  deepseek: {
    "deepseek-reasoner": [0.28, 0.42],
    "deepseek-chat": [0.28, 0.42],
  },
  google: {
    "gemini-2.5-pro": [1.25, 10],
    "gemini-2.5-flash": [0.3, 2.5],
    "gemini-2.5-flash-lite": [0.1, 0.4],
  },
};

function lookup(table: Record<string, [number, number]> | undefined, model: string): [number, number] | undefined {
  if (!table) return undefined;
  if (table[model]) return table[model];
  const prefix = Object.keys(table)
    .filter((k) => model.startsWith(`${k}-`))
    .sort((a, b) => b.length - a.length)[0];
  return prefix ? table[prefix] : undefined;
}

/**
 * Price of a model, or undefined when unknown. The demo model is free; an OpenAI-compatible server is priced by its
 * model name when that is a known hosted model (a gateway such as LiteLLM serving gpt-4o-mini), free otherwise (local).
 */
export function priceOf({ provider, model }: Pick<ParsedModelId, "provider" | "model">): [number, number] | undefined {
  if (provider === "demo") return [0, 0];
  if (provider === "openai-compatible") {
    for (const table of Object.values(PRICES)) {
      const price = lookup(table, model);
      if (price) return price;
    }
    return [0, 0];
  }
  return lookup(PRICES[provider], model);
}

export function costUsd(
  id: Pick<ParsedModelId, "provider" | "model">,
  usage: { inputTokens: number; outputTokens: number },
): number {
  const [inPrice, outPrice] = priceOf(id) ?? [0, 0];
  return Math.round(((usage.inputTokens * inPrice + usage.outputTokens * outPrice) / 1_000_000) * 1e8) / 1e8;
}
