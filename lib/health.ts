import { getClient } from "@/lib/db";
import { getEnv } from "@/lib/env";
import { getExecutorStatus } from "@/lib/executor";
import { sandboxCapabilities } from "@/lib/sandbox";
import pkg from "@/package.json" with { type: "json" };

/** `GET /api/health`: database reachable, which executor mode is active and its state, sandbox isolation. */
export async function getHealth() {
  const env = getEnv();
  let db: { ok: boolean; error?: string } = { ok: true };
  try {
    const client = await getClient();
    await client.execute("select 1");
  } catch (error) {
    db = { ok: false, error: error instanceof Error ? error.message.split("\n")[0] : "unavailable" };
  }
  const executor = env.executionMode === "embedded" ? await getExecutorStatus() : { mode: env.executionMode };
  const sandbox = sandboxCapabilities();
  return {
    ok: db.ok,
    db,
    executor,
    sandbox: { kind: sandbox.kind, isolated: sandbox.isolated, weaknesses: sandbox.weaknesses, warning: sandbox.warning },
    version: pkg.version,
  };
}
