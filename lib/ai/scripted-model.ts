import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
  LanguageModelV3Usage,
} from "@ai-sdk/provider";

/**
 * A LanguageModelV3 whose replies come from a function of the request. The demo model is built on it, and tests use
 * it to script agent sessions; both go through the AI SDK exactly as a hosted model does (tool calls, structured
 * output, streaming, usage).
 */

export type ScriptedReply = {
  text?: string;
  toolCalls?: Array<{ toolName: string; input: unknown }>;
  /** Token usage to report; estimated from the text (4 characters a token) when omitted. */
  usage?: { inputTokens: number; outputTokens: number };
};

export type ScriptedRespond = (options: LanguageModelV3CallOptions) => ScriptedReply | Promise<ScriptedReply>;

export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

/** All text the model was sent (system, user, assistant text and tool results), in order. */
export function promptText(prompt: LanguageModelV3Prompt): string {
  const parts: string[] = [];
  for (const message of prompt) {
    if (message.role === "system") {
      parts.push(message.content);
      continue;
    }
    for (const part of message.content) {
      if (part.type === "text") parts.push(part.text);
      else if (part.type === "tool-call") parts.push(JSON.stringify(part.input));
      else if (part.type === "tool-result") parts.push(JSON.stringify(part.output));
    }
  }
  return parts.join("\n");
}

/** Text of the system and user messages only: the instructions, never the model's own words or tool output. */
export function instructionText(prompt: LanguageModelV3Prompt): string {
  const parts: string[] = [];
  for (const message of prompt) {
    if (message.role === "system") parts.push(message.content);
    else if (message.role === "user") {
      for (const part of message.content) if (part.type === "text") parts.push(part.text);
    }
  }
  return parts.join("\n");
}

function usageOf(reply: ScriptedReply, options: LanguageModelV3CallOptions): LanguageModelV3Usage {
  const output = (reply.text ?? "") + (reply.toolCalls ?? []).map((c) => JSON.stringify(c.input)).join("");
  const inputTokens = reply.usage?.inputTokens ?? estimateTokens(promptText(options.prompt));
  const outputTokens = reply.usage?.outputTokens ?? estimateTokens(output);
  return {
    inputTokens: { total: inputTokens, noCache: inputTokens, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: outputTokens, text: outputTokens, reasoning: 0 },
  };
}

function contentOf(reply: ScriptedReply, options: LanguageModelV3CallOptions): LanguageModelV3Content[] {
  // Ids derive from the conversation length, so a replayed turn produces the same ids.
  const turn = options.prompt.filter((m) => m.role === "assistant").length;
  const content: LanguageModelV3Content[] = [];
  if (reply.text) content.push({ type: "text", text: reply.text });
  (reply.toolCalls ?? []).forEach((call, i) =>
    content.push({
      type: "tool-call",
      toolCallId: `call_${turn}_${i}`,
      toolName: call.toolName,
      input: JSON.stringify(call.input ?? {}),
    }),
  );
  return content;
}

export function createScriptedModel({
  provider = "scripted",
  modelId = "scripted",
  respond,
}: {
  provider?: string;
  modelId?: string;
  respond: ScriptedRespond;
}): LanguageModelV3 {
  async function generate(options: LanguageModelV3CallOptions) {
    const reply = await respond(options);
    const content = contentOf(reply, options);
    const hasTools = content.some((c) => c.type === "tool-call");
    return {
      content,
      finishReason: { unified: hasTools ? ("tool-calls" as const) : ("stop" as const), raw: undefined },
      usage: usageOf(reply, options),
      warnings: [],
      response: { id: `${provider}-${modelId}`, modelId, timestamp: new Date(0) },
    };
  }

  return {
    specificationVersion: "v3",
    provider,
    modelId,
    supportedUrls: {},
    doGenerate: generate,
    async doStream(options) {
      const result = await generate(options);
      const parts: LanguageModelV3StreamPart[] = [{ type: "stream-start", warnings: [] }];
      for (const [i, c] of result.content.entries()) {
        if (c.type === "text") {
          const id = `text-${i}`;
          parts.push({ type: "text-start", id });
          // Several deltas, so consumers see a real stream.
          for (const chunk of c.text.match(/[\s\S]{1,64}/g) ?? []) parts.push({ type: "text-delta", id, delta: chunk });
          parts.push({ type: "text-end", id });
        } else if (c.type === "tool-call") {
          parts.push(c);
        }
      }
      parts.push({ type: "finish", usage: result.usage, finishReason: result.finishReason });
      const stream = new ReadableStream<LanguageModelV3StreamPart>({
        start(controller) {
          for (const p of parts) controller.enqueue(p);
          controller.close();
        },
      });
      return { stream };
    },
  };
}
