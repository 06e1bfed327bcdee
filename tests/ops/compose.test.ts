import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { DCLinter } from "dclint";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { parseEnv } from "@/lib/env";
import { runDoctor } from "@/lib/ops/doctor";

/*
 * Docker cannot run on the development machines, so compose.yaml and the Dockerfile are checked here as far as that
 * goes: the compose file against the compose-spec JSON schema and dclint's rules (a maintained linter that bundles the
 * schema and parses with `yaml`), its shape (replicas behind one proxy, health checks everywhere, Inngest started with its
 * own Postgres and Redis, sqld), and the app's environment as compose gives it, through lib/env.ts and the doctor.
 */

const composeFile = path.join(process.cwd(), "compose.yaml");
const text = fs.readFileSync(composeFile, "utf8");

/** dclint with every rule at its default, except the tag rule: the Inngest and sqld images are referenced by moving tags (README says to pin them). */
function lint(file: string) {
  const linter = new DCLinter({ rules: { "service-image-require-explicit-tag": 0 }, quiet: true, debug: false, exclude: [] });
  const [result] = linter.lintFiles([file], false);
  return result!.messages.filter((m) => m.type === "error").map((m) => `${m.rule}: ${m.message}`);
}

/** Compose's interpolation for the forms compose.yaml uses: ${NAME}, ${NAME:-default}, ${NAME:?error}. */
function interpolate(value: string, vars: Record<string, string>): string {
  return value.replace(/\$\{([A-Z0-9_]+)(?::([-?])([^}]*))?\}/g, (_m, name: string, op?: string, arg?: string) => {
    const v = vars[name];
    if (v !== undefined && v !== "") return v;
    if (op === "?") throw new Error(`${name}: ${arg}`);
    return op === "-" ? (arg ?? "") : "";
  });
}

type Service = {
  build?: unknown;
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  deploy?: { replicas?: number };
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  ports?: string[];
};
const compose = parse(text, { merge: true }) as { services: Record<string, Service>; configs: Record<string, { content: string }> };

describe("compose.yaml", () => {
  it("validates against the compose-spec schema and dclint's error rules", () => {
    expect(lint(composeFile)).toEqual([]);
  });

  it("the validator catches a broken file (so the check above means something)", () => {
    const broken = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gh-compose-")), "compose.yaml");
    fs.writeFileSync(broken, text.replace("replicas: 2", "replicas: two").replace("    stop_grace_period: 60s", "    stop_grace_perod: 60s"));
    const errors = lint(broken);
    expect(errors.some((e) => e.startsWith("invalid-schema:"))).toBe(true);
  });

  it("runs several app replicas behind one proxy, Inngest with Postgres and Redis, and sqld, each with a health check", () => {
    const s = compose.services;
    expect(Object.keys(s).sort()).toEqual(["app", "inngest", "postgres", "proxy", "redis", "sqld"]);
    expect(s.app!.deploy?.replicas).toBeGreaterThanOrEqual(2);
    expect(s.app!.build).toBe(".");
    for (const [name, service] of Object.entries(s)) expect(service.healthcheck?.test.length, `${name} has a health check`).toBeGreaterThan(0);
    expect(s.inngest!.image).toMatch(/^inngest\/inngest:/);
    expect(s.inngest!.command?.slice(0, 2)).toEqual(["inngest", "start"]);
    expect(s.inngest!.environment).toMatchObject({ INNGEST_POSTGRES_URI: expect.stringContaining("@postgres:5432/"), INNGEST_REDIS_URI: "redis://redis:6379" });
    expect(s.inngest!.depends_on).toEqual({ postgres: { condition: "service_healthy" }, redis: { condition: "service_healthy" } });
    expect(s.sqld!.image).toMatch(/libsql-server/);
    expect(s.app!.depends_on).toEqual({ sqld: { condition: "service_healthy" }, inngest: { condition: "service_healthy" } });
    // The one URL: the proxy balances over every app container and publishes the only app port.
    expect(compose.configs.caddyfile!.content).toMatch(/dynamic a app 3000/);
    expect(s.proxy!.ports).toEqual(["127.0.0.1:8080:8080"]);
    expect(s.app!.ports).toBeUndefined();
  });

  it("gives the app an environment lib/env.ts accepts and the doctor finds nothing failing in", async () => {
    const vars = { AUTH_SECRET: "a".repeat(44), INNGEST_EVENT_KEY: "0123456789abcdef", INNGEST_SIGNING_KEY: "abcdef0123456789".repeat(4) };
    const raw = compose.services.app!.environment!;
    expect(() => Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, interpolate(String(v), {})]))).toThrow(/AUTH_SECRET: set AUTH_SECRET/);
    const appEnv = Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, interpolate(String(v), vars)]));
    const env = parseEnv({ ...appEnv, GATEHOUSE_DATA_DIR: "/data", HOST: "0.0.0.0" });
    expect(env).toMatchObject({ NODE_ENV: "production", executionMode: "inngest", databaseUrl: "http://sqld:8080", GATEHOUSE_TRUST_PROXY: true });
    const results = await runDoctor({ env, live: false });
    expect(results.filter((r) => r.status === "fail")).toEqual([]);
  });
});

describe("Dockerfile", () => {
  const dockerfile = fs.readFileSync(path.join(process.cwd(), "Dockerfile"), "utf8");
  const stages = dockerfile.split(/^FROM /m).slice(1);

  it("builds in stages and runs the standalone server as a non-root user", () => {
    expect(stages.map((s) => s.split("\n")[0])).toEqual(["${NODE_IMAGE} AS deps", "${NODE_IMAGE} AS build", "${NODE_IMAGE} AS runtime"]);
    const runtime = stages[2]!;
    expect(runtime).toMatch(/^USER gatehouse$/m);
    expect(runtime).toMatch(/useradd --system --uid 10001/);
    expect(runtime).toContain("COPY --from=build --chown=gatehouse:gatehouse /app/.next/standalone ./");
    expect(runtime).toMatch(/^CMD \["node", "server.js"\]$/m);
    expect(stages[1]).toMatch(/GATEHOUSE_STANDALONE=1/);
  });

  it(".dockerignore keeps secrets, data and local builds out of the context", () => {
    const ignored = fs.readFileSync(path.join(process.cwd(), ".dockerignore"), "utf8").split("\n");
    for (const entry of [".env", "data", "node_modules", ".next", "*.db", "backups"]) expect(ignored).toContain(entry);
  });
});
