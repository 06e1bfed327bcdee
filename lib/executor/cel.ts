import { celEnv, isCelError, isCelList, isCelMap, parse, plan, type CelValue } from "@bufbuild/cel";

/**
 * CEL for trigger/cancel `if` conditions, waitForEvent matches, and concurrency/idempotency keys — the language Inngest
 * uses for them. Compiled expressions are cached; an expression that fails to parse throws a readable error, one that
 * fails at evaluation (missing field, type mismatch) counts as "no match" as it does in Inngest.
 */

type Program = (bindings: Record<string, unknown>) => CelValue | Error;

const env = celEnv();
const cache = new Map<string, Program>();

export class CelExpressionError extends Error {
  constructor(expression: string, cause: unknown) {
    super(`Invalid CEL expression ${JSON.stringify(expression)}: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = "CelExpressionError";
  }
}

/** Compiled programs are large (tens of KB); keep the most recently used few hundred. */
const CACHE_LIMIT = 500;

function compile(expression: string): Program {
  let program = cache.get(expression);
  if (program) {
    // Map keeps insertion order: re-inserting marks it most recently used.
    cache.delete(expression);
    cache.set(expression, program);
  } else {
    try {
      program = plan(env, parse(expression)) as unknown as Program;
    } catch (err) {
      throw new CelExpressionError(expression, err);
    }
    if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!);
    cache.set(expression, program);
  }
  return program;
}

/** Throws CelExpressionError when the expression does not parse. */
export function checkExpression(expression: string): void {
  compile(expression);
}

/** True only when the expression evaluates to boolean true. */
export function celMatches(expression: string, bindings: Record<string, unknown>): boolean {
  try {
    const value = compile(expression)(bindings);
    return value === true;
  } catch {
    return false;
  }
}

/** A key (concurrency, idempotency) as a string; evaluation errors give undefined. */
export function celKey(expression: string, bindings: Record<string, unknown>): string | undefined {
  let value: CelValue | Error;
  try {
    value = compile(expression)(bindings);
  } catch {
    return undefined;
  }
  if (isCelError(value) || value instanceof Error) return undefined;
  return JSON.stringify(toPlain(value));
}

function toPlain(value: unknown): unknown {
  if (typeof value === "bigint") return Number(value);
  if (isCelList(value as CelValue)) return [...(value as Iterable<unknown>)].map(toPlain);
  if (isCelMap(value as CelValue)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of value as unknown as Iterable<[unknown, unknown]>) out[String(k)] = toPlain(v);
    return out;
  }
  return value;
}
