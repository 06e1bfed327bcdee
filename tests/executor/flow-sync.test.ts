import { Inngest } from "inngest";
import { serve } from "inngest/edge";
import { afterEach, describe, expect, it } from "vitest";
import { Executor, type FetchHandler } from "@/lib/executor";
import { checkFunctionConfig, UnsupportedOptionError } from "@/lib/executor/registry";
import type { FunctionConfig } from "@/lib/executor/protocol";
import { query } from "@/lib/executor/store";

/**
 * An option the embedded executor cannot honour fails the sync with the function and option named — it is never
 * registered and silently ignored.
 */

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (stops.length) await stops.pop()!();
});

async function syncWith(build: (inngest: Inngest.Any) => ReturnType<Inngest.Any["createFunction"]>[], appId: string) {
  const inngest = new Inngest({ id: appId, isDev: true, baseUrl: "http://127.0.0.1:9" });
  const handler = serve({ client: inngest, functions: build(inngest) }) as FetchHandler;
  const url = `http://${appId}.test/api/inngest`;
  const logs: string[] = [];
  const executor = new Executor({ apps: [{ url, handler }], pollMs: 50, log: (_level, message) => logs.push(message) });
  await executor.start();
  stops.push(() => executor.stop());
  const status = (await executor.status()).apps.find((a) => a.url === url);
  const [row] = await query<{ functions: string }>("SELECT functions FROM executor_apps WHERE url = ?", [url]);
  return { status, logs, registered: JSON.parse(row?.functions ?? "[]") as unknown[] };
}

describe("sync refuses what the executor cannot honour", () => {
  it("batchEvents.if is refused, naming the function and the option; nothing is registered", async () => {
    const { status, logs, registered } = await syncWith(
      (inngest) => [
        inngest.createFunction({ id: "fine", triggers: [{ event: "refuse/fine" }] }, async () => "ok"),
        inngest.createFunction(
          { id: "batch-if", batchEvents: { maxSize: 5, timeout: "5s", if: "event.data.keep == true" }, triggers: [{ event: "refuse/batch" }] },
          async () => "never",
        ),
      ],
      "refuse-a",
    );
    expect(status?.error).toContain('Function "refuse-a-batch-if": option batchEvents.if is not supported');
    expect(logs.some((m) => m.includes("batchEvents.if"))).toBe(true);
    expect(registered).toEqual([]);
  });

  it("a third concurrency constraint is refused", async () => {
    const { status } = await syncWith(
      (inngest) => [
        inngest.createFunction(
          {
            id: "three",
            concurrency: [{ limit: 1 }, { limit: 2, key: "event.data.a" }, { limit: 3, key: "event.data.b" }] as never,
            triggers: [{ event: "refuse/three" }],
          },
          async () => "never",
        ),
      ],
      "refuse-b",
    );
    expect(status?.error).toContain('Function "refuse-b-three": option concurrency has more than two constraints');
  });

  it("an app re-synced with a refused option loses its previous registration (no silent ignore)", async () => {
    const inngest = new Inngest({ id: "refuse-c", isDev: true, baseUrl: "http://127.0.0.1:9" });
    const good = serve({ client: inngest, functions: [inngest.createFunction({ id: "f", triggers: [{ event: "refuse/c" }] }, async () => "ok")] }) as FetchHandler;
    const bad = serve({
      client: inngest,
      functions: [
        inngest.createFunction({ id: "f", batchEvents: { maxSize: 2, timeout: "5s", if: "true" }, triggers: [{ event: "refuse/c" }] }, async () => "ok"),
      ],
    }) as FetchHandler;
    let current = good;
    const target = { url: "http://refuse-c.test/api/inngest", handler: (r: Request) => current(r) };
    const executor = new Executor({ apps: [target], pollMs: 50, log: () => {} });
    expect(await executor.syncOne(target)).toBe(true);
    const registered = async () => JSON.parse((await query<{ functions: string }>("SELECT functions FROM executor_apps WHERE url = ?", [target.url]))[0]!.functions);
    expect(await registered()).toHaveLength(1);
    current = bad;
    expect(await executor.syncOne(target)).toBe(false);
    expect(await registered()).toEqual([]);
  });

  it("an option the executor does not know is refused, as are a bad cron and an unreadable period", () => {
    const base: FunctionConfig = { id: "raw-fn", triggers: [{ event: "raw/x" }], steps: { step: { runtime: { url: "http://x" } } } };
    expect(() => checkFunctionConfig({ ...base, someFutureOption: { on: true } } as FunctionConfig)).toThrow(
      new UnsupportedOptionError("raw-fn", "someFutureOption", "is not supported by the embedded executor"),
    );
    expect(() => checkFunctionConfig({ ...base, triggers: [{ cron: "TZ=Europe/Paris not a cron" }] })).toThrow(/raw-fn.*cron trigger/);
    expect(() => checkFunctionConfig({ ...base, throttle: { limit: 1, period: "soon" } } as FunctionConfig)).toThrow(/raw-fn.*throttle\.period/);
    expect(() => checkFunctionConfig({ ...base, singleton: { mode: "queue" } } as FunctionConfig)).toThrow(/raw-fn.*singleton\.mode/);
    expect(() => checkFunctionConfig({ ...base, concurrency: [{ limit: 1, scope: "account" }] })).toThrow(/raw-fn.*concurrency\[0\]\.scope.*needs a key/);
    // Everything supported passes.
    expect(() =>
      checkFunctionConfig({
        ...base,
        triggers: [{ cron: "TZ=Europe/Paris 0 9 * * *" }],
        rateLimit: { limit: 1, period: "1m", key: "event.data.a" },
        throttle: { limit: 2, period: "10s", burst: 1 },
        concurrency: [{ limit: 1, key: "event.data.a", scope: "account" }, { limit: 5 }],
        priority: { run: "event.data.p" },
        singleton: { mode: "skip" },
        timeouts: { start: "1m", finish: "1h" },
        cancel: [{ event: "raw/stop", timeout: "1h" }],
      } as FunctionConfig),
    ).not.toThrow();
  });
});
