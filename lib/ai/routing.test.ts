import { describe, expect, it } from "vitest";
import { checkRouting, defaultRouting, modelIdForStage } from "@/lib/ai/routing";
import { modelLabel, parseModelId } from "@/lib/ai/providers";
import { costUsd } from "@/lib/ai/prices";
import { parseEnv } from "@/lib/env";
import { resolveRunConfig } from "@/lib/workflow/config";

const KEYS = {
  OPENAI_API_KEY: "sk-test-openai-0000000000",
  ANTHROPIC_API_KEY: "sk-ant-test-000000000000",
  DEEPSEEK_API_KEY: "sk-test-deepseek-00000000",
};

describe("default routing", () => {
  it("uses the seed's models when every key is present", () => {
    expect(defaultRouting({ env: parseEnv(KEYS) })).toEqual({
      planner: "deepseek:deepseek-reasoner",
      implementer: "anthropic:claude-sonnet-4-5",
      validator: "openai:gpt-4o-mini",
    });
  });

  it("is the demo model for every stage when nothing is configured", () => {
    expect(defaultRouting({ env: parseEnv({}) })).toEqual({
      planner: "demo:default",
      implementer: "demo:default",
      validator: "demo:default",
    });
  });

  it("fills a stage whose seed provider has no key with a configured provider, never demo", () => {
    expect(defaultRouting({ env: parseEnv({ OPENAI_API_KEY: KEYS.OPENAI_API_KEY }) })).toEqual({
      planner: "openai:gpt-4o",
      implementer: "openai:gpt-4.1",
      validator: "openai:gpt-4o-mini",
    });
  });
});

describe("checkRouting (run creation)", () => {
  it("refuses a provider without its key and names the variable to set", () => {
    const problems = checkRouting(
      { planner: "anthropic:claude-sonnet-4-5", implementer: "demo:default", validator: "openai-compatible:llama3.1:8b" },
      { env: parseEnv({}) },
    );
    expect(problems).toEqual([
      expect.objectContaining({ role: "planner", message: expect.stringContaining("set ANTHROPIC_API_KEY") }),
      expect.objectContaining({ role: "validator", message: expect.stringContaining("set OPENAI_COMPATIBLE_BASE_URL") }),
    ]);
  });

  it("refuses an unknown provider", () => {
    const [problem] = checkRouting({ planner: "mystery:model" }, { env: parseEnv({}) });
    expect(problem!.message).toContain("not a known model");
  });

  it("accepts configured providers and the demo model", () => {
    expect(checkRouting({ planner: "deepseek:deepseek-reasoner", implementer: "demo:default" }, { env: parseEnv(KEYS) })).toEqual([]);
  });
});

describe("per-stage routing", () => {
  it("each stage uses the model its config names, defaults filling the rest", () => {
    const parsed = resolveRunConfig({
      input: { modelRouting: { implementer: "openai-compatible:qwen2.5-coder" } },
      projectDefaults: { modelRouting: { planner: "anthropic:claude-opus-4-1" } },
      defaultRouting: defaultRouting({ env: parseEnv({}) }),
    });
    if (!parsed.success) throw parsed.error;
    expect(modelIdForStage(parsed.data, "planning")).toBe("anthropic:claude-opus-4-1");
    expect(modelIdForStage(parsed.data, "implementation")).toBe("openai-compatible:qwen2.5-coder");
    expect(modelIdForStage(parsed.data, "validation")).toBe("demo:default");
  });
});

describe("model ids, labels and prices", () => {
  it("keeps colons inside the model name (Ollama tags)", () => {
    expect(parseModelId("openai-compatible:llama3.1:8b")).toMatchObject({ provider: "openai-compatible", model: "llama3.1:8b" });
  });

  it("labels the demo model as demo", () => {
    expect(modelLabel("demo:default")).toBe("demo (scripted) · default");
  });

  it("prices dated model variants by their family and the demo model at zero", () => {
    expect(costUsd(parseModelId("anthropic:claude-sonnet-4-5-20250929"), { inputTokens: 1_000_000, outputTokens: 1_000_000 })).toBe(18);
    expect(costUsd(parseModelId("demo:default"), { inputTokens: 5000, outputTokens: 5000 })).toBe(0);
  });
});
