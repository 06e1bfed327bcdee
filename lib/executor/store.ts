import type { Client, InArgs, Transaction } from "@libsql/client";
import { getClient, serialize } from "@/lib/db";

/**
 * Database access for the executor: raw SQL on the app's libSQL client (hot paths run once per step). Every write
 * goes through serialize() — the process's single write queue — inside one BEGIN IMMEDIATE transaction, which also
 * orders our writes against other processes on the same file.
 */

export type Tx = Pick<Transaction, "execute">;

/** The app's client (lib/db primes every pooled connection with synchronous = NORMAL). */
async function executorClient(): Promise<Client> {
  return getClient();
}

/** A write transaction. `rollbackIf` lets a caller refuse with a value (no throw) and still leave nothing written. */
export async function tx<T>(fn: (t: Tx) => Promise<T>, { rollbackIf }: { rollbackIf?: (result: T) => boolean } = {}): Promise<T> {
  const client = await executorClient();
  return serialize(async () => {
    const t = await client.transaction("write");
    try {
      const result = await fn(t);
      if (rollbackIf?.(result)) {
        await t.rollback();
        return result;
      }
      await t.commit();
      return result;
    } catch (err) {
      await t.rollback().catch(() => undefined);
      throw err;
    } finally {
      t.close();
    }
  });
}

export async function query<T = Record<string, unknown>>(sql: string, args: InArgs = []): Promise<T[]> {
  const client = await executorClient();
  const rs = await client.execute({ sql, args });
  return rs.rows as unknown as T[];
}

export async function rows<T = Record<string, unknown>>(t: Tx, sql: string, args: InArgs = []): Promise<T[]> {
  const rs = await t.execute({ sql, args });
  return rs.rows as unknown as T[];
}

export const TERMINAL = ["completed", "failed", "cancelled"] as const;
export const TERMINAL_SQL = "('completed','failed','cancelled')";

export type RunRow = {
  id: string;
  fn_id: string;
  app_url: string;
  event: string;
  events: string;
  status: string;
  output: string | null;
  error: string | null;
  attempt: number;
  next_at: number;
  lease_owner: string | null;
  lease_until: number;
  watermark: number;
  parallel: number;
  generation: number;
  state_bytes: number;
  concurrency_key: string | null;
  idempotency_key: string | null;
  parent_run_id: string | null;
  parent_step: string | null;
  created_at: number;
  ended_at: number | null;
};

export type PendingRow = {
  run_id: string;
  hashed_id: string;
  kind: "step" | "sleep" | "wait" | "invoke";
  op: string;
  attempt: number;
  due_at: number | null;
  event_name: string | null;
  expression: string | null;
  race: number;
  created_at: number;
};
