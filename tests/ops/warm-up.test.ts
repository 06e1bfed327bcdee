import { describe, expect, it } from "vitest";
import { WARM_UP_ROUTES, warmUpDevServer } from "@/lib/ops/warm-up";

/* Issue #32, finding 17: Next printed "✓ Ready" 37 s before the app answered, and nothing said what it was doing. */

/** A dev server that is not listening for its first `refusals` requests, then holds each request until released. */
function fakeServer({ refusals }: { refusals: number }) {
  let refused = 0;
  const requested: string[] = [];
  const pending: Array<() => void> = [];
  const fetch = (url: string, init: RequestInit) => {
    requested.push(url);
    expect(init.redirect).toBe("manual");
    if (refused < refusals) {
      refused++;
      return Promise.reject(new TypeError("fetch failed (ECONNREFUSED)"));
    }
    return new Promise<unknown>((resolve) => pending.push(() => resolve({ status: 200 })));
  };
  return { fetch, requested, pending };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe("dev start-up warm-up", () => {
  it("says what it compiles, keeps saying so while a compile runs, and prints ready once, after every route answered", async () => {
    let t = 1_000_000;
    const lines: string[] = [];
    const ticks: Array<() => void> = [];
    const server = fakeServer({ refusals: 2 });
    const done = warmUpDevServer({
      baseUrl: "http://127.0.0.1:3000",
      step: (l) => lines.push(l),
      started: t - 5_000,
      fetch: server.fetch,
      now: () => t,
      sleep: async (ms) => {
        t += ms;
      },
      every: (_ms, tick) => {
        ticks.push(tick);
        return () => ticks.splice(ticks.indexOf(tick), 1);
      },
    });

    for (const [i, route] of WARM_UP_ROUTES.entries()) {
      while (server.pending.length === 0) await flush();
      expect(lines.at(-1)).toBe(`compiling ${route.what} (${route.path})…`);
      // A long compile: the heartbeat says it is still going, and nothing claims ready.
      t += 20_000;
      ticks.forEach((tick) => tick());
      expect(lines.at(-1)).toMatch(new RegExp(`^still compiling ${route.what} \\(\\d+\\.\\d s so far\\)…$`));
      expect(lines.some((l) => l.startsWith("ready"))).toBe(false);
      server.pending.shift()!();
      if (i === 0) expect(server.requested.slice(0, 3)).toEqual(Array(3).fill("http://127.0.0.1:3000/api/health"));
    }

    expect(await done).toBe(true);
    expect(lines[0]).toMatch(/"✓ Ready" means it is listening.*Wait for "ready"/);
    expect(lines.filter((l) => l.startsWith("ready"))).toEqual([expect.stringMatching(/^ready in \d+\.\d s: http:\/\/127\.0\.0\.1:3000 answers$/)]);
    expect(lines.at(-1)).toMatch(/^ready in /);
    expect(ticks).toEqual([]); // every heartbeat stopped
    expect(server.requested.map((u) => new URL(u).pathname)).toEqual(["/api/health", "/api/health", "/api/health", "/signin", "/"]);
  });

  it("gives up at the deadline without claiming ready", async () => {
    let t = 0;
    const lines: string[] = [];
    const ok = await warmUpDevServer({
      baseUrl: "http://127.0.0.1:3000",
      step: (l) => lines.push(l),
      started: 0,
      fetch: () => Promise.reject(new TypeError("fetch failed")),
      now: () => t,
      sleep: async (ms) => {
        t += ms;
      },
      every: () => () => {},
      deadlineMs: 2_000,
    });
    expect(ok).toBe(false);
    expect(lines.some((l) => l.startsWith("ready"))).toBe(false);
    expect(lines.at(-1)).toMatch(/\/api\/health has not answered after 2\.0 s; the sign-in link follows/);
  });
});
