import { celKey, celMatches } from "./cel";
import type { FunctionConfig } from "./protocol";
import { query, type Tx } from "./store";

/**
 * The functions every synced app registered, read from executor_apps so that any process on the database (the web
 * server ingesting events, a separate worker) sees the same set.
 */

export const DEFAULT_RETRIES = 4;
export const FAILURE_EVENT = "inngest/function.failed";
export const INVOKE_EVENT = "inngest/function.invoked";

export type RegisteredFunction = {
  id: string;
  appUrl: string;
  config: FunctionConfig;
  retries: number;
  concurrency?: { limit: number; key?: string };
};

export type Registry = {
  byId: Map<string, RegisteredFunction>;
  byEvent: Map<string, RegisteredFunction[]>;
  cancelsByEvent: Map<string, RegisteredFunction[]>;
};

let cached: { at: number; registry: Registry } | undefined;
const TTL_MS = 1000;

export function invalidateRegistry(): void {
  cached = undefined;
}

export async function getRegistry(): Promise<Registry> {
  if (cached && Date.now() - cached.at < TTL_MS) return cached.registry;
  const apps = await query<{ url: string; functions: string }>("SELECT url, functions FROM executor_apps");
  const registry = buildRegistry(apps.map((a) => ({ url: a.url, functions: JSON.parse(a.functions) as FunctionConfig[] })));
  cached = { at: Date.now(), registry };
  return registry;
}

export function buildRegistry(apps: { url: string; functions: FunctionConfig[] }[]): Registry {
  const registry: Registry = { byId: new Map(), byEvent: new Map(), cancelsByEvent: new Map() };
  for (const app of apps) {
    for (const config of app.functions) {
      const step = Object.values(config.steps)[0];
      const concurrency = Array.isArray(config.concurrency)
        ? config.concurrency[0]
        : typeof config.concurrency === "number"
          ? { limit: config.concurrency }
          : (config.concurrency ?? undefined);
      const fn: RegisteredFunction = {
        id: config.id,
        appUrl: app.url,
        config,
        retries: step?.retries?.attempts ?? DEFAULT_RETRIES,
        concurrency: concurrency && concurrency.limit > 0 ? { limit: concurrency.limit, key: concurrency.key } : undefined,
      };
      registry.byId.set(fn.id, fn);
      for (const trigger of config.triggers) {
        if (!trigger.event) continue;
        const list = registry.byEvent.get(trigger.event) ?? [];
        list.push(fn);
        registry.byEvent.set(trigger.event, list);
      }
      for (const cancel of config.cancel ?? []) {
        const list = registry.cancelsByEvent.get(cancel.event) ?? [];
        list.push(fn);
        registry.cancelsByEvent.set(cancel.event, list);
      }
    }
  }
  return registry;
}

export type StoredEvent = { id: string; name: string; data: Record<string, unknown>; ts: number; v?: string; user?: unknown };

/**
 * Create a run of `fn` for `event` inside a write transaction. Returns its id, or null when the function's
 * idempotency key already started a run in the last 24 h.
 */
export async function createRun(
  t: Tx,
  {
    fn,
    event,
    runId,
    now,
    watermark,
    parent,
  }: {
    fn: RegisteredFunction;
    event: StoredEvent;
    runId: string;
    now: number;
    watermark: number;
    parent?: { runId: string; step: string };
  },
): Promise<string | null> {
  let idempotencyKey: string | null = null;
  if (fn.config.idempotency) {
    idempotencyKey = celKey(fn.config.idempotency, { event }) ?? null;
    if (idempotencyKey !== null) {
      const existing = await t.execute({
        sql: "SELECT 1 FROM executor_runs WHERE fn_id = ? AND idempotency_key = ? AND created_at > ? LIMIT 1",
        args: [fn.id, idempotencyKey, now - 86_400_000],
      });
      if (existing.rows.length > 0) return null;
    }
  }
  const concurrencyKey = fn.concurrency?.key ? (celKey(fn.concurrency.key, { event }) ?? "") : null;
  await t.execute({
    sql: `INSERT INTO executor_runs (id, fn_id, app_url, event, events, status, next_at, watermark, concurrency_key,
            idempotency_key, parent_run_id, parent_step, created_at)
          VALUES (?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?, ?, ?, ?)`,
    args: [
      runId,
      fn.id,
      fn.appUrl,
      JSON.stringify(event),
      JSON.stringify([event]),
      watermark,
      concurrencyKey,
      idempotencyKey,
      parent?.runId ?? null,
      parent?.step ?? null,
      now,
    ],
  });
  return runId;
}

export function triggerMatches(fn: RegisteredFunction, event: StoredEvent): boolean {
  return fn.config.triggers.some(
    (tr) => tr.event === event.name && (!tr.expression || celMatches(tr.expression, { event })),
  );
}
