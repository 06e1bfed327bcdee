import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { createClient } from "@libsql/client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { parseEnv, type Env } from "@/lib/env";
import { openDatabase, migrationsFolder } from "@/lib/db";
import {
  checkAuthSecret,
  checkDatabase,
  checkE2B,
  checkExecutorKey,
  checkGitHubApp,
  checkHosting,
  checkInngest,
  checkModels,
  checkProxy,
  checkPublicUrl,
  formatResults,
  runDoctor,
} from "@/lib/ops/doctor";
import type { E2BClient, E2BRemote } from "@/lib/sandbox/e2b";
import { generateAppKey, startGitHubEmulator } from "../github/emulator";
import { startModelServer, type ModelServer } from "../workflow/model-server";

/*
 * Every doctor check against a local stand-in: a libSQL file (migrated, half migrated, from the future, not a database),
 * a local HTTP server playing an Inngest serve endpoint, the GitHub API emulator, an OpenAI-compatible server and a fake
 * E2B client. Each bad value must produce a message that names what is wrong and a fix.
 */

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gh-doctor-"));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function envWith(vars: Record<string, string>): Env {
  return parseEnv({ NODE_ENV: "test", GATEHOUSE_DATA_DIR: path.join(tmp, "data"), ...vars });
}

describe("public URL, auth secret, executor key, proxy", () => {
  it("accepts an https origin and refuses one with a path", () => {
    expect(checkPublicUrl({ env: envWith({ NODE_ENV: "production", GATEHOUSE_PUBLIC_URL: "https://gh.example.com" }) }).status).toBe("ok");
    const bad = checkPublicUrl({ env: envWith({ GATEHOUSE_PUBLIC_URL: "https://gh.example.com/app" }) });
    expect(bad.status).toBe("fail");
    expect(bad.fix).toContain("https://gh.example.com");
  });

  it("warns in production about a missing or plain-http public URL", () => {
    const missing = checkPublicUrl({ env: envWith({ NODE_ENV: "production" }) });
    expect(missing.status).toBe("warn");
    expect(missing.fix).toMatch(/Set GATEHOUSE_PUBLIC_URL/);
    const plain = checkPublicUrl({ env: envWith({ NODE_ENV: "production", GATEHOUSE_PUBLIC_URL: "http://gh.example.com" }) });
    expect(plain.status).toBe("warn");
    expect(plain.fix).toMatch(/https/);
  });

  it("fails without AUTH_SECRET and executor key when production uses a remote database", () => {
    // parseEnv refuses this combination at start; the doctor still explains it for an env built around that check.
    const env = { ...envWith({ NODE_ENV: "production" }), databaseUrl: "libsql://db-org.turso.io", AUTH_SECRET: undefined, GATEHOUSE_EXECUTOR_KEY: undefined };
    const auth = checkAuthSecret({ env });
    expect(auth.status).toBe("fail");
    expect(auth.fix).toMatch(/openssl rand/);
    const key = checkExecutorKey({ env });
    expect(key.status).toBe("fail");
    expect(key.fix).toMatch(/GATEHOUSE_EXECUTOR_KEY/);
    expect(checkAuthSecret({ env: envWith({ NODE_ENV: "production" }) }).status).toBe("warn");
    expect(checkAuthSecret({ env: envWith({ AUTH_SECRET: "x".repeat(32) }) }).status).toBe("ok");
    expect(checkExecutorKey({ env: { ...env, GATEHOUSE_EXECUTOR_KEY: "k".repeat(32) } }).status).toBe("ok");
  });

  it("the environment itself refuses production on a remote database without the secrets, saying how to fix it", () => {
    expect(() => parseEnv({ NODE_ENV: "production", DATABASE_URL: "libsql://db-org.turso.io", DATABASE_AUTH_TOKEN: "t" })).toThrow(
      /AUTH_SECRET is required in production with a remote DATABASE_URL[\s\S]*GATEHOUSE_EXECUTOR_KEY is required/,
    );
    const env = parseEnv({ NODE_ENV: "production", DATABASE_URL: "libsql://db-org.turso.io", AUTH_SECRET: "s".repeat(32), GATEHOUSE_EXECUTOR_KEY: "k".repeat(32) });
    expect(env.GATEHOUSE_EXECUTOR_KEY).toBe("k".repeat(32));
  });

  it("warns when forwarded headers are trusted on every interface, or an https URL has no trusted proxy", () => {
    const open = checkProxy({ env: envWith({ GATEHOUSE_TRUST_PROXY: "true", HOST: "0.0.0.0" }) });
    expect(open.status).toBe("warn");
    expect(open.fix).toMatch(/firewall|HOST=127\.0\.0\.1/);
    const https = checkProxy({ env: envWith({ NODE_ENV: "production", GATEHOUSE_PUBLIC_URL: "https://gh.example.com" }) });
    expect(https.status).toBe("warn");
    expect(https.fix).toMatch(/GATEHOUSE_TRUST_PROXY=true/);
    expect(checkProxy({ env: envWith({ NODE_ENV: "production", GATEHOUSE_PUBLIC_URL: "https://gh.example.com", GATEHOUSE_TRUST_PROXY: "1" }) }).status).toBe("ok");
  });
});

describe("hosting", () => {
  it("on Vercel: the embedded executor, a database file and a data directory outside /tmp each fail with the fix", () => {
    const embedded = checkHosting({ env: envWith({ VERCEL: "1" }) });
    expect(embedded.status).toBe("fail");
    expect(embedded.fix).toMatch(/Inngest Cloud/);
    const inngest = { VERCEL: "1", INNGEST_EVENT_KEY: "e", INNGEST_SIGNING_KEY: "signkey-prod-00" };
    const file = checkHosting({ env: envWith(inngest) });
    expect(file.status).toBe("fail");
    expect(file.fix).toMatch(/Turso/);
    const remote = { ...inngest, DATABASE_URL: "libsql://db-org.turso.io", DATABASE_AUTH_TOKEN: "t" };
    const disk = checkHosting({ env: envWith({ ...remote, GATEHOUSE_DATA_DIR: "/var/lib/gatehouse" }) });
    expect(disk.status).toBe("fail");
    expect(disk.fix).toContain("GATEHOUSE_DATA_DIR=/tmp/gatehouse");
    const local = checkHosting({ env: envWith({ ...remote, GATEHOUSE_DATA_DIR: "/tmp/gatehouse" }) });
    expect(local.status).toBe("warn");
    expect(local.fix).toMatch(/E2B_API_KEY/);
    expect(checkHosting({ env: envWith({ ...remote, GATEHOUSE_DATA_DIR: "/tmp/gatehouse", E2B_API_KEY: "e2b_key" }) }).status).toBe("ok");
    expect(checkHosting({ env: envWith({}) }).status).toBe("ok");
  });
});

describe("database", () => {
  const fileEnv = (file: string) => envWith({ DATABASE_URL: `file:${file}` });

  it("a fully migrated file is ok", async () => {
    const file = path.join(tmp, "migrated.db");
    const handle = openDatabase({ url: `file:${file}` });
    await handle.ready;
    handle.client.close();
    const result = await checkDatabase({ env: fileEnv(file), live: true });
    expect(result.status, result.message).toBe("ok");
    expect(result.message).toMatch(/all \d+ migrations applied/);
  });

  it("a file without migrations, or missing the newest, lists the pending ones and says to migrate", async () => {
    const file = path.join(tmp, "empty.db");
    const client = createClient({ url: `file:${file}` });
    await client.execute("CREATE TABLE t (x)");
    client.close();
    const result = await checkDatabase({ env: fileEnv(file), live: true });
    expect(result.status).toBe("warn");
    expect(result.message).toContain("0000_init");
    expect(result.fix).toContain("npm run db:migrate");

    // Half migrated: an older checkout's journal (all but the last migration), then the current one.
    const older = path.join(tmp, "drizzle-older");
    fs.cpSync(migrationsFolder(), older, { recursive: true });
    const journalFile = path.join(older, "meta", "_journal.json");
    const journal = JSON.parse(fs.readFileSync(journalFile, "utf8")) as { entries: Array<{ tag: string }> };
    const last = journal.entries.pop()!;
    fs.writeFileSync(journalFile, JSON.stringify(journal));
    const half = path.join(tmp, "half.db");
    const { drizzle } = await import("drizzle-orm/libsql");
    const { migrate } = await import("drizzle-orm/libsql/migrator");
    const halfClient = createClient({ url: `file:${half}` });
    await migrate(drizzle(halfClient), { migrationsFolder: older });
    halfClient.close();
    const pending = await checkDatabase({ env: fileEnv(half), live: true });
    expect(pending.status).toBe("warn");
    expect(pending.message).toContain(`1 migration(s) not applied yet: ${last.tag}`);
  });

  it("a database migrated by a newer version fails and says to deploy that version", async () => {
    const file = path.join(tmp, "future.db");
    const handle = openDatabase({ url: `file:${file}` });
    await handle.ready;
    await handle.client.execute("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('future', 99999999999999)");
    handle.client.close();
    const result = await checkDatabase({ env: fileEnv(file), live: true });
    expect(result.status).toBe("fail");
    expect(result.message).toMatch(/newer version/);
    expect(result.fix).toMatch(/Deploy the newer version/);
  });

  it("a file that is not a database fails with what to check", async () => {
    const file = path.join(tmp, "garbage.db");
    fs.writeFileSync(file, "this is not sqlite ".repeat(400));
    const result = await checkDatabase({ env: fileEnv(file), live: true });
    expect(result.status).toBe("fail");
    expect(result.fix).toMatch(/SQLite database/);
  });

  it("a Turso URL without a token fails before connecting; an unreachable server fails with what to check", async () => {
    const turso = await checkDatabase({ env: envWith({ DATABASE_URL: "libsql://gatehouse-acme.turso.io" }), live: true });
    expect(turso.status).toBe("fail");
    expect(turso.fix).toMatch(/DATABASE_AUTH_TOKEN/);
    const closed = await closedPort();
    const down = await checkDatabase({ env: envWith({ DATABASE_URL: `http://127.0.0.1:${closed}` }), live: true });
    expect(down.status).toBe("fail");
    expect(down.fix).toMatch(/DATABASE_URL/);
  });
});

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

describe("inngest", () => {
  const keys = { INNGEST_EVENT_KEY: "evt-key-0123456789", INNGEST_SIGNING_KEY: "signkey-prod-0123456789abcdef" };
  let server: http.Server;
  let publicUrl: string;
  const serve = { get: { mode: "cloud", has_event_key: true, has_signing_key: true, function_count: 3 } as Record<string, unknown>, putStatus: 200, putBody: { message: "Successfully registered", modified: true } as Record<string, unknown>, seen: [] as string[] };

  beforeAll(async () => {
    // Plays the SDK's serve endpoint: GET introspection, PUT = sync with Inngest.
    server = http.createServer((req, res) => {
      serve.seen.push(`${req.method} ${req.url}`);
      if (req.url !== "/api/inngest") return res.writeHead(404).end();
      res.writeHead(req.method === "PUT" ? serve.putStatus : 200, { "content-type": "application/json" });
      res.end(JSON.stringify(req.method === "PUT" ? serve.putBody : serve.get));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    publicUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  it("embedded mode needs nothing; without the embedded worker it says to run npm run worker", async () => {
    expect((await checkInngest({ env: envWith({}), live: true, inngestSync: true })).status).toBe("ok");
    const noWorker = await checkInngest({ env: envWith({ GATEHOUSE_EMBEDDED_WORKER: "false" }), live: true });
    expect(noWorker.status).toBe("warn");
    expect(noWorker.fix).toContain("npm run worker");
  });

  it("Inngest mode without a signing key, or with a malformed one, fails naming the variable", async () => {
    const missing = await checkInngest({ env: envWith({ INNGEST_EVENT_KEY: "evt" }), live: false });
    expect(missing.status).toBe("fail");
    expect(missing.message).toContain("INNGEST_SIGNING_KEY");
    expect(missing.fix).toMatch(/Signing key/);
    const malformed = await checkInngest({ env: envWith({ ...keys, INNGEST_SIGNING_KEY: "not a key!" }), live: false });
    expect(malformed.status).toBe("fail");
    expect(malformed.message).toMatch(/does not look like a signing key/);
  });

  it("reaches the serve endpoint, checks its keys and syncs it", async () => {
    serve.seen.length = 0;
    const result = await checkInngest({ env: envWith({ ...keys, GATEHOUSE_PUBLIC_URL: publicUrl }), live: true, inngestSync: true });
    expect(result.status, result.message).toBe("ok");
    expect(result.message).toMatch(/3 function\(s\); synced/);
    expect(serve.seen).toEqual(["GET /api/inngest", "PUT /api/inngest"]);
  });

  it("a deployed app without its signing key, a failed sync and an unreachable app each fail with a fix", async () => {
    serve.get = { ...serve.get, has_signing_key: false };
    const lacking = await checkInngest({ env: envWith({ ...keys, GATEHOUSE_PUBLIC_URL: publicUrl }), live: true, inngestSync: true });
    expect(lacking.status).toBe("fail");
    expect(lacking.message).toContain("lacks INNGEST_SIGNING_KEY");
    expect(lacking.fix).toMatch(/redeploy/);
    serve.get = { ...serve.get, has_signing_key: true };

    serve.putStatus = 401;
    serve.putBody = { message: "Failed to register; unauthorized" };
    const unsynced = await checkInngest({ env: envWith({ ...keys, GATEHOUSE_PUBLIC_URL: publicUrl }), live: true, inngestSync: true });
    expect(unsynced.status).toBe("fail");
    expect(unsynced.message).toContain("unauthorized");
    expect(unsynced.fix).toMatch(/INNGEST_SIGNING_KEY/);

    const down = await checkInngest({ env: envWith({ ...keys, GATEHOUSE_PUBLIC_URL: `http://127.0.0.1:${await closedPort()}` }), live: true, inngestSync: true });
    expect(down.status).toBe("fail");
    expect(down.fix).toMatch(/GATEHOUSE_PUBLIC_URL/);
  });
});

describe("e2b", () => {
  const fakeClient = (behaviour: "ok" | "unauthorized"): E2BClient & { killed: number } => {
    const client = {
      killed: 0,
      async create() {
        if (behaviour === "unauthorized") throw new Error("401: Invalid API key");
        return {
          sandboxId: "sbx-1",
          files: { write: async () => ({}), read: async () => "" },
          commands: { run: (async () => ({ exitCode: 0, stdout: "", stderr: "" })) as unknown as E2BRemote["commands"]["run"], sendStdin: async () => {} },
          kill: async () => {
            client.killed++;
          },
        };
      },
    };
    return client;
  };

  it("skips without a key, fails when e2b is demanded without one", async () => {
    expect((await checkE2B({ env: envWith({}) })).status).toBe("skip");
    const demanded = await checkE2B({ env: envWith({ GATEHOUSE_SANDBOX: "e2b" }) });
    expect(demanded.status).toBe("fail");
    expect(demanded.fix).toMatch(/E2B_API_KEY/);
  });

  it("starts and stops one sandbox only when asked, and explains a refused key", async () => {
    const env = envWith({ E2B_API_KEY: "e2b_0123456789abcdef" });
    const good = fakeClient("ok");
    expect((await checkE2B({ env, e2bClient: good })).message).toMatch(/pass --e2b/);
    expect(good.killed).toBe(0);
    const started = await checkE2B({ env, e2bStart: true, e2bClient: good });
    expect(started.status).toBe("ok");
    expect(good.killed).toBe(1);
    const refused = await checkE2B({ env, e2bStart: true, e2bClient: fakeClient("unauthorized") });
    expect(refused.status).toBe("fail");
    expect(refused.fix).toMatch(/E2B refused the key/);
  });
});

describe("github app", () => {
  let emulator: Awaited<ReturnType<typeof startGitHubEmulator>>;
  const { privateKey, publicKey } = generateAppKey();
  beforeAll(async () => {
    emulator = await startGitHubEmulator({ appId: "4242", publicKey });
  });
  afterAll(() => emulator.close());

  const gh = (vars: Record<string, string> = {}) =>
    envWith({ GITHUB_APP_ID: "4242", GITHUB_APP_PRIVATE_KEY: privateKey, GITHUB_APP_WEBHOOK_SECRET: "whsec-0123456789", GITHUB_API_URL: emulator.url, ...vars });

  it("lists the App's installations through the API", async () => {
    const none = await checkGitHubApp({ env: gh(), live: true });
    expect(none.status).toBe("warn");
    expect(none.fix).toMatch(/Install the App/);
    emulator.addRepository({ owner: "acme", name: "widgets" });
    const result = await checkGitHubApp({ env: gh(), live: true });
    expect(result.status, result.message).toBe("ok");
    expect(result.message).toContain("installed on acme");
    expect(emulator.requests).toContain("GET /app/installations");
  });

  it("a key of another App is refused by GitHub and the fix says the id and key must match", async () => {
    const other = generateAppKey().privateKey;
    const result = await checkGitHubApp({ env: gh({ GITHUB_APP_PRIVATE_KEY: other }), live: true });
    expect(result.status).toBe("fail");
    expect(result.message).toContain("401");
    expect(result.fix).toMatch(/must belong to the same App/);
  });

  it("bad values: a key that does not parse, a non-numeric id, a missing key, a missing webhook secret", async () => {
    const garbled = await checkGitHubApp({ env: gh({ GITHUB_APP_PRIVATE_KEY: "-----BEGIN RSA PRIVATE KEY-----\nnope\n-----END RSA PRIVATE KEY-----" }), live: false });
    expect(garbled.status).toBe("fail");
    expect(garbled.fix).toMatch(/Paste the whole \.pem/);
    const slug = await checkGitHubApp({ env: gh({ GITHUB_APP_ID: "Iv1.abcdef" }), live: false });
    expect(slug.status).toBe("fail");
    expect(slug.fix).toMatch(/App ID/);
    const noKey = await checkGitHubApp({ env: envWith({ GITHUB_APP_ID: "4242" }), live: false });
    expect(noKey.status).toBe("fail");
    expect(noKey.message).toContain("GITHUB_APP_PRIVATE_KEY is missing");
    const onlySecret = await checkGitHubApp({ env: envWith({ GITHUB_APP_WEBHOOK_SECRET: "whsec-0123456789" }), live: false });
    expect(onlySecret.status).toBe("warn");
    expect(onlySecret.fix).toMatch(/GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY/);
    const noSecret = await checkGitHubApp({ env: gh({ GITHUB_APP_WEBHOOK_SECRET: "" }), live: false });
    expect(noSecret.status).toBe("warn");
    expect(noSecret.fix).toContain("GITHUB_APP_WEBHOOK_SECRET");
    // A key pasted on one line with literal \n is what lib/github/app.ts accepts too.
    expect((await checkGitHubApp({ env: gh({ GITHUB_APP_PRIVATE_KEY: privateKey.replace(/\n/g, "\\n") }), live: false })).status).toBe("ok");
  });
});

describe("models", () => {
  let model: ModelServer;
  beforeAll(async () => {
    model = await startModelServer();
  });
  afterAll(() => model.close());

  const compat = () => envWith({ OPENAI_COMPATIBLE_BASE_URL: model.baseURL, OPENAI_COMPATIBLE_API_KEY: "k" });

  it("warns when only the demo model is available", async () => {
    const [result] = await checkModels({ env: envWith({}) });
    expect(result!.status).toBe("warn");
    expect(result!.fix).toMatch(/OPENAI_API_KEY/);
  });

  it("makes no call without --live-models, one call per provider with it", async () => {
    model.respond(() => ({ text: "ok" }));
    const before = model.requests;
    const [quiet] = await checkModels({ env: compat(), liveModels: false });
    expect(quiet!.status).toBe("ok");
    expect(model.requests).toBe(before);
    const results = await checkModels({ env: compat(), liveModels: true, models: ["openai-compatible:tiny"] });
    expect(results.map((r) => r.status)).toEqual(["ok"]);
    expect(model.requests).toBe(before + 1);
  });

  it("a provider refusing the key fails naming the variable", async () => {
    model.respond(() => ({ status: 401 }));
    const [result] = await checkModels({ env: compat(), liveModels: true, models: ["openai-compatible:tiny"] });
    expect(result!.status).toBe("fail");
    expect(result!.fix).toContain("OPENAI_COMPATIBLE_BASE_URL");
  });
});

describe("runDoctor", () => {
  it("runs every check and formats each with its fix", async () => {
    const file = path.join(tmp, "all.db");
    const results = await runDoctor({ env: envWith({ DATABASE_URL: `file:${file}`, GITHUB_APP_ID: "4242" }), live: true });
    expect(results.map((r) => r.name)).toEqual(["public URL", "session signing", "executor key", "proxy and cookies", "hosting", "database", "inngest", "e2b sandbox", "github app", "models"]);
    const text = formatResults(results);
    expect(text).toMatch(/FAIL {2}github app: .*GITHUB_APP_PRIVATE_KEY is missing\n {8}fix: /);
  });
});

describe("at start", () => {
  it("logs failures as errors with their fix and a summary, without throwing", async () => {
    const { logDoctorAtStart } = await import("@/lib/ops/doctor");
    const lines: Array<{ level: string; msg: string; fields?: Record<string, unknown> }> = [];
    const logger = {
      info: (msg: string, fields?: Record<string, unknown>) => lines.push({ level: "info", msg, fields }),
      warn: (msg: string, fields?: Record<string, unknown>) => lines.push({ level: "warn", msg, fields }),
      error: (msg: string, fields?: Record<string, unknown>) => lines.push({ level: "error", msg, fields }),
    };
    await logDoctorAtStart({ env: envWith({ DATABASE_URL: `file:${path.join(tmp, "start.db")}`, GITHUB_APP_ID: "4242" }), logger });
    const error = lines.find((l) => l.level === "error");
    expect(error?.msg).toMatch(/^doctor: github app: .*GITHUB_APP_PRIVATE_KEY is missing/);
    expect(String(error?.fields?.fix)).toMatch(/private key/);
    expect(lines.at(-1)).toMatchObject({ level: "info", msg: expect.stringMatching(/^doctor: 1 failed/) });
  });
});

describe("through the real log", () => {
  it("the findings survive the log's redaction: the variable to set is still named", async () => {
    const { logDoctorAtStart } = await import("@/lib/ops/doctor");
    const { log } = await import("@/lib/log");
    const seen: string[] = [];
    const spy = vi.spyOn(console, "warn").mockImplementation((line: unknown) => void seen.push(String(line)));
    try {
      await logDoctorAtStart({ env: envWith({ NODE_ENV: "production", DATABASE_URL: `file:${path.join(tmp, "redact.db")}` }), logger: log });
    } finally {
      spy.mockRestore();
    }
    const line = seen.map((l) => JSON.parse(l) as { msg: string; fix?: string }).find((l) => l.msg.startsWith("doctor: session signing"));
    expect(line?.msg).toContain("AUTH_SECRET is not set");
    expect(line?.fix).toContain("Set AUTH_SECRET");
  });
});
