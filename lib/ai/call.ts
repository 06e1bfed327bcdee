import { APICallError, NoObjectGeneratedError, NoOutputGeneratedError, RetryError, type LanguageModel, type LanguageModelUsage } from "ai";
import { newUlid as ulid } from "@/lib/ids";
import { write } from "@/lib/db";
import { modelCalls } from "@/lib/db/schema";
import { getEnv, type Env } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { redact } from "@/lib/redact";
import type { Stage } from "@/lib/workflow/config";
import { costUsd } from "./prices";
import { getLanguageModel, parseModelId, PROVIDERS } from "./providers";

/**
 * The one wrapper every model call goes through: it records a model_calls row per attempt (tokens, cost, latency,
 * outcome), retries rate limits / server errors / network errors with backoff, and turns what is left into a typed
 * ModelCallError whose `reason` the workflow maps to a pause. Prompts and keys are never written anywhere.
 */

export type ModelFailureReason =
  /** 429 / 5xx / network, still failing after the retries: pause for a manual retry. */
  | "model_outage"
  /** 401 / 403 or a missing key: pause at once, someone has to fix the key. */
  | "model_auth"
  /** The model kept answering with output that does not parse / validate. */
  | "model_output"
  /** Any other refusal (400 bad request, unknown model …). */
  | "model_error";

export class ModelCallError extends AppError {
  readonly reason: ModelFailureReason;
  readonly modelId: string;
  readonly stage: Stage;
  readonly attempts: number;
  readonly statusCode?: number;
  constructor(args: {
    reason: ModelFailureReason;
    modelId: string;
    stage: Stage;
    attempts: number;
    statusCode?: number;
    message: string;
    cause?: unknown;
  }) {
    const code = args.reason === "model_auth" ? "unauthorized:model" : args.reason === "model_error" ? "bad_request:model" : "unavailable:model";
    super(code, args.message, {
      cause: args.cause,
      details: { reason: args.reason, modelId: args.modelId, stage: args.stage, attempts: args.attempts, statusCode: args.statusCode },
    });
    this.name = "ModelCallError";
    this.reason = args.reason;
    this.modelId = args.modelId;
    this.stage = args.stage;
    this.attempts = args.attempts;
    this.statusCode = args.statusCode;
  }
}

export function isModelCallError(error: unknown): error is ModelCallError {
  return error instanceof ModelCallError;
}

export type ModelCallContext = {
  stage: Stage;
  /** The run the call belongs to (null outside a run, e.g. a connectivity check). */
  runId?: string | null;
  /**
   * The durable step making the call, e.g. `implement:turn-7`. Rows are keyed `<stepKey>#<attempt>` (unique), so a
   * replayed step records nothing twice. Without it every call records fresh rows.
   */
  stepKey?: string;
  /** Waits before retry `attempt` (2, 3, 4). Injectable so tests do not sleep. */
  backoff?: (attempt: number, retryAfterMs?: number) => Promise<void>;
  env?: Env;
};

/** Transient failures are retried this many times (so at most 4 attempts). */
export const TRANSIENT_RETRIES = 3;
/** Unparseable structured output is retried this many times. */
export const OUTPUT_RETRIES = 1;

export async function defaultBackoff(attempt: number, retryAfterMs?: number): Promise<void> {
  const ms = Math.min(retryAfterMs ?? 1000 * 2 ** (attempt - 2), 30_000);
  await new Promise((resolve) => setTimeout(resolve, ms));
}

type Classified = { kind: "transient" | "auth" | "output" | "fatal"; statusCode?: number; retryAfterMs?: number; message: string };

function unwrap(error: unknown): unknown {
  if (RetryError.isInstance(error)) return error.lastError;
  return error;
}

export function classifyError(raw: unknown): Classified {
  const error = unwrap(raw);
  if (NoObjectGeneratedError.isInstance(error) || NoOutputGeneratedError.isInstance(error)) {
    return { kind: "output", message: `The model's output did not match the expected structure: ${error.message}` };
  }
  if (APICallError.isInstance(error)) {
    const status = error.statusCode;
    const retryAfter = Number(error.responseHeaders?.["retry-after"]);
    const retryAfterMs = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined;
    const message = `${status ?? "network error"}: ${error.message}`;
    if (status === 401 || status === 403) return { kind: "auth", statusCode: status, message };
    if (status === 408 || status === 409 || status === 429 || (status !== undefined && status >= 500)) {
      return { kind: "transient", statusCode: status, retryAfterMs, message };
    }
    if (status === undefined) return { kind: "transient", message };
    return { kind: "fatal", statusCode: status, message };
  }
  const name = (error as { name?: string })?.name ?? "";
  if (name === "AI_LoadAPIKeyError") return { kind: "auth", message: (error as Error).message };
  if (name === "AI_JSONParseError" || name === "AI_TypeValidationError") {
    return { kind: "output", message: `The model's output did not parse: ${(error as Error).message}` };
  }
  const code = (error as { cause?: { code?: string }; code?: string })?.cause?.code ?? (error as { code?: string })?.code;
  if (name === "TypeError" || (code && /^(ECONN|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|EPIPE|UND_ERR)/.test(code))) {
    return { kind: "transient", message: `network error: ${(error as Error).message}` };
  }
  return { kind: "fatal", message: error instanceof Error ? error.message : String(error) };
}

function usageNumbers(usage: LanguageModelUsage | undefined): { inputTokens: number; outputTokens: number } {
  return { inputTokens: usage?.inputTokens ?? 0, outputTokens: usage?.outputTokens ?? 0 };
}

async function record(row: {
  context: ModelCallContext;
  modelId: string;
  attempt: number;
  status: "ok" | "error";
  usage?: LanguageModelUsage;
  latencyMs: number;
  error?: string;
}) {
  const { inputTokens, outputTokens } = usageNumbers(row.usage);
  const parsed = parseModelId(row.modelId);
  await write(async (tx) => {
    await tx
      .insert(modelCalls)
      .values({
        id: ulid(),
        workflowRunId: row.context.runId ?? null,
        stage: row.context.stage,
        model: row.modelId,
        tokensIn: inputTokens,
        tokensOut: outputTokens,
        costUsd: costUsd(parsed, { inputTokens, outputTokens }),
        latencyMs: Math.round(row.latencyMs),
        status: row.status,
        attempt: row.attempt,
        error: row.error ? redact(row.error).slice(0, 1000) : null,
        stepKey: row.context.stepKey ? `${row.context.stepKey}#${row.attempt}` : null,
      })
      .onConflictDoNothing();
  });
}

/**
 * Call a model. `run` does the actual AI SDK call (with `maxRetries: 0` — retries are ours) and returns its value and
 * usage; it is invoked again for each retry.
 *
 *   const text = await callModel({ modelId, context: { stage: "planning", runId, stepKey: "plan:1" },
 *     run: async ({ model }) => { const r = await generateText({ model, prompt, maxRetries: 0 });
 *                                 return { value: r.text, usage: r.totalUsage }; } });
 */
export async function callModel<T>({
  modelId,
  context,
  model,
  run,
  signal,
}: {
  modelId: string;
  context: ModelCallContext;
  /** Aborting it (a cancel, a stage deadline) ends the call at once: no retry, the abort's error is thrown. */
  signal?: AbortSignal;
  /** A prepared model (tests, or a caller that already built one); otherwise built from `modelId`. */
  model?: LanguageModel;
  run: (input: { model: LanguageModel; attempt: number }) => Promise<{ value: T; usage: LanguageModelUsage | undefined }>;
}): Promise<T> {
  const env = context.env ?? getEnv();
  const backoff = context.backoff ?? defaultBackoff;
  const { provider } = parseModelId(modelId);
  let resolved: LanguageModel;
  try {
    resolved = model ?? getLanguageModel(modelId, { env });
  } catch (cause) {
    throw new ModelCallError({
      reason: "model_auth",
      modelId,
      stage: context.stage,
      attempts: 0,
      message: (cause as Error).message,
      cause,
    });
  }
  let transientLeft = TRANSIENT_RETRIES;
  let outputLeft = OUTPUT_RETRIES;
  for (let attempt = 1; ; attempt++) {
    const started = performance.now();
    try {
      const { value, usage } = await run({ model: resolved, attempt });
      await record({ context, modelId, attempt, status: "ok", usage, latencyMs: performance.now() - started });
      return value;
    } catch (error) {
      const latencyMs = performance.now() - started;
      if (error instanceof AppError && !(error instanceof ModelCallError)) throw error;
      if (signal?.aborted) {
        await record({ context, modelId, attempt, status: "error", usage: undefined, latencyMs, error: "aborted (the run was cancelled or its stage ran out of time)" });
        throw error;
      }
      const c = classifyError(error);
      const usage = (unwrap(error) as { usage?: LanguageModelUsage }).usage;
      await record({ context, modelId, attempt, status: "error", usage, latencyMs, error: c.message });
      const base = { modelId, stage: context.stage, attempts: attempt, statusCode: c.statusCode, cause: error };
      if (c.kind === "auth") {
        // The key is what a 401/403 is about; for an OpenAI-compatible server that is its optional API key, not its URL.
        const variable = provider === "openai-compatible" ? "OPENAI_COMPATIBLE_API_KEY" : PROVIDERS[provider].requiredEnv;
        throw new ModelCallError({
          ...base,
          reason: "model_auth",
          message: `${PROVIDERS[provider].label} refused the credentials (${c.statusCode ?? "no key"})${variable ? `: check ${variable}` : ""}.`,
        });
      }
      if (c.kind === "transient" && transientLeft > 0) {
        transientLeft--;
        await backoff(attempt + 1, c.retryAfterMs);
        continue;
      }
      if (c.kind === "output" && outputLeft > 0) {
        outputLeft--;
        continue;
      }
      if (c.kind === "transient") {
        throw new ModelCallError({
          ...base,
          reason: "model_outage",
          message: `${modelId} is unavailable after ${attempt} attempts (${redact(c.message).slice(0, 300)}).`,
        });
      }
      if (c.kind === "output") {
        throw new ModelCallError({
          ...base,
          reason: "model_output",
          message: `${modelId} returned unusable output ${attempt} times: ${redact(c.message).slice(0, 300)}`,
        });
      }
      throw new ModelCallError({ ...base, reason: "model_error", message: `${modelId} refused the request: ${redact(c.message).slice(0, 300)}` });
    }
  }
}
