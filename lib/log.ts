import { AsyncLocalStorage } from "node:async_hooks";
import { getEnv } from "@/lib/env";
import { redact } from "@/lib/redact";

/**
 * Fields every log line written inside withLogContext() carries: the request's id, the run it works on, and the Inngest
 * function working on it.
 */
type LogContext = { requestId?: string; runId?: string; fn?: string };
const context = new AsyncLocalStorage<LogContext>();

/** Run `fn` with these fields on every log line it (and whatever it awaits) writes. Nested contexts add to outer ones. */
export function withLogContext<T>(fields: LogContext, fn: () => T): T {
  return context.run({ ...context.getStore(), ...fields }, fn);
}

/** The current request's id, when inside a request handled by route(). */
export function currentRequestId(): string | undefined {
  return context.getStore()?.requestId;
}

const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
type Level = Exclude<keyof typeof LEVELS, "silent">;

function emit(level: Level, message: string, fields?: Record<string, unknown>) {
  const threshold = LEVELS[getEnv().LOG_LEVEL];
  if (LEVELS[level] < threshold) return;
  // One JSON line per entry; everything passes the redaction filter so a secret never reaches the log.
  const line = redact(JSON.stringify({ t: new Date().toISOString(), level, msg: message, ...context.getStore(), ...fields }, scrubQueryParams));
  (level === "error" ? console.error : level === "warn" ? console.warn : console.log)(line);
}

/**
 * Drizzle's "Failed query: <sql>\nparams: <values>" errors carry the bound values — request text, file contents, tokens.
 * The SQL stays (it says what failed); the values never reach the log.
 */
export function scrubQueryParams(_key: string, value: unknown): unknown {
  if (typeof value !== "string" || !value.includes("params:")) return value;
  return value.replace(/(Failed query:[\s\S]*?)\bparams:[^\n]*(?:\n(?!\s*at\s)[^\n]*)*/g, "$1params: [omitted]");
}

export const log = {
  debug: (m: string, f?: Record<string, unknown>) => emit("debug", m, f),
  info: (m: string, f?: Record<string, unknown>) => emit("info", m, f),
  warn: (m: string, f?: Record<string, unknown>) => emit("warn", m, f),
  error: (m: string, f?: Record<string, unknown>) => emit("error", m, f),
};
