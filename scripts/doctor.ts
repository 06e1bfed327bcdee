import { parseArgs } from "node:util";
import { EnvError, getEnv } from "@/lib/env";
import { formatResults, runDoctor } from "@/lib/ops/doctor";

/**
 * `npm run doctor [-- --offline] [--e2b] [--live-models] [--model provider:model …]`: checks this environment's
 * configuration and, unless --offline, connects to every configured backend. Exits 1 when a check fails.
 */
const { values } = parseArgs({
  options: {
    offline: { type: "boolean", default: false },
    e2b: { type: "boolean", default: false },
    "live-models": { type: "boolean", default: false },
    model: { type: "string", multiple: true },
    "no-sync": { type: "boolean", default: false },
  },
});

try {
  const env = getEnv();
  console.log(`Gatehouse doctor: ${env.NODE_ENV}, ${env.executionMode} executor, database ${env.databaseUrl.startsWith("file:") ? "file" : "server"}\n`);
  const results = await runDoctor({
    env,
    live: !values.offline,
    inngestSync: !values.offline && !values["no-sync"],
    e2bStart: values.e2b,
    liveModels: values["live-models"],
    models: values.model,
  });
  console.log(formatResults(results));
  const failed = results.filter((r) => r.status === "fail").length;
  const warned = results.filter((r) => r.status === "warn").length;
  console.log(`\n${failed} failed, ${warned} warning(s), ${results.length - failed - warned} fine or skipped`);
  if (failed > 0) process.exitCode = 1;
} catch (error) {
  // A variable that does not parse is the first thing to fix: lib/env.ts says which and how.
  console.error(error instanceof EnvError ? error.message : `doctor failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}
