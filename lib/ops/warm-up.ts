/**
 * `npm run dev` only: Next prints "✓ Ready" as soon as it listens, but it compiles each route on its first request, which
 * takes tens of seconds on a small machine. So the start-up asks for the routes a newcomer opens first, says what it is
 * compiling (with a line every few seconds, so that the terminal does not look stuck after "✓ Ready"), and reports ready
 * only once the app answers them all — then the sign-in link opens without a wait.
 */

/** The routes warmed, in the order a newcomer meets them, with what compiling each one means. */
export const WARM_UP_ROUTES: ReadonlyArray<{ path: string; what: string }> = [
  { path: "/api/health", what: "the server routes and database access" },
  { path: "/signin", what: "the sign-in page" },
  { path: "/", what: "the dashboard" },
];

export type WarmUpOptions = {
  /** Where the dev server listens, e.g. http://127.0.0.1:3000. */
  baseUrl: string;
  /** One progress line (instrumentation prefixes it with [gatehouse]). */
  step: (line: string) => void;
  /** When the server process started (ms), for "ready in N s". */
  started: number;
  routes?: ReadonlyArray<{ path: string; what: string }>;
  fetch?: (url: string, init: RequestInit) => Promise<unknown>;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /** Calls `tick` every `ms` until the returned stop is called (the "still compiling" line). */
  every?: (ms: number, tick: () => void) => () => void;
  heartbeatMs?: number;
  /** Give up waiting after this long (the link is printed anyway). */
  deadlineMs?: number;
};

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

const defaultEvery = (ms: number, tick: () => void) => {
  const timer = setInterval(tick, ms);
  timer.unref();
  return () => clearInterval(timer);
};

/**
 * Request each route until it answers (any status: a redirect to /signin still compiled the page), then print
 * "ready in N s". Resolves true when all answered, false when the deadline passed first.
 */
export async function warmUpDevServer({
  baseUrl,
  step,
  started,
  routes = WARM_UP_ROUTES,
  fetch: fetchImpl = (url, init) => fetch(url, init),
  now = Date.now,
  sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  every = defaultEvery,
  heartbeatMs = 10_000,
  deadlineMs = 180_000,
}: WarmUpOptions): Promise<boolean> {
  const deadline = now() + deadlineMs;
  step(`Next's "✓ Ready" means it is listening; the app itself answers once it is compiled (about 30–60 s on a 2-core machine the first time). Wait for "ready" below.`);
  for (const { path, what } of routes) {
    const since = now();
    step(`compiling ${what} (${path})…`);
    const stop = every(heartbeatMs, () => step(`still compiling ${what} (${seconds(now() - since)} so far)…`));
    try {
      let answered = false;
      // The server may not be listening yet when instrumentation runs: retry until it answers.
      while (!answered && now() < deadline) {
        answered = await fetchImpl(`${baseUrl}${path}`, { redirect: "manual", signal: AbortSignal.timeout(120_000) }).then(
          () => true,
          () => false,
        );
        if (!answered) await sleep(250);
      }
      if (!answered) {
        step(`${baseUrl}${path} has not answered after ${seconds(deadlineMs)}; the sign-in link follows, but pages may still be compiling.`);
        return false;
      }
    } finally {
      stop();
    }
  }
  step(`ready in ${seconds(now() - started)}: ${baseUrl} answers`);
  return true;
}
