import { createHash } from "node:crypto";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Inngest } from "inngest";
import { serve } from "inngest/edge";
import { afterEach, describe, expect, it } from "vitest";

/*
 * patches/inngest+4.24.0.patch (applied by patch-package in postinstall; README, "Patched dependencies"). 1: the SDK's
 * getProcessEnv() picked its ~40 variables out of the environment by enumerating all of process.env, about five times
 * per request (request set-up, response headers, each checkpoint call's headers). Enumerating process.env calls into
 * the C++ environment for every variable: 62 µs a call under `npm run` (68 variables), a fifth of a resume. The patch
 * looks up the SDK's own variables by name instead. These tests fail if the patch is not applied (an install that
 * skipped postinstall, an SDK upgrade that dropped the patch) and hold that the SDK still reads the same variables.
 * 2: the request version (-1, 1 or 2; 0 refused) was checked by a chain of `.or()` unions, each failing branch of which
 * built a ZodError with its stack: 4 per parse, two parses per request, ~110 µs. One flat union accepts the same values
 * and builds no error for a valid version.
 * 3: parseFnData built its request schemas (about 30 zod objects) on every call to the serve handler; they are built
 * once. 4: the client's and the serve handler's headers re-read the whole environment (getProcessEnv) on every
 * checkpoint and every answer, although the caller passes the environment it read at the start of the request; they
 * use that one. 5: hashSigningKey (a SHA-256 in JavaScript, for the bearer of every checkpoint call) is remembered per key.
 * 6: the flat union lists version 2 (what the executor sends) first, so a valid version costs no zod issue.
 * 7: the SSE stream of an execution (StreamTools) is made when its readable side is first read, not for every call.
 * 8: every tenth step found in one call waited for a `setTimeout(0)` (at least 1 ms, the event loop idle) before it
 * was handled; it waits for `setImmediate`, the end of the same event loop turn. 9: a step id's SHA-1 (computed in
 * JavaScript, several times per step and call) is remembered per id. 11: a stored step that only "any value, as
 * data" can read (a waited-for event) is read as that without failing the three strict kinds first (10, the client's
 * calls over node:http, is tests/executor/sdk-local-fetch.test.ts).
 */

const real = process.env;
afterEach(() => {
  process.env = real;
});

/** process.env seen through a Proxy that counts enumerations (Object.keys/entries/for…in all call ownKeys). */
function countingEnv(extra: Record<string, string>): { enumerations: () => number } {
  let n = 0;
  const env = { ...real, ...extra };
  process.env = new Proxy(env, {
    ownKeys(target) {
      n++;
      return Reflect.ownKeys(target);
    },
  }) as NodeJS.ProcessEnv;
  return { enumerations: () => n };
}

/** Counts ZodErrors the SDK builds (its own zod 3 copy): the constructor's `this.name = …` meets this setter. */
async function countingZodErrors(): Promise<{ count: () => number; restore: () => void }> {
  const zodV3 = path.join(process.cwd(), "node_modules", "inngest", "node_modules", "zod", "v3", "index.js");
  const { ZodError } = (await import(pathToFileURL(zodV3).href)) as { ZodError: { prototype: object } };
  let n = 0;
  Object.defineProperty(ZodError.prototype, "name", {
    configurable: true,
    get: () => "ZodError",
    set(this: object, value: string) {
      n++;
      Object.defineProperty(this, "name", { value, writable: true, enumerable: true, configurable: true });
    },
  });
  return { count: () => n, restore: () => void delete (ZodError.prototype as { name?: string }).name };
}

/** Counts zod 3 schemas the SDK builds: ZodType's constructor assigns `this._def`, which meets this setter. */
async function countingZodSchemas(): Promise<{ count: () => number; restore: () => void }> {
  const zodV3 = path.join(process.cwd(), "node_modules", "inngest", "node_modules", "zod", "v3", "index.js");
  const { ZodType } = (await import(pathToFileURL(zodV3).href)) as { ZodType: { prototype: object } };
  let n = 0;
  Object.defineProperty(ZodType.prototype, "_def", {
    configurable: true,
    get: () => undefined,
    set(this: object, value: unknown) {
      n++;
      Object.defineProperty(this, "_def", { value, writable: true, enumerable: true, configurable: true });
    },
  });
  return { count: () => n, restore: () => void delete (ZodType.prototype as { _def?: unknown })._def };
}

/** process.env seen through a Proxy that counts reads of the SDK's own variables (INNGEST_*). */
function countingEnvReads(): { reads: () => number } {
  let n = 0;
  process.env = new Proxy({ ...real }, {
    get(target, key) {
      if (typeof key === "string" && key.startsWith("INNGEST_")) n++;
      return Reflect.get(target, key);
    },
  }) as NodeJS.ProcessEnv;
  return { reads: () => n };
}

/** The executor's call to run the probe function's first step, sent as request version `version`. */
function stepRequest(version: number): Request {
  const event = { name: "probe/go", data: {}, id: "e1", ts: Date.now() };
  return new Request("http://localhost/api/inngest?fnId=env-probe-f&stepId=step", {
    method: "POST",
    headers: { host: "localhost", "content-type": "application/json", "x-inngest-req-version": String(version) },
    body: JSON.stringify({
      event,
      events: [event],
      steps: {},
      ctx: { run_id: "run-1", attempt: 0, disable_immediate_execution: false, use_api: false, stack: { stack: [], current: 0 } },
      version,
    }),
  });
}

/** A call to `fnId` whose run has memoized `steps` (hashed id -> stored result) in this order. */
function memoizedRequest(fnId: string, steps: [string, unknown][]): Request {
  const event = { name: "probe/go", data: {}, id: "e1", ts: Date.now() };
  return new Request(`http://localhost/api/inngest?fnId=${fnId}&stepId=step`, {
    method: "POST",
    headers: { host: "localhost", "content-type": "application/json", "x-inngest-req-version": "2" },
    body: JSON.stringify({
      event,
      events: [event],
      steps: Object.fromEntries(steps),
      ctx: { run_id: "run-1", attempt: 0, disable_immediate_execution: false, use_api: false, stack: { stack: steps.map(([id]) => id), current: steps.length } },
      version: 2,
    }),
  });
}

const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");

function probeApp() {
  const inngest = new Inngest({ id: "env-probe", isDev: true });
  const fn = inngest.createFunction({ id: "f", retries: 0, triggers: [{ event: "probe/go" }] }, async ({ step }) => {
    return step.run("one", () => 1);
  });
  return serve({ client: inngest, functions: [fn] }) as (r: Request) => Promise<Response>;
}

describe("the Inngest SDK reads its environment by name (patched)", () => {
  it("handles a request without enumerating process.env, and still sees INNGEST_ENV and INNGEST_SIGNING_KEY", async () => {
    const env = countingEnv({ INNGEST_ENV: "branch-probe", INNGEST_SIGNING_KEY: `signkey-test-${"ab".repeat(32)}` });
    const handler = probeApp();
    const res = await handler(new Request("http://localhost/api/inngest", { headers: { host: "localhost" } }));
    expect(res.status).toBe(200);
    expect(res.headers.get("x-inngest-env")).toBe("branch-probe");
    expect(await res.json()).toMatchObject({ has_signing_key: true, function_count: 1, mode: "dev" });
    expect(env.enumerations()).toBe(0);
  });

  it("runs a step without enumerating process.env", async () => {
    const env = countingEnv({});
    const handler = probeApp();
    const res = await handler(stepRequest(2));
    // The step ran and was reported as a 206 with its result: the whole request path, start to answer.
    expect(res.status).toBe(206);
    expect(await res.json()).toMatchObject([{ op: "StepRun", name: "one", data: 1 }]);
    expect(env.enumerations()).toBe(0);
  });

  it("checks the request version without building a ZodError, and still refuses version 0", async () => {
    const zod = await countingZodErrors();
    try {
      const handler = probeApp();
      const call = (version: number) => handler(stepRequest(version));
      for (const version of [2, 1, -1]) {
        const res = await call(version);
        expect(res.status).toBe(206);
      }
      expect(zod.count()).toBe(0);
      // Version 0 is still refused, with the same error as before the patch (the SDK wraps "V0 execution version is no
      // longer supported" as a parse failure).
      const refused = await call(0);
      expect(refused.status).toBe(500);
      expect(await refused.text()).toContain("Failed to parse data from executor");
    } finally {
      zod.restore();
    }
  });

  it("reads the request version the executor sends (2) without building a zod issue", async () => {
    // 6: the union tried -1, 0 and 1 before 2, and each failing branch made an issue (its message through the error
    // map): 3 per parse, two parses per call. Version 2 comes first now; the accepted values are the same.
    const zodV3 = path.join(process.cwd(), "node_modules", "inngest", "node_modules", "zod", "v3", "index.js");
    const z3 = (await import(pathToFileURL(zodV3).href)) as {
      setErrorMap: (map: (issue: unknown, ctx: { defaultError: string }) => { message: string }) => void;
      defaultErrorMap: (issue: unknown, ctx: { defaultError: string }) => { message: string };
    };
    const handler = probeApp();
    expect((await handler(stepRequest(2))).status).toBe(206);
    let issues = 0;
    z3.setErrorMap((issue, ctx) => {
      issues++;
      return z3.defaultErrorMap(issue, ctx);
    });
    try {
      for (let i = 0; i < 3; i++) expect((await handler(stepRequest(2))).status).toBe(206);
      expect(issues).toBe(0);
    } finally {
      z3.setErrorMap(z3.defaultErrorMap);
    }
  });

  it("runs a step without building the SSE stream nobody reads, and a stream read later gets every event in order", async () => {
    // 7: every execution built a TransformStream for SSE streaming and wrote an event into it per step, although
    // only a streaming (durable endpoint) response ever reads it. It is made when its readable side is asked for.
    const handler = probeApp();
    expect((await handler(stepRequest(2))).status).toBe(206);
    const Original = globalThis.TransformStream;
    let made = 0;
    globalThis.TransformStream = class extends Original {
      constructor(...args: ConstructorParameters<typeof TransformStream>) {
        super(...args);
        made++;
      }
    } as typeof TransformStream;
    try {
      for (let i = 0; i < 3; i++) expect((await handler(stepRequest(2))).status).toBe(206);
      expect(made).toBe(0);
    } finally {
      globalThis.TransformStream = Original;
    }
    const tools = path.join(process.cwd(), "node_modules", "inngest", "components", "StreamTools.js");
    const { Stream } = (await import(pathToFileURL(tools).href)) as {
      Stream: new (opts: object) => { commit(id: string): void; push(data: unknown): void; closeSucceeded(r: unknown): void; writeChain: Promise<void>; readable: ReadableStream };
    };
    const early = new Stream({});
    early.commit("a");
    early.push({ x: 1 });
    early.closeSucceeded({ ok: 1 });
    await early.writeChain;
    const late = new Stream({});
    const readable = late.readable;
    late.commit("a");
    late.push({ x: 1 });
    late.closeSucceeded({ ok: 1 });
    const [a, b] = [await new Response(early.readable).text(), await new Response(readable).text()];
    expect(a).toBe(b);
    expect(a.match(/^event: [a-z.]+/gm)).toEqual(["event: inngest.commit", "event: inngest.stream", "event: inngest.response"]);
  });

  it("builds the schemas that read a call's body once, not on every call", async () => {
    const handler = probeApp();
    expect((await handler(stepRequest(2))).status).toBe(206);
    const zod = await countingZodSchemas();
    try {
      for (let i = 0; i < 3; i++) expect((await handler(stepRequest(2))).status).toBe(206);
      // Unpatched, each call builds the ~30 schemas of parseFnData again (and the version schema twice).
      expect(zod.count()).toBeLessThan(10);
    } finally {
      zod.restore();
    }
  });

  it("headers use the environment the client and the handler already read; a new client still sees INNGEST_ENV", async () => {
    const sent: Record<string, string>[] = [];
    const inngest = new Inngest({
      id: "env-headers",
      isDev: true,
      baseUrl: "http://events.test",
      fetch: async (_input, init) => {
        sent.push(Object.fromEntries(new Headers(init?.headers).entries()));
        return Response.json({ ids: ["e1"], status: 200 });
      },
    });
    await inngest.send({ name: "probe/one", data: {} });
    const env = countingEnvReads();
    for (let i = 0; i < 3; i++) await inngest.send({ name: "probe/one", data: {} });
    // Unpatched, every send reads all ~40 INNGEST_* variables again for its headers.
    expect(env.reads()).toBe(0);
    process.env = real;
    process.env.INNGEST_ENV = "branch-headers";
    try {
      const fresh = new Inngest({ id: "env-headers-2", isDev: true, baseUrl: "http://events.test", fetch: inngest["fetch"] as typeof fetch });
      await fresh.send({ name: "probe/one", data: {} });
      expect(sent.at(-1)?.["x-inngest-env"]).toBe("branch-headers");
    } finally {
      delete process.env.INNGEST_ENV;
    }
  });

  it("hashes a signing key for its bearer once per key, to the same value", async () => {
    const strings = path.join(process.cwd(), "node_modules", "inngest", "helpers", "strings.js");
    const { hashSigningKey } = (await import(pathToFileURL(strings).href)) as { hashSigningKey: (key: string) => string };
    const { createRequire } = await import("node:module");
    const hashjs = createRequire(strings)("hash.js") as { sha256: () => { update: (...a: unknown[]) => unknown } };
    const proto = Object.getPrototypeOf(Object.getPrototypeOf(hashjs.sha256())) as { update: (...a: unknown[]) => unknown };
    const update = proto.update;
    let updates = 0;
    proto.update = function (this: unknown, ...args: unknown[]) {
      updates++;
      return update.apply(this, args);
    };
    try {
      const key = `signkey-prod-${"c3".repeat(32)}`;
      const first = hashSigningKey(key);
      expect(first).toBe(`signkey-prod-${createHash("sha256").update(Buffer.from("c3".repeat(32), "hex")).digest("hex")}`);
      const before = updates;
      expect(before).toBeGreaterThan(0);
      expect(hashSigningKey(key)).toBe(first);
      expect(updates).toBe(before);
    } finally {
      proto.update = update;
    }
  });

  it("handles every step found in a call without waiting for a timer", async () => {
    // 8: a call that meets 24 memoized steps and runs the 25th. Unpatched, the 10th and 20th steps found each waited
    // for setTimeout(0) (1 ms or more with nothing to do); now for setImmediate, which needs no timer.
    const inngest = new Inngest({ id: "tick-probe", isDev: true });
    const fn = inngest.createFunction({ id: "f", retries: 0, triggers: [{ event: "probe/go" }] }, async ({ step }) => {
      for (let i = 0; i < 25; i++) await step.run(`s${i}`, () => i);
      return "done";
    });
    const handler = serve({ client: inngest, functions: [fn] }) as (r: Request) => Promise<Response>;
    const memoized: [string, unknown][] = Array.from({ length: 24 }, (_, i) => [sha1(`s${i}`), { data: i }]);
    const original = globalThis.setTimeout;
    const zeroTimers: unknown[] = [];
    globalThis.setTimeout = ((fn: () => void, ms?: number, ...rest: unknown[]) => {
      if (!ms) zeroTimers.push(fn);
      return original(fn, ms, ...rest);
    }) as typeof setTimeout;
    let res: Response;
    try {
      res = await handler(memoizedRequest("tick-probe-f", memoized));
    } finally {
      globalThis.setTimeout = original;
    }
    expect(res.status).toBe(206);
    // The memoized steps were all taken as done, in order: the call ran the 25th and reported it.
    expect(await res.json()).toMatchObject([{ op: "StepRun", name: "s24", data: 24 }]);
    expect(zeroTimers).toHaveLength(0);
  });

  it("reads a resumed call's steps (a step's data, a waited-for event) without building a zod issue", async () => {
    // 11: each stored step is read by a union of three strict kinds (data, error, input) and "any value, as data".
    // A waitForEvent's event (name, data, id, ts) failed the three first, each failure a zod issue with its message:
    // 2 to 4 per resumed call. A value only the last kind can take goes to it directly; the others read as before.
    const zodV3 = path.join(process.cwd(), "node_modules", "inngest", "node_modules", "zod", "v3", "index.js");
    const z3 = (await import(pathToFileURL(zodV3).href)) as {
      setErrorMap: (map: (issue: unknown, ctx: { defaultError: string }) => { message: string }) => void;
      defaultErrorMap: (issue: unknown, ctx: { defaultError: string }) => { message: string };
    };
    const inngest = new Inngest({ id: "wait-probe", isDev: true });
    const seen: unknown[] = [];
    const fn = inngest.createFunction({ id: "f", retries: 0, triggers: [{ event: "probe/go" }] }, async ({ step }) => {
      seen.push(await step.run("one", () => 1));
      seen.push(await step.waitForEvent("approve", { event: "probe/approve", timeout: "1h" }));
      return step.run("two", () => 2);
    });
    const handler = serve({ client: inngest, functions: [fn] }) as (r: Request) => Promise<Response>;
    const approve = { name: "probe/approve", data: { k: 1 }, id: "e2", ts: 1 };
    const steps: [string, unknown][] = [
      [sha1("one"), { data: { ok: true } }],
      [sha1("approve"), approve],
    ];
    expect((await handler(memoizedRequest("wait-probe-f", steps))).status).toBe(206);
    seen.length = 0;
    let issues = 0;
    z3.setErrorMap((issue, ctx) => {
      issues++;
      return z3.defaultErrorMap(issue, ctx);
    });
    try {
      const res = await handler(memoizedRequest("wait-probe-f", steps));
      expect(res.status).toBe(206);
      expect(await res.json()).toMatchObject([{ op: "StepRun", name: "two", data: 2 }]);
      expect(issues).toBe(0);
    } finally {
      z3.setErrorMap(z3.defaultErrorMap);
    }
    // The function saw each stored step as before: the data, the whole event.
    expect(seen).toEqual([{ ok: true }, approve]);
  });

  it("hashes a step id once per process, to the same id", async () => {
    // 9: each call hashed every step id it met with hash.js's SHA-1, several times per step.
    const handler = probeApp();
    const engine = path.join(process.cwd(), "node_modules", "inngest", "components", "execution", "engine.js");
    const { createRequire } = await import("node:module");
    const hashjs = createRequire(engine)("hash.js") as { sha1: () => object };
    const proto = Object.getPrototypeOf(Object.getPrototypeOf(hashjs.sha1())) as { update: (...a: unknown[]) => unknown };
    const first = await handler(stepRequest(2));
    expect(first.status).toBe(206);
    // The reported id is the SHA-1 of the step's id, as Inngest computes it.
    expect(await first.json()).toMatchObject([{ id: sha1("one"), name: "one" }]);
    const update = proto.update;
    let updates = 0;
    proto.update = function (this: unknown, ...args: unknown[]) {
      updates++;
      return update.apply(this, args);
    };
    try {
      for (let i = 0; i < 3; i++) expect(await (await handler(stepRequest(2))).json()).toMatchObject([{ id: sha1("one") }]);
      expect(updates).toBe(0);
    } finally {
      proto.update = update;
    }
  });
});
