import { getClient } from "@/lib/db";
import { getEnv } from "@/lib/env";
import pkg from "@/package.json" with { type: "json" };

type ExecutorHealth = { mode: "embedded" | "inngest"; [key: string]: unknown };
let executorProbe: (() => Promise<ExecutorHealth> | ExecutorHealth) | null = null;

/** The executor registers how to report its state (keeps lib/health free of executor internals). */
export function registerExecutorProbe(probe: () => Promise<ExecutorHealth> | ExecutorHealth) {
  executorProbe = probe;
}

export async function getHealth() {
  const env = getEnv();
  let db: { ok: boolean; error?: string } = { ok: true };
  try {
    const client = await getClient();
    await client.execute("select 1");
  } catch (error) {
    db = { ok: false, error: error instanceof Error ? error.message.split("\n")[0] : "unavailable" };
  }
  const executor: ExecutorHealth = executorProbe ? await executorProbe() : { mode: env.executionMode };
  return { ok: db.ok, db, executor, version: pkg.version };
}
