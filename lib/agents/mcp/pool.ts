import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { onSandboxRelease } from "@/lib/sandbox";
import type { Sandbox } from "@/lib/sandbox/types";
import { openMcpClient, withMcpClient } from "./client";
import type { McpServer } from "./config";

/*
 * One stdio server process per implementation session, not per call: the process that listed a server's tools at the
 * session's start is kept, in this process, for the session's calls (one at a time), so a server keeps its state
 * between calls and starts once. It is closed when the session starts again (a new session starts its servers anew),
 * when the sandbox is released (a pause, a task's end, the run's end), after MCP_SESSION_LIMITS.idleMs without a call,
 * past MCP_SESSION_LIMITS.maxAgeMs (before a call, so no call is cut), and after a call that failed (the next starts
 * it again). A restart of this process starts it again too: a session's state on the server is a convenience, never
 * something a call may rely on. Remote servers are connected per call (there is no process to keep).
 */

export const MCP_SESSION_LIMITS = { idleMs: 5 * 60_000, maxAgeMs: 20 * 60_000 };

type Entry = {
  client: Client;
  close: () => Promise<void>;
  startedAt: number;
  /** The calls, one after another. */
  queue: Promise<unknown>;
  idle: ReturnType<typeof setTimeout> | null;
  broken: boolean;
};

/** sandbox id → server (name and configuration) → its kept process, or the promise of one being started. */
const pools = new Map<string, Map<string, Promise<Entry>>>();

function serverKey(server: McpServer): string {
  return JSON.stringify(server);
}

async function closeEntry(pool: Map<string, Promise<Entry>>, key: string) {
  const pending = pool.get(key);
  pool.delete(key);
  const entry = await pending?.catch(() => null);
  if (!entry) return;
  if (entry.idle) clearTimeout(entry.idle);
  await entry.close();
}

/** Close every stdio server kept for this sandbox (its session ended or it is being released). */
export async function closeSessionServers(sandboxId: string): Promise<void> {
  const pool = pools.get(sandboxId);
  if (!pool) return;
  pools.delete(sandboxId);
  await Promise.all([...pool.keys()].map((key) => closeEntry(pool, key)));
}

onSandboxRelease((sandbox) => closeSessionServers(sandbox.id));

/** How many stdio server processes this process keeps for the sandbox (tests, diagnosis). */
export function sessionServerCount(sandboxId: string): number {
  return pools.get(sandboxId)?.size ?? 0;
}

/**
 * Run `fn` with the session's client of this server: a kept process for a stdio server (started on first use), a
 * fresh connection for a remote one.
 */
export async function withSessionMcpClient<T>(
  { server, sandbox, timeoutMs }: { server: McpServer; sandbox: Sandbox; timeoutMs: number },
  fn: (client: Client, options: { timeout: number }) => Promise<T>,
): Promise<T> {
  if (server.type !== "stdio") return withMcpClient({ server, sandbox, timeoutMs }, fn);
  let pool = pools.get(sandbox.id);
  if (!pool) pools.set(sandbox.id, (pool = new Map()));
  const key = serverKey(server);
  let pending = pool.get(key);
  const current = await pending?.catch(() => null);
  if (pending && (!current || current.broken || Date.now() - current.startedAt > MCP_SESSION_LIMITS.maxAgeMs)) {
    await closeEntry(pool, key);
    pending = undefined;
  }
  if (!pending) {
    const lifetimeMs = MCP_SESSION_LIMITS.maxAgeMs + MCP_SESSION_LIMITS.idleMs + timeoutMs + 30_000;
    pending = openMcpClient({ server, sandbox, timeoutMs, lifetimeMs }).then((opened) => {
      const entry: Entry = { ...opened, startedAt: Date.now(), queue: Promise.resolve(), idle: null, broken: false };
      opened.client.onclose = () => void (entry.broken = true);
      return entry;
    });
    pool.set(key, pending);
    pending.catch(() => (pool.get(key) === pending ? pool.delete(key) : null));
  }
  const entry = await pending;
  const run = entry.queue.then(async () => {
    if (entry.idle) clearTimeout(entry.idle);
    try {
      return await fn(entry.client, { timeout: timeoutMs });
    } catch (error) {
      // A call that failed (timed out, the server died) may have left the server in any state: it starts again.
      entry.broken = true;
      throw error;
    } finally {
      if (entry.broken) {
        if (pool.get(key) === pending) await closeEntry(pool, key);
      } else {
        entry.idle = setTimeout(() => void (pool.get(key) === pending ? closeEntry(pool, key) : null), MCP_SESSION_LIMITS.idleMs);
        entry.idle.unref?.();
      }
    }
  });
  entry.queue = run.catch(() => null);
  return run;
}
