import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import fc from "fast-check";
import { getClient } from "@/lib/db";
import { resetEnvCache } from "@/lib/env";
import { resetRateLimits } from "@/lib/security/rate-limit";
import { loginThrottle } from "@/lib/auth/login-throttle";
import { makeWorld, ORIGIN, type World } from "../auth/fixtures";
import { loadCases, MUTATIONS, paramValue, PUBLIC_ROUTES, sampleBodies, sampleQuery, type RouteCase } from "../auth/routes";
import { FAKE } from "./fake-secrets";

/*
 * Property-based fuzzing of every route handler in app/**\/route.ts (the list the authorization matrix walks), called
 * in-process: at least RUNS malformed or hostile inputs each — wrong types, huge strings, deep nesting, prototype keys,
 * invalid UTF-8, NUL bytes, path traversal, planted secrets — and for every one: never a 5xx, no row written by a
 * refused request, and no secret (or an 8-character prefix of one) in the response.
 */

const RUNS = 200;
const SECRET = "fuzz-configured-client-secret-0123456789";
const PLANTED = [SECRET, FAKE.openai, FAKE.github, "test-admin-token-0123456789"];

// Routes must be known when the tests are collected; env first (tests/setup.ts gave this file its own database).
process.env.GITHUB_APP_CLIENT_SECRET = SECRET;
process.env.GITHUB_APP_WEBHOOK_SECRET = "fuzz-webhook-secret-0123456789";
// Slack configured, so its routes verify (and refuse) the hostile requests rather than answer 503 "not configured".
process.env.SLACK_SIGNING_SECRET = "fuzz-slack-signing-secret-0123456789";
for (const name of ["GATEHOUSE_RATE_LIMIT_RUNS", "GATEHOUSE_RATE_LIMIT_DECISIONS", "GATEHOUSE_RATE_LIMIT_CREATIONS"]) {
  process.env[name] = "1000000";
}
resetEnvCache();
const cases = (await loadCases()).sort((a, b) => Number(a.method === "DELETE") - Number(b.method === "DELETE"));

let world: World;
let tables: string[] = [];
const counts: Record<string, { runs: number; statuses: Record<number, number> }> = {};

beforeAll(async () => {
  world = await makeWorld();
  const client = await getClient();
  const rows = await client.execute(
    "select name from sqlite_master where type = 'table' and name not like 'sqlite_%' and name not like '__drizzle%' order by name",
  );
  tables = rows.rows.map((r) => String(r.name));
  // Auth.js and the route guard log refused input; the assertions are on responses and rows, not on stderr noise.
  vi.spyOn(console, "error").mockImplementation(() => {});
  vi.spyOn(console, "warn").mockImplementation(() => {});
  vi.spyOn(console, "log").mockImplementation(() => {});
});

afterAll(() => {
  vi.restoreAllMocks();
  const lines = Object.entries(counts).map(([key, c]) => {
    const statuses = Object.entries(c.statuses).map(([s, n]) => `${s}×${n}`).join(" ");
    return `${key.padEnd(48)} ${String(c.runs).padStart(4)}  ${statuses}`;
  });
  const total = Object.values(counts).reduce((n, c) => n + c.runs, 0);
  console.log(`\nfuzz: inputs per route (status × count)\n${lines.join("\n")}\nfuzz: ${total} inputs over ${lines.length} route handlers, 0 5xx\n`);
});

async function rowCounts(): Promise<string> {
  const client = await getClient();
  const result = await client.execute(`select ${tables.map((t) => `(select count(*) from "${t}")`).join(", ")}`);
  return JSON.stringify(result.rows[0]);
}

// ---------------------------------------------------------------------------------------------------------------------
// Inputs

const NASTY_STRINGS = [
  "../../../../etc/passwd",
  "..\\..\\..\\windows\\win.ini",
  "/etc/shadow",
  "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
  "file:///etc/passwd",
  "\u0000",
  "a\u0000b",
  "\uD800",
  "\uFFFE\uFEFF",
  "<script>alert(1)</script>",
  "<img src=http://evil.example/p.png>",
  "'; DROP TABLE workflow_runs; --",
  "${process.env.AUTH_SECRET}",
  "__proto__",
  "constructor",
  "prototype",
  ...PLANTED,
];

const nastyScalar = fc.oneof(
  fc.constantFrom(...NASTY_STRINGS),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.integer({ min: 5_000, max: 120_000 }).map((n) => "x".repeat(n)),
);

const nastyKey = fc.oneof(fc.constantFrom("__proto__", "constructor", "prototype", "toString", "hasOwnProperty"), fc.string({ maxLength: 12 }));

/** JSON trees as text, so that "__proto__" is an own key in the body (an object literal would set the prototype). */
type Tree = { scalar: unknown } | { array: Tree[] } | { entries: Array<[string, Tree]> };
const { tree } = fc.letrec<{ tree: Tree }>((tie) => ({
  tree: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    nastyScalar.map((scalar) => ({ scalar })),
    fc.array(tie("tree"), { maxLength: 4 }).map((array) => ({ array })),
    fc.array(fc.tuple(nastyKey, tie("tree")), { maxLength: 5 }).map((entries) => ({ entries })),
  ),
}));

function toJson(t: Tree): string {
  if ("scalar" in t) return JSON.stringify(t.scalar) ?? "null";
  if ("array" in t) return `[${t.array.map(toJson).join(",")}]`;
  return `{${t.entries.map(([k, v]) => `${JSON.stringify(k)}:${toJson(v)}`).join(",")}}`;
}

type Body = { kind: string; bytes: Uint8Array | string; contentType?: string };
const utf8 = (s: string) => s;

/** A body built from the route's valid sample with one field replaced or added (gets past the first checks). */
function mutated(sample: Record<string, unknown>): fc.Arbitrary<Body> {
  const keys = Object.keys(sample);
  return fc
    .tuple(fc.oneof(fc.constantFrom(...(keys.length ? keys : ["x"])), nastyKey), tree)
    .map(([key, value]) => {
      const base = Object.entries(sample)
        .filter(([k]) => k !== key)
        .map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
      return { kind: "mutated sample", bytes: utf8(`{${[...base, `${JSON.stringify(key)}:${toJson(value)}`].join(",")}}`) };
    });
}

/** The valid sample with every string replaced by a hostile string of the same type: reaches past the schema. */
function sameTypes(sample: Record<string, unknown>): fc.Arbitrary<Body> {
  const hostileString = fc.oneof(fc.constantFrom(...NASTY_STRINGS), fc.string({ unit: "grapheme", maxLength: 40 }));
  const swap = (value: unknown): fc.Arbitrary<unknown> => {
    if (typeof value === "string") return fc.oneof(fc.constant(value), hostileString);
    if (Array.isArray(value)) return fc.tuple(...value.map(swap));
    if (value && typeof value === "object") {
      const entries = Object.entries(value);
      return fc.tuple(...entries.map(([, v]) => swap(v))).map((vs) => Object.fromEntries(entries.map(([k], i) => [k, vs[i]])));
    }
    return fc.constant(value);
  };
  return swap(sample).map((b) => ({ kind: "hostile strings in a valid shape", bytes: utf8(JSON.stringify(b)) }));
}

function bodies(c: RouteCase): fc.Arbitrary<Body> {
  const sample = (MUTATIONS.has(c.method) && world ? sampleBodies(c.key, world).find((b) => b && typeof b === "object") : undefined) as
    | Record<string, unknown>
    | undefined;
  const arbitraries: fc.Arbitrary<Body>[] = [
    tree.map((t) => ({ kind: "hostile json", bytes: utf8(toJson(t)) })),
    fc.string({ maxLength: 200 }).map((s) => ({ kind: "not json", bytes: utf8(s) })),
    fc
      .tuple(fc.uint8Array({ minLength: 1, maxLength: 64 }), fc.constantFrom(0xff, 0xfe, 0xc3, 0xed, 0x80))
      .map(([bytes, bad]) => ({
        kind: "invalid utf-8",
        bytes: new Uint8Array([...Buffer.from('{"request":"'), bad, ...bytes, bad, ...Buffer.from('","name":"x"}')]),
      })),
    fc.tuple(fc.integer({ min: 50, max: 3_000 }), fc.boolean()).map(([n, arrays]) => ({
      kind: "deep nesting",
      bytes: utf8(arrays ? `${"[".repeat(n)}1${"]".repeat(n)}` : `${'{"a":'.repeat(n)}1${"}".repeat(n)}`),
    })),
    fc.integer({ min: 100_000, max: 1_200_000 }).map((n) => ({
      kind: "huge string",
      bytes: utf8(JSON.stringify({ request: "y".repeat(n), name: "n", feedback: "f", response: "r", source: "s" })),
    })),
    fc.constantFrom(...NASTY_STRINGS).map((s) => ({
      kind: "nul and traversal",
      bytes: utf8(JSON.stringify({ name: s, path: s, request: s, feedback: s, response: s, userId: s, role: s, source: s })),
    })),
    fc.string({ maxLength: 50 }).map((s) => ({ kind: "wrong content type", bytes: utf8(`--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n${s}\r\n--x--`), contentType: "multipart/form-data; boundary=x" })),
  ];
  if (sample) arbitraries.push(mutated(sample), sameTypes(sample), sameTypes(sample));
  return fc.oneof(...arbitraries);
}

/** Percent-encode every byte (lone surrogates included, as U+FFFD); "%ff%fe" adds invalid UTF-8 on purpose. */
const pct = (s: string) => [...Buffer.from(s, "utf8")].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");

const query = fc
  .tuple(
    fc.oneof(fc.constantFrom(...NASTY_STRINGS), fc.string({ maxLength: 30 })),
    fc.constantFrom("status", "projectId", "cursor", "limit", "q", "after", "ids", "__proto__"),
    fc.boolean(),
  )
  .map(([value, name, invalid]) => `${name}=${pct(value)}${invalid ? "%ff%fe%00" : ""}&${name}[]=${pct(value)}`);

/** 1 in 4: a hostile value for the route's dynamic parameters instead of the fixture's. */
const hostileParam = fc.option(fc.oneof(fc.constantFrom(...NASTY_STRINGS.map((s) => s.slice(0, 200))), fc.string({ maxLength: 30 })), { freq: 3 });

// ---------------------------------------------------------------------------------------------------------------------
// Sending

function resolve(c: RouteCase, hostile: string | null) {
  const params: Record<string, string | string[]> = {};
  const segments = c.pattern.split("/").filter(Boolean);
  const urlPath = segments.map((segment, i) => {
    const catchAll = /^\[\.\.\.(\w+)\]$/.exec(segment);
    if (catchAll) {
      const value = c.method === "GET" ? ["session"] : ["callback", "local"];
      params[catchAll[1]!] = value;
      return value.join("/");
    }
    const match = /^\[(\w+)\]$/.exec(segment);
    if (!match) return segment;
    const value = hostile ?? (match[1] === "key" ? "not-the-executor-key" : paramValue(segments[i - 1] ?? "", match[1]!, world).value);
    params[match[1]!] = value;
    return pct(value);
  });
  return { params, path: `/${urlPath.join("/")}` };
}

function headersFor(c: RouteCase): Record<string, string> {
  if (c.file in PUBLIC_ROUTES) {
    return {
      "x-github-event": "issue_comment",
      "x-github-delivery": "fuzz-delivery",
      "x-hub-signature-256": `sha256=${"0".repeat(64)}`,
      origin: ORIGIN,
    };
  }
  // The owner may do everything, so inputs reach as deep as they can.
  return world.owner.headers;
}

async function send(c: RouteCase, body: Body | null, q: string | null, hostile: string | null) {
  const { params, path } = resolve(c, hostile);
  const qs = [sampleQuery(c.key, world).replace(/^\?/, ""), q].filter(Boolean).join("&");
  const headers: Record<string, string> = { ...headersFor(c) };
  const init: RequestInit = { method: c.method, headers };
  if (body && c.method !== "GET") {
    init.body = body.bytes as BodyInit;
    headers["content-type"] = body.contentType ?? "application/json";
  }
  const response = await c.handler(new Request(`${ORIGIN}${path}${qs ? `?${qs}` : ""}`, init), { params: Promise.resolve(params) });
  const type = response.headers.get("content-type") ?? "";
  let text = "";
  if (type.includes("event-stream")) await response.body?.cancel();
  else text = await response.text();
  return { status: response.status, text };
}

function leaked(text: string): string | null {
  for (const secret of PLANTED) {
    if (text.includes(secret.slice(0, 8))) return secret.slice(0, 8);
  }
  return null;
}

describe("fuzz: every route handler, hostile input", () => {
  beforeAll(() => {
    resetRateLimits();
    loginThrottle().reset();
  });

  it.each(cases.map((c) => [c.key, c] as const))(`%s: ${RUNS} hostile inputs → no 5xx, no partial row, no secret echoed`, async (key, c) => {
    counts[key] = { runs: 0, statuses: {} };
    const input = c.method === "GET"
      ? fc.record({ body: fc.constant(null), q: fc.option(query, { freq: 4 }), hostile: hostileParam })
      : fc.record({ body: bodies(c), q: fc.option(query, { freq: 5 }), hostile: hostileParam });
    await fc.assert(
      fc.asyncProperty(input, async ({ body, q, hostile }) => {
        // The sign-in throttle would answer most of a flood with 429 before Auth.js reads it: let every input through.
        loginThrottle().reset();
        const before = await rowCounts();
        const res = await send(c, body, q, hostile);
        counts[key]!.runs++;
        counts[key]!.statuses[res.status] = (counts[key]!.statuses[res.status] ?? 0) + 1;
        expect(res.status, `${key} (${body?.kind ?? "query"}): ${res.text.slice(0, 300)}`).toBeLessThan(500);
        expect(leaked(res.text), `${key} echoed a secret: ${res.text.slice(0, 300)}`).toBeNull();
        if (res.status >= 400) expect(await rowCounts(), `${key} (${body?.kind ?? "query"}) refused with ${res.status} but wrote a row`).toBe(before);
      }),
      { numRuns: RUNS, seed: 1313, endOnFailure: true },
    );
    expect(counts[key]!.runs).toBeGreaterThanOrEqual(RUNS);
  }, 120_000);
});
