import crypto from "node:crypto";
import path from "node:path";
import { getEnv, type Env } from "@/lib/env";
import { executorSigning, getExecutorKey } from "./executor-key";

/*
 * What `npm run worker` checks and says at start. The worker IS the Inngest server for the apps it drives: the
 * INNGEST_* variables are those apps' settings, not its own. Three of them (below) switch Gatehouse to Inngest mode,
 * where `/e/<key>` answers 404 to every event (events go to Inngest) while the worker would still sync and drive its
 * apps, next to whatever Inngest drives: so the worker refuses to start with them rather than half-work.
 */

/** The variables that switch Gatehouse to Inngest mode (lib/env.ts `executionMode`). */
export const INNGEST_MODE_VARIABLES = ["INNGEST_EVENT_KEY", "INNGEST_SIGNING_KEY", "INNGEST_BASE_URL"] as const;
/** App-side variables that change nothing in the worker. */
const IGNORED_VARIABLES = ["INNGEST_DEV", "INNGEST_ENV", "INNGEST_SIGNING_KEY_FALLBACK"] as const;

/** Why the worker must not start with this environment, or undefined when it may. */
export function workerEnvRefusal(env: Env = getEnv()): string | undefined {
  const set = INNGEST_MODE_VARIABLES.filter((name) => env[name]);
  if (set.length === 0) return undefined;
  return [
    `npm run worker will not start: ${set.join(", ")} ${set.length > 1 ? "are" : "is"} set.`,
    `  The worker is the Inngest server for its apps; ${set.join(", ")} ${set.length > 1 ? "are settings" : "is a setting"} of an app that sends`,
    `  to an Inngest server. Here ${set.length > 1 ? "they switch" : "it switches"} Gatehouse to Inngest mode, where the worker's POST /e/<key>`,
    `  answers 404 to every event while it still drives its apps.`,
    `  Unset ${set.join(", ")} in the worker's environment (give the apps INNGEST_EVENT_KEY=<executor key>, as the worker`,
    `  prints at start). If Gatehouse runs on Inngest Cloud or a self-hosted Inngest, run no worker: Inngest drives the functions.`,
  ].join("\n");
}

/** A short, non-reversible fingerprint of a secret, to tell which one is in use without printing it. */
export function secretFingerprint(secret: string): string {
  return `sha256:${crypto.createHash("sha256").update(secret).digest("hex").slice(0, 12)}`;
}

/**
 * What the worker prints at start about its keys and the apps sending to it: which key `/e/<key>` expects and where it
 * is kept (never the key), and what an app sets to send events here and be driven.
 */
export function workerKeyLines(origin: string, env: Env = getEnv()): string[] {
  const key = getExecutorKey();
  const keptIn = env.GATEHOUSE_EXECUTOR_KEY ? "GATEHOUSE_EXECUTOR_KEY" : path.join(env.dataDir, "executor-key");
  const { signingKey } = executorSigning();
  const signingFrom = env.GATEHOUSE_EXECUTOR_SIGNING_KEY
    ? "GATEHOUSE_EXECUTOR_SIGNING_KEY"
    : /^(?:[0-9a-f]{2})+$/i.test(key)
      ? "signkey-prod-<executor key>"
      : "signkey-prod-<sha256 hex of the executor key>";
  const lines = [
    `  POST /e/<key> takes only the executor key (${secretFingerprint(key)}), kept in ${keptIn}`,
    `  apps sending here set INNGEST_DEV=${origin} and INNGEST_EVENT_KEY=<executor key>;`,
    `  a signed app (isDev: false) sets INNGEST_BASE_URL=${origin}, INNGEST_EVENT_KEY=<executor key> and`,
    `  INNGEST_SIGNING_KEY=${signingFrom} (${secretFingerprint(signingKey!)})`,
  ];
  const ignored = IGNORED_VARIABLES.filter((name) => env[name]);
  if (ignored.length > 0) lines.push(`  ignored here (an app's settings): ${ignored.join(", ")}`);
  return lines;
}
