import { createHash } from "node:crypto";
import { createHook } from "node:async_hooks";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

/*
 * patches/inngest+4.24.0.patch, the changes on a resume's path (README, "Patched dependencies"). 12: every call to a
 * serve handler read its body (event, events, steps, ctx) with a zod object of about 30 schemas; a body as an executor
 * sends it (plain JSON, no `defers` entries) is read by hand to the same values, copies and key order, anything else
 * by the schema as before. 13: `inngest.send()` read the event API's answer with zod's async parse (a promise per
 * field); the plain answer (`ids`, `status`, no `error`) is read by hand. 14: each step a call finds is handled after
 * about a hundred microtask hops (resolveAfterPending), each of which made two promises, about 800 of the ~1,070
 * promises of a resumed call; a hop makes one, off one promise resolved once. These tests fail on the unpatched SDK.
 */

const sdkFile = (rel: string) => pathToFileURL(path.join(process.cwd(), "node_modules", "inngest", rel)).href;

/** The SDK loaded as the zod counted below is (its ESM files, by path). */
async function sdk(): Promise<{ Inngest: typeof import("inngest").Inngest; serve: typeof import("inngest/edge").serve }> {
  const { Inngest } = (await import(sdkFile("index.js"))) as typeof import("inngest");
  const { serve } = (await import(sdkFile("edge.js"))) as typeof import("inngest/edge");
  return { Inngest, serve };
}

type Entries = { _parseSync: (...a: unknown[]) => unknown; _parseAsync: (...a: unknown[]) => unknown };

/**
 * Counts parses that start at a schema (`parse`, `safeParse` and their async forms all enter through `_parseSync` or
 * `_parseAsync`; nested schemas do not), in both builds of the SDK's own zod 3 copy (its ESM and CommonJS files).
 */
async function countingZodParses(): Promise<{ count: () => number; restore: () => void }> {
  const zodV3 = path.join(process.cwd(), "node_modules", "inngest", "node_modules", "zod", "v3");
  const esm = ((await import(pathToFileURL(path.join(zodV3, "index.js")).href)) as { ZodType: { prototype: Entries } }).ZodType.prototype;
  const cjs = (createRequire(import.meta.url)(path.join(zodV3, "index.cjs")) as { ZodType: { prototype: Entries } }).ZodType.prototype;
  let n = 0;
  const saved = [esm, cjs].map((proto) => {
    const { _parseSync, _parseAsync } = proto;
    proto._parseSync = function (this: unknown, ...args: unknown[]) {
      n++;
      return _parseSync.apply(this, args);
    };
    proto._parseAsync = function (this: unknown, ...args: unknown[]) {
      n++;
      return _parseAsync.apply(this, args);
    };
    return { proto, _parseSync, _parseAsync };
  });
  return {
    count: () => n,
    restore: () => {
      for (const { proto, _parseSync, _parseAsync } of saved) Object.assign(proto, { _parseSync, _parseAsync });
    },
  };
}

const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");
const logger = { error() {}, warn() {}, info() {}, debug() {} };
type ParseFnData = (data: unknown, headerVersion: number | undefined, logger: object) => Record<string, unknown>;

const gate = { name: "peer/gate", data: { k: "g1" }, id: "e1", ts: 1 };
const approve = { name: "peer/approve", data: { k: "g1" }, id: "e2", ts: 2 };
/** What the embedded executor sends to resume a run parked on its wait (dispatch.ts body()). */
const resumeBody = {
  event: gate,
  events: [gate],
  steps: { [sha1("step1")]: { data: { ok: true } }, [sha1("approve")]: approve },
  ctx: {
    run_id: "run-1",
    attempt: 0,
    max_attempts: 1,
    stack: { stack: [sha1("step1"), sha1("approve")], current: 2 },
    disable_immediate_execution: false,
    use_api: false,
    fn_id: "app-gate",
    qi_id: "worker-1/3",
  },
  version: 2,
};

describe("the Inngest SDK on a resume's path (patched)", () => {
  it("reads an executor's call body without zod, to what the schema read", async () => {
    const { parseFnData } = (await import(sdkFile("helpers/functions.js"))) as { parseFnData: ParseFnData };
    const zod = await countingZodParses();
    let read: Record<string, unknown>;
    try {
      read = parseFnData(JSON.parse(JSON.stringify(resumeBody)), 2, logger);
      // What is left is the header's version (a transform over a union: 3 entries). Unpatched, the body's schema and
      // each `{data}` step's union made it 15.
      expect(zod.count()).toBeLessThanOrEqual(3);
    } finally {
      zod.restore();
    }
    // The schema's reading: known keys only, in its order, defaults filled, steps as kinds, ctx's unknown keys dropped.
    expect(JSON.stringify(read)).toBe(
      JSON.stringify({
        version: 2,
        sdkDecided: false,
        event: gate,
        events: [gate],
        steps: { [sha1("step1")]: { type: "data", data: { ok: true } }, [sha1("approve")]: { type: "data", data: approve } },
        defers: {},
        ctx: {
          run_id: "run-1",
          fn_id: "app-gate",
          attempt: 0,
          max_attempts: 1,
          disable_immediate_execution: false,
          use_api: false,
          qi_id: "worker-1/3",
          stack: { stack: [sha1("step1"), sha1("approve")], current: 2 },
        },
      }),
    );
  });

  it("reads other bodies as the schema does: defaults, copies, and the schema's refusals", async () => {
    const { parseFnData } = (await import(sdkFile("helpers/functions.js"))) as { parseFnData: ParseFnData };
    const minimal = parseFnData({ event: { name: "a" } }, 2, logger);
    expect(minimal).toEqual({ version: 2, sdkDecided: false, event: { name: "a" }, events: [], steps: {}, defers: {} });
    expect("ctx" in minimal).toBe(false);
    const bare = parseFnData({ event: gate, ctx: { run_id: "r", stack: { stack: null, current: 0, extra: 1 }, other: 1 } }, 2, logger);
    expect(bare.ctx).toEqual({ run_id: "r", attempt: 0, disable_immediate_execution: false, use_api: false, stack: { stack: [], current: 0 } });
    expect(parseFnData({ event: gate, ctx: null }, 2, logger).ctx).toBeNull();
    // The event and the steps' values are copies of the objects sent, as the schema's records are.
    const body = JSON.parse(JSON.stringify(resumeBody)) as typeof resumeBody;
    const read = parseFnData(body, 2, logger) as { event: object; events: object[]; ctx: { stack: { stack: string[] } } };
    expect(read.event).not.toBe(body.event);
    expect(read.events[0]).not.toBe(body.events[0]);
    expect(read.ctx.stack.stack).not.toBe(body.ctx.stack.stack);
    // Anything else is the schema's: a defer entry is read (unknown keys dropped), a wrong type refused with its message.
    expect(parseFnData({ event: gate, defers: { d: { abortable: true, x: 1 } } }, 2, logger).defers).toEqual({ d: { abortable: true } });
    expect(() => parseFnData({ event: gate, ctx: { run_id: 7 } }, 2, logger)).toThrow(/run_id/);
    expect(() => parseFnData({ event: [] }, 2, logger)).toThrow(/event/);
    expect(() => parseFnData({ event: gate, ctx: { run_id: "r", attempt: null } }, 2, logger)).toThrow(/attempt/);
  });

  it("resumes a run from an executor's call without parsing its body with zod", async () => {
    const { Inngest, serve } = await sdk();
    const inngest = new Inngest({ id: "app", isDev: true });
    const seen: unknown[] = [];
    const fn = inngest.createFunction({ id: "gate", retries: 0, triggers: [{ event: "peer/gate" }] }, async ({ step }) => {
      seen.push(await step.run("step1", () => ({ ok: true })));
      seen.push(await step.waitForEvent("approve", { event: "peer/approve", match: "data.k", timeout: "1h" }));
      return step.run("step2", () => 2);
    });
    const handler = serve({ client: inngest, functions: [fn] }) as (r: Request) => Promise<Response>;
    const { ctx, ...rest } = resumeBody;
    const call = () =>
      handler(
        new Request("http://localhost/api/inngest?fnId=app-gate&stepId=step", {
          method: "POST",
          headers: { host: "localhost", "content-type": "application/json", "x-inngest-req-version": "2" },
          // Without fn_id/qi_id: the SDK answers with the step to run (no checkpoint call to an executor).
          body: JSON.stringify({ ...rest, ctx: { ...ctx, fn_id: undefined, qi_id: undefined } }),
        }),
      );
    expect((await call()).status).toBe(206);
    seen.length = 0;
    const zod = await countingZodParses();
    let before: number;
    try {
      const res = await call();
      expect(res.status).toBe(206);
      expect(await res.json()).toMatchObject([{ op: "StepRun", name: "step2", data: 2 }]);
      before = zod.count();
    } finally {
      zod.restore();
    }
    // What is left is the request version, read from the header twice (6 entries); unpatched, 18 with the body's.
    expect(before).toBeLessThanOrEqual(6);
    expect(seen).toEqual([{ ok: true }, approve]);
  });

  it("reads the event API's plain answer without zod, and still the schema's refusal of another", async () => {
    const { Inngest } = await sdk();
    let answer: unknown = { ids: ["01A", "01B"], status: 200 };
    const inngest = new Inngest({
      id: "sender",
      isDev: true,
      baseUrl: "http://127.0.0.1:9",
      fetch: (async () => new Response(JSON.stringify(answer), { status: 200, headers: { "content-type": "application/json" } })) as typeof fetch,
    });
    const zod = await countingZodParses();
    try {
      expect(await inngest.send({ name: "a/b", data: {} })).toEqual({ ids: ["01A", "01B"] });
      expect(zod.count()).toBe(0);
    } finally {
      zod.restore();
    }
    // An answer with an error (or of another shape) is the schema's, with its handling as before.
    answer = { ids: [], status: 400, error: "bad event" };
    await expect(inngest.send({ name: "a/b", data: {} })).rejects.toThrow(/bad event/);
    answer = { status: 200 };
    expect(await inngest.send({ name: "a/b", data: {} })).toEqual({ ids: [] });
  });

  it("waits its hundred microtask hops per found step with one promise a hop, in the same order", async () => {
    const { resolveAfterPending } = (await import(sdkFile("helpers/promises.js"))) as { resolveAfterPending: (count?: number) => Promise<void> };
    let promises = 0;
    const hook = createHook({
      init(_id, type) {
        if (type === "PROMISE") promises++;
      },
    }).enable();
    const order: string[] = [];
    try {
      const done = resolveAfterPending().then(() => order.push("resolved"));
      // A chain of 50 hops queued after it still runs first: the wait is as long as before (101 hops).
      let chain: Promise<unknown> = Promise.resolve();
      for (let i = 0; i < 50; i++) chain = chain.then(() => undefined);
      void chain.then(() => order.push("50 hops"));
      await done;
    } finally {
      hook.disable();
    }
    expect(order).toEqual(["50 hops", "resolved"]);
    // Unpatched: 2 a hop (Promise.resolve() and its then), over 200.
    expect(promises).toBeLessThan(170);
  });
});
