/**
 * Next's instrumentation hook: runs once when the server process starts (`npm run dev`, `npm start`).
 * It says what it is doing as it goes (database, sandbox, executor, first compile in dev), and prints the URL and the
 * sign-in link last, once the app answers, so a newcomer knows when to open it.
 */
export async function register(): Promise<void> {
  // NEXT_RUNTIME is a build-time constant Next inlines per bundle (the one process.env read outside lib/env.ts):
  // it keeps the Node-only executor out of the edge bundle.
  if (process.env.NEXT_RUNTIME !== "nodejs") return;
  const started = Date.now();
  const { getEnv } = await import("./lib/env");
  const env = getEnv();
  // In production these lines are JSON log lines like every other (one per event, for the log pipeline); in dev they stay
  // plain text for the person watching the terminal.
  const { log } = await import("./lib/log");
  const production = env.NODE_ENV === "production";
  const step = (line: string) => (production ? log.info(line) : console.log(`[gatehouse] ${line}`));
  const warn = (scope: string, line: string) => (production ? log.warn(`${scope}: ${line}`) : console.warn(`[${scope}] ${line}`));
  step(`starting (${env.executionMode} executor, data in ${env.dataDir})`);

  const { getDb, getCheckpointer } = await import("./lib/db");
  const dbStarted = Date.now();
  await getDb();
  // A file database's WAL is checkpointed by a worker thread (lib/db/checkpointer.ts); one checkpoint now proves the
  // worker loaded libsql and opened the file in this layout (dev, `npm start`, the standalone build), else the writer
  // checkpoints on its own commits and a warning says why.
  const file = env.databaseUrl.startsWith("file:");
  let checkpoints = "";
  if (file) {
    const checkpointer = await getCheckpointer();
    // Never holds the start up: a worker that has not answered in 5 s is reported as such (it keeps running).
    const answer = checkpointer
      ? await Promise.race([checkpointer.checkpoint(), new Promise<"late">((r) => setTimeout(() => r("late"), 5000).unref())])
      : null;
    checkpoints =
      answer === "late" ? ", WAL checkpoint worker slow to answer" : answer ? ", WAL checkpoints on a worker thread" : ", WAL checkpoints on the writer's commits";
  }
  step(`database ready: ${file ? "file" : "server"}, migrations applied (${Date.now() - dbStarted} ms)${checkpoints}`);

  if (production) {
    // Configuration problems in the log before the first run fails on them; never blocks or crashes the start.
    const { logDoctorAtStart } = await import("./lib/ops/doctor");
    void logDoctorAtStart({ env, logger: log }).catch((error: unknown) => {
      log.warn("doctor: could not run the start-up checks", { error: error instanceof Error ? error.message : String(error) });
    });
  }

  const { sandboxCapabilities } = await import("./lib/sandbox");
  const sandbox = sandboxCapabilities();
  if (sandbox.warning) warn("sandbox", sandbox.warning);

  let stopExecutor = async () => {};
  if (env.executionMode === "embedded" && env.GATEHOUSE_EMBEDDED_WORKER) {
    const { startEmbeddedExecutor } = await import("./inngest/embedded");
    const executor = await startEmbeddedExecutor();
    stopExecutor = () => executor.stop();
    const status = await executor.status();
    for (const app of status.apps) {
      if (app.error) warn("executor", `${app.url}: ${app.error} (retrying)`);
    }
    step("embedded executor started");
  }

  // The daily cleanup of failed or cancelled runs' branches and worktrees (GATEHOUSE_CLEANUP_AFTER_DAYS; a timer, not a
  // cron function, so that it works on the embedded executor as on Inngest).
  const { startCleanupSweeps } = await import("./lib/runs/cleanup");
  const stopSweeps = startCleanupSweeps();

  if (env.NEXT_MANUAL_SIG_HANDLE) {
    // `npm start`: SIGTERM/SIGINT stop the executor (in-flight steps finish or are handed back), close the database, exit.
    const { installGracefulShutdown } = await import("./lib/ops/shutdown");
    const { closeDb } = await import("./lib/db");
    installGracefulShutdown({
      stop: async () => {
        stopSweeps();
        await stopExecutor();
        closeDb();
      },
    });
  }

  // Where we listen, how to sign in (the one-time owner link in local mode), and security warnings: last, once the app
  // answers. In dev the first request compiles the routes, which takes a while; say so rather than look stuck.
  const { printStartupBanner } = await import("./lib/auth/startup");
  const banner = () =>
    printStartupBanner().catch((error: unknown) => {
      console.warn(`[startup] could not print the sign-in banner: ${error instanceof Error ? error.message : String(error)}`);
    });
  if (env.NODE_ENV !== "development") {
    step(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await banner();
    return;
  }
  // Next's "✓ Ready" comes before the first compile: say what is compiling until the app really answers, then the link.
  const { warmUpDevServer } = await import("./lib/ops/warm-up");
  const host = env.HOST === "0.0.0.0" || env.HOST === "::" ? "127.0.0.1" : env.HOST.includes(":") ? `[${env.HOST}]` : env.HOST;
  void warmUpDevServer({ baseUrl: `http://${host}:${env.PORT}`, step, started })
    .catch((error: unknown) => console.warn(`[startup] warm-up failed: ${error instanceof Error ? error.message : String(error)}`))
    .then(banner);
}
