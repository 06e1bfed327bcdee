/**
 * Next's instrumentation hook: runs once when the server process starts (`npm run dev`, `npm start`).
 */
export async function register(): Promise<void> {
  // NEXT_RUNTIME is a build-time constant Next inlines per bundle (the one process.env read outside lib/env.ts):
  // it keeps the Node-only executor out of the edge bundle.
  if (process.env.NEXT_RUNTIME !== "nodejs") return;
  const { getEnv } = await import("./lib/env");
  const env = getEnv();

  // Where we listen, how to sign in (the one-time owner link in local mode), and security warnings. Once per process.
  const { printStartupBanner } = await import("./lib/auth/startup");
  await printStartupBanner().catch((error: unknown) => {
    console.warn(`[startup] could not print the sign-in banner: ${error instanceof Error ? error.message : String(error)}`);
  });

  const { sandboxCapabilities } = await import("./lib/sandbox");
  const sandbox = sandboxCapabilities();
  if (sandbox.warning) console.warn(`[sandbox] ${sandbox.warning}`);

  if (env.executionMode !== "embedded" || !env.GATEHOUSE_EMBEDDED_WORKER) return;
  const { startEmbeddedExecutor } = await import("./inngest/embedded");
  const executor = await startEmbeddedExecutor();
  const status = await executor.status();
  for (const app of status.apps) {
    if (app.error) console.warn(`[executor] ${app.url}: ${app.error} (retrying)`);
  }
}
