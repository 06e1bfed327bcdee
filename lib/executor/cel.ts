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

/**
 * `event.<path> == async.<path>` (what `waitForEvent`'s `match` compiles to, and the commonest `if`): decided without
 * the interpreter when both sides are a string, number, boolean or null, where CEL's `==` is JavaScript's `===`
 * (no NaN comes out of JSON). A missing field, or a list or map on either side, goes to CEL, whose answer stands.
 */
const SIMPLE_EQUALITY = /^\s*([A-Za-z_]\w*)((?:\.[A-Za-z_]\w*)+)\s*==\s*([A-Za-z_]\w*)((?:\.[A-Za-z_]\w*)+)\s*$/;
type Side = { root: string; path: string[] };
const simpleEqualities = new Map<string, [Side, Side] | null>();

function simpleEquality(expression: string): [Side, Side] | null {
  let parsed = simpleEqualities.get(expression);
  if (parsed === undefined) {
    const m = SIMPLE_EQUALITY.exec(expression);
    parsed = m ? [{ root: m[1]!, path: m[2]!.slice(1).split(".") }, { root: m[3]!, path: m[4]!.slice(1).split(".") }] : null;
    if (simpleEqualities.size >= CACHE_LIMIT) simpleEqualities.delete(simpleEqualities.keys().next().value!);
    simpleEqualities.set(expression, parsed);
  }
  return parsed;
}

const NOT_PRIMITIVE = Symbol("not primitive");

function primitiveAt(bindings: Record<string, unknown>, side: Side): string | number | boolean | null | typeof NOT_PRIMITIVE {
  let value: unknown = Object.hasOwn(bindings, side.root) ? bindings[side.root] : undefined;
  for (const key of side.path) {
    if (value === null || typeof value !== "object" || Array.isArray(value) || !Object.hasOwn(value, key)) return NOT_PRIMITIVE;
    value = (value as Record<string, unknown>)[key];
  }
  return value === null || typeof value === "string" || typeof value === "boolean" || (typeof value === "number" && !Number.isNaN(value))
    ? value
    : NOT_PRIMITIVE;
}

/** A wait's index key: the incoming event's path and the JSON of the value it must hold there. */
export type WaitMatchKey = { path: string; value: string };

/**
 * A wait's index key (executor_pending.match_path / match_value): for `event.<a> == async.<b>` (either way round) whose
 * `event.<a>` in the run's trigger is a string, number, boolean or null, or for `async.<b> == '<text>'`, the incoming
 * event's path `<b>` and the JSON of the value it must hold there. An event matches such a wait exactly when its value
 * at `<b>` has that JSON (see celMatches: CEL's `==` on primitives is `===`, and a missing field, list or map never
 * equals a primitive). Null for any other expression or value: that wait is evaluated with CEL against every event of
 * its name.
 */
export function waitMatchKey(expression: string | null, trigger: unknown): WaitMatchKey | null {
  if (!expression) return null;
  const literal = literalEquality(expression);
  if (literal) return { path: literal.path.join("."), value: JSON.stringify(literal.value) };
  const simple = simpleEquality(expression);
  if (!simple) return null;
  const [eventSide, asyncSide] = simple[0].root === "event" ? simple : [simple[1], simple[0]];
  if (eventSide.root !== "event" || asyncSide.root !== "async") return null;
  const value = primitiveAt({ event: trigger }, eventSide);
  return value === NOT_PRIMITIVE ? null : { path: asyncSide.path.join("."), value: JSON.stringify(value) };
}

/**
 * `async.<b> == '<text>'` (either way round, single or double quotes, no escapes): an `if` comparing the incoming
 * event's field with a string written into the expression, as a run does with its own ids. Keyed like a `match`: the
 * event matches exactly when its value at `<b>` is that string.
 */
const LITERAL_EQUALITY = [
  /^\s*async((?:\.[A-Za-z_]\w*)+)\s*==\s*(?:'([^'\\\n]*)'|"([^"\\\n]*)")\s*$/,
  /^\s*(?:'([^'\\\n]*)'|"([^"\\\n]*)")\s*==\s*async((?:\.[A-Za-z_]\w*)+)\s*$/,
];

function literalEquality(expression: string): { path: string[]; value: string } | null {
  let m = LITERAL_EQUALITY[0]!.exec(expression);
  if (m) return { path: m[1]!.slice(1).split("."), value: m[2] ?? m[3]! };
  m = LITERAL_EQUALITY[1]!.exec(expression);
  if (m) return { path: m[3]!.slice(1).split("."), value: m[1] ?? m[2]! };
  return null;
}

/** The JSON of `event`'s primitive value at a wait key's path (waitMatchKey), or null if it holds none there. */
export function eventMatchValue(event: unknown, path: string): string | null {
  const value = primitiveAt({ async: event }, { root: "async", path: path.split(".") });
  return value === NOT_PRIMITIVE ? null : JSON.stringify(value);
}

/** True only when the expression evaluates to boolean true. */
export function celMatches(expression: string, bindings: Record<string, unknown>): boolean {
  const simple = simpleEquality(expression);
  if (simple) {
    const left = primitiveAt(bindings, simple[0]);
    const right = left === NOT_PRIMITIVE ? NOT_PRIMITIVE : primitiveAt(bindings, simple[1]);
    if (left !== NOT_PRIMITIVE && right !== NOT_PRIMITIVE) return left === right;
  }
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
