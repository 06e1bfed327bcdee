import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { App } from "@octokit/app";
import { Octokit } from "@octokit/core";
import { createClient } from "@libsql/client";
import { generateText } from "ai";
import type { Env } from "@/lib/env";
import { PROVIDERS, getLanguageModel, parseModelId, type ProviderId } from "@/lib/ai/providers";
import { defaultRouting } from "@/lib/ai/routing";
import { defaultE2BClient, type E2BClient } from "@/lib/sandbox/e2b";

/*
 * `npm run doctor`: one check per backend, each saying ok / warn / fail, what is wrong and how to fix it. Configuration
 * checks are pure; live checks (a connection, a request) run only where a backend is configured, and the ones that cost
 * money (an E2B sandbox, model calls) only when asked for. The same checks run at start in production (instrumentation.ts)
 * and land in the log. A check never throws: an unexpected error is a `fail` naming it.
 */

export type CheckStatus = "ok" | "warn" | "fail" | "skip";
export type CheckResult = { name: string; status: CheckStatus; message: string; fix?: string };

export type DoctorOptions = {
  env: Env;
  /** Connect to what is configured (database, GitHub, Inngest). Off: configuration only. */
  live: boolean;
  /** Start and stop one E2B sandbox (it costs a few seconds of sandbox time). */
  e2bStart?: boolean;
  /** One small completion per configured model provider (it costs tokens). */
  liveModels?: boolean;
  /** Model ids to probe with liveModels; default: the non-demo models of the default routing. */
  models?: string[];
  /** Reach the app's own serve endpoint (GET, then PUT to sync with Inngest). Off at start: the server is not listening yet. */
  inngestSync?: boolean;
  /** Seams for tests. */
  fetch?: typeof fetch;
  e2bClient?: E2BClient;
  /** The drizzle/ folder whose journal the database is compared with. */
  migrationsFolder?: string;
  timeoutMs?: number;
};

const ok = (name: string, message: string): CheckResult => ({ name, status: "ok", message });
const warn = (name: string, message: string, fix: string): CheckResult => ({ name, status: "warn", message, fix });
const fail = (name: string, message: string, fix: string): CheckResult => ({ name, status: "fail", message, fix });
const skip = (name: string, message: string): CheckResult => ({ name, status: "skip", message });

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));
const isLoopback = (host: string) => /^(localhost|127\.\d+\.\d+\.\d+|\[::1\]|::1)$/.test(host);

// ---------------------------------------------------------------------------------------------------------------------
// Public URL, auth secret, proxy

export function checkPublicUrl({ env }: { env: Env }): CheckResult {
  const name = "public URL";
  const production = env.NODE_ENV === "production";
  if (!env.GATEHOUSE_PUBLIC_URL) {
    const message = `GATEHOUSE_PUBLIC_URL is not set; links (sign-in, pull requests) and the Inngest serve URL use ${env.publicUrl}`;
    return production
      ? warn(name, message, "Set GATEHOUSE_PUBLIC_URL to the origin people open, e.g. https://gatehouse.example.com")
      : ok(name, message);
  }
  const url = new URL(env.GATEHOUSE_PUBLIC_URL);
  if (url.pathname !== "/" || url.search || url.hash) {
    return fail(name, `GATEHOUSE_PUBLIC_URL has a path or query (${env.GATEHOUSE_PUBLIC_URL}); Gatehouse serves from the root of its origin`, `Set GATEHOUSE_PUBLIC_URL to the origin only: ${url.origin}`);
  }
  if (production && url.protocol === "http:" && !isLoopback(url.hostname)) {
    return warn(name, `GATEHOUSE_PUBLIC_URL is plain http on a non-local host (${url.origin}): session cookies and tokens cross the network unencrypted`, "Put the app behind TLS and set GATEHOUSE_PUBLIC_URL to its https:// origin");
  }
  return ok(name, `links point to ${url.origin}`);
}

export function checkAuthSecret({ env }: { env: Env }): CheckResult {
  const name = "session signing";
  if (env.AUTH_SECRET) return ok(name, "AUTH_SECRET is set");
  const fix = "Set AUTH_SECRET to a random string of at least 32 characters (`openssl rand -base64 32`), the same on every app instance";
  if (requiresEnvSecrets(env)) {
    return fail(name, "AUTH_SECRET is not set and the database is remote: there is no shared data directory to keep a generated secret in, so every instance would sign sessions differently", fix);
  }
  if (env.NODE_ENV === "production") {
    return warn(name, `AUTH_SECRET is not set: sessions are signed with a secret generated into ${env.dataDir}/auth-secret (one machine only)`, fix);
  }
  return ok(name, `AUTH_SECRET is not set; a generated secret in ${env.dataDir} is used (fine on one machine)`);
}

/** Production with a remote database (Turso, sqld): no data directory is shared between instances. */
export function requiresEnvSecrets(env: Env): boolean {
  return env.NODE_ENV === "production" && !env.databaseUrl.startsWith("file:");
}

export function checkProxy({ env }: { env: Env }): CheckResult {
  const name = "proxy and cookies";
  const publicHttps = env.publicUrl.startsWith("https:");
  const listensEverywhere = env.HOST === "0.0.0.0" || env.HOST === "::";
  if (env.GATEHOUSE_TRUST_PROXY && listensEverywhere) {
    return warn(
      name,
      `GATEHOUSE_TRUST_PROXY is on and the app listens on ${env.HOST}: a client reaching the app directly can forge X-Forwarded-Host / X-Forwarded-For`,
      "Let only the proxy reach the app's port (firewall, private network), or set HOST=127.0.0.1 when the proxy runs on the same machine",
    );
  }
  if (publicHttps && !env.GATEHOUSE_TRUST_PROXY && env.NODE_ENV === "production") {
    return warn(
      name,
      "GATEHOUSE_PUBLIC_URL is https but GATEHOUSE_TRUST_PROXY is off: behind a TLS-terminating proxy that rewrites Host, same-origin checks and sign-in redirects see the proxy's internal host",
      "If a proxy sets X-Forwarded-Host / X-Forwarded-Proto, set GATEHOUSE_TRUST_PROXY=true; if it passes the Host header through unchanged, nothing to do",
    );
  }
  return ok(name, env.GATEHOUSE_TRUST_PROXY ? "X-Forwarded-* headers are trusted (a proxy sets them)" : "X-Forwarded-* headers are ignored (no proxy declared)");
}

export function checkExecutorKey({ env }: { env: Env }): CheckResult {
  const name = "executor key";
  if (env.executionMode !== "embedded") return skip(name, "Inngest signs its requests; no executor key is used");
  if (env.GATEHOUSE_EXECUTOR_KEY) return ok(name, "GATEHOUSE_EXECUTOR_KEY is set");
  if (requiresEnvSecrets(env)) {
    return fail(name, "GATEHOUSE_EXECUTOR_KEY is not set and the database is remote: the generated key lives in the data directory, which instances do not share", "Set GATEHOUSE_EXECUTOR_KEY to a random string of at least 32 characters (`openssl rand -hex 32`), the same on every instance");
  }
  return ok(name, `generated into ${env.dataDir}/executor-key`);
}

/**
 * Vercel runs functions, not a server: no process outlives a request (so no embedded executor), and the disk is
 * read-only except an instance's own /tmp (so no database file, and the data directory holds only scratch work).
 */
export function checkHosting({ env }: { env: Env }): CheckResult {
  const name = "hosting";
  if (!env.VERCEL) return ok(name, "a long-lived server process (embedded executor and local files possible)");
  if (env.executionMode === "embedded") {
    return fail(name, "on Vercel no process outlives a request, so the embedded executor cannot drive runs", "Connect Inngest Cloud (the Vercel integration sets INNGEST_EVENT_KEY and INNGEST_SIGNING_KEY)");
  }
  if (env.databaseUrl.startsWith("file:")) {
    return fail(name, "on Vercel a database file is lost with the instance (and the disk is read-only outside /tmp)", "Create a Turso database and set DATABASE_URL=libsql://… and DATABASE_AUTH_TOKEN");
  }
  if (env.dataDir !== "/tmp" && !env.dataDir.startsWith("/tmp/")) {
    return fail(name, `GATEHOUSE_DATA_DIR is ${env.dataDir}, but on Vercel only /tmp is writable`, "Set GATEHOUSE_DATA_DIR=/tmp/gatehouse (scratch space: worktrees and clones, re-created when missing)");
  }
  if (env.GATEHOUSE_SANDBOX !== "e2b" && !env.E2B_API_KEY) {
    return warn(name, "on Vercel agent commands would run in the function's own container (no bubblewrap, shared with the app)", "Set E2B_API_KEY (and GATEHOUSE_SANDBOX=e2b) so agent commands run in E2B sandboxes");
  }
  return ok(name, "Vercel with Inngest and a remote database");
}

// ---------------------------------------------------------------------------------------------------------------------
// Database

type Journal = { entries: Array<{ idx: number; when: number; tag: string }> };

export async function checkDatabase({ env, live, migrationsFolder = path.join(process.cwd(), "drizzle") }: Pick<DoctorOptions, "env" | "live" | "migrationsFolder">): Promise<CheckResult> {
  const name = "database";
  const url = env.databaseUrl;
  const remote = !url.startsWith("file:");
  const where = remote ? new URL(url).host : url.slice("file:".length);
  if (remote && /\.turso\.io$/.test(new URL(url).hostname) && !env.DATABASE_AUTH_TOKEN) {
    return fail(name, `DATABASE_URL points at Turso (${where}) but DATABASE_AUTH_TOKEN is not set`, "Create a token with `turso db tokens create <db>` and set DATABASE_AUTH_TOKEN");
  }
  if (!live) return ok(name, `${remote ? "server" : "file"} database at ${where} (not connected: configuration only)`);
  let journal: Journal;
  try {
    journal = JSON.parse(fs.readFileSync(path.join(migrationsFolder, "meta", "_journal.json"), "utf8")) as Journal;
  } catch (error) {
    return fail(name, `cannot read the migrations journal in ${migrationsFolder}: ${errorText(error)}`, "Run from the app's directory (the drizzle/ folder ships with the app)");
  }
  if (!remote && !fs.existsSync(path.resolve(where.split("?")[0]!))) {
    return warn(name, `the database file ${where} does not exist yet`, "Nothing to do for a new install: the app creates and migrates it at start (or run `npm run db:migrate`)");
  }
  const client = createClient({ url, authToken: env.DATABASE_AUTH_TOKEN });
  try {
    await client.execute("SELECT 1");
    const table = await client.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = '__drizzle_migrations'");
    const applied = table.rows.length
      ? (await client.execute("SELECT created_at FROM __drizzle_migrations ORDER BY created_at")).rows.map((r) => Number(r.created_at))
      : [];
    const known = journal.entries.map((e) => e.when);
    const latestApplied = applied.at(-1) ?? 0;
    const newer = applied.filter((when) => !known.includes(when));
    if (newer.length > 0) {
      return fail(name, `the database has ${newer.length} migration(s) this version of Gatehouse does not know: it was migrated by a newer version`, "Deploy the newer version of Gatehouse, or restore a backup taken before the upgrade (`npm run restore`)");
    }
    const pending = journal.entries.filter((e) => e.when > latestApplied).map((e) => e.tag);
    if (pending.length > 0) {
      return warn(name, `connected to ${where}; ${pending.length} migration(s) not applied yet: ${pending.join(", ")}`, "Run `npm run db:migrate` (the app also applies them when it starts)");
    }
    return ok(name, `connected to ${where}; all ${journal.entries.length} migrations applied`);
  } catch (error) {
    const text = errorText(error);
    const fix = /401|unauthori[sz]ed|token/i.test(text)
      ? "Check DATABASE_AUTH_TOKEN (a new one: `turso db tokens create <db>`)"
      : remote
        ? "Check DATABASE_URL (libsql://<db>-<org>.turso.io, or http://host:8080 for sqld) and that the server is reachable from here"
        : "Check that the file is a SQLite database and that this user may read and write it and its directory";
    return fail(name, `cannot use ${where}: ${text}`, fix);
  } finally {
    client.close();
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Inngest

export async function checkInngest({ env, live, inngestSync, fetch: fetchImpl = fetch, timeoutMs = 10_000 }: Pick<DoctorOptions, "env" | "live" | "inngestSync" | "fetch" | "timeoutMs">): Promise<CheckResult> {
  const name = "inngest";
  if (env.executionMode === "embedded") {
    if (!env.GATEHOUSE_EMBEDDED_WORKER) {
      return warn(name, "embedded mode with GATEHOUSE_EMBEDDED_WORKER=false: no executor runs in this process", "Run `npm run worker` next to the web server (or remove GATEHOUSE_EMBEDDED_WORKER=false)");
    }
    return ok(name, "no INNGEST_* settings: the embedded executor drives runs (leases let several app processes share one database)");
  }
  const dev = !!env.INNGEST_DEV && env.INNGEST_DEV !== "0" && env.INNGEST_DEV !== "false";
  const missing = (["INNGEST_EVENT_KEY", "INNGEST_SIGNING_KEY"] as const).filter((k) => !env[k]);
  if (!dev && missing.length > 0) {
    return fail(name, `Inngest mode is chosen (INNGEST_* is set) but ${missing.join(" and ")} ${missing.length > 1 ? "are" : "is"} missing`, "Copy the keys from the Inngest dashboard (Manage → Event keys / Signing key), or for a self-hosted `inngest start` the --event-key / --signing-key values; or unset every INNGEST_* variable to use the embedded executor");
  }
  if (env.INNGEST_SIGNING_KEY && !/^signkey-[a-z]+-[0-9a-f]+$/i.test(env.INNGEST_SIGNING_KEY) && !/^[0-9a-f]+$/i.test(env.INNGEST_SIGNING_KEY)) {
    return fail(name, "INNGEST_SIGNING_KEY does not look like a signing key (signkey-<env>-<hex>, or plain hex for `inngest start`)", "Paste the signing key exactly as the Inngest dashboard shows it");
  }
  if (!live || !inngestSync) return ok(name, `keys present (${dev ? "dev server" : "cloud / self-hosted"}); the serve endpoint was not contacted`);
  const serveUrl = `${env.publicUrl}/api/inngest`;
  try {
    const res = await fetchImpl(serveUrl, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) return fail(name, `GET ${serveUrl} answered ${res.status}`, "Check that the app is deployed at GATEHOUSE_PUBLIC_URL and that /api/inngest is not behind a login or firewall (Vercel deployment protection)");
    const body = (await res.json().catch(() => ({}))) as { mode?: string; has_event_key?: boolean; has_signing_key?: boolean; function_count?: number };
    if (body.mode !== undefined && body.mode !== (dev ? "dev" : "cloud")) {
      return fail(name, `the serve endpoint runs in ${body.mode} mode, not ${dev ? "dev" : "cloud"}`, dev ? "Set INNGEST_DEV=1 on the deployed app too" : "Unset INNGEST_DEV on the deployed app");
    }
    if (body.has_signing_key === false || body.has_event_key === false) {
      return fail(name, `the deployed app at ${serveUrl} lacks ${body.has_signing_key === false ? "INNGEST_SIGNING_KEY" : "INNGEST_EVENT_KEY"}`, "Set the key in the deployment's environment (not only here) and redeploy");
    }
    const sync = await fetchImpl(serveUrl, { method: "PUT", signal: AbortSignal.timeout(timeoutMs) });
    const result = (await sync.json().catch(() => ({}))) as { message?: string; modified?: boolean };
    if (!sync.ok) {
      return fail(name, `syncing with Inngest failed (${sync.status}): ${result.message ?? "no message"}`, "Check INNGEST_SIGNING_KEY (it must belong to the Inngest environment INNGEST_ENV names) and that Inngest can reach GATEHOUSE_PUBLIC_URL");
    }
    return ok(name, `reachable at ${serveUrl} with ${body.function_count ?? "?"} function(s); synced with Inngest${result.modified ? " (functions updated)" : ""}`);
  } catch (error) {
    return fail(name, `cannot reach ${serveUrl}: ${errorText(error)}`, "Start or deploy the app first, and check GATEHOUSE_PUBLIC_URL");
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// E2B

export async function checkE2B({ env, e2bStart, e2bClient = defaultE2BClient }: Pick<DoctorOptions, "env" | "e2bStart" | "e2bClient">): Promise<CheckResult> {
  const name = "e2b sandbox";
  if (!env.E2B_API_KEY) {
    if (env.GATEHOUSE_SANDBOX === "e2b") return fail(name, "GATEHOUSE_SANDBOX=e2b but E2B_API_KEY is not set", "Set E2B_API_KEY (e2b.dev dashboard → API keys), or GATEHOUSE_SANDBOX=local");
    return skip(name, "E2B_API_KEY is not set: agent commands run in the local sandbox");
  }
  if (env.GATEHOUSE_SANDBOX === "local") return warn(name, "E2B_API_KEY is set but GATEHOUSE_SANDBOX=local: E2B is not used", "Set GATEHOUSE_SANDBOX=auto or e2b to use E2B, or remove E2B_API_KEY");
  if (!e2bStart) return ok(name, `E2B_API_KEY is set (template ${env.GATEHOUSE_E2B_TEMPLATE ?? "code-interpreter"}); pass --e2b to start and stop one sandbox`);
  try {
    const sandbox = await e2bClient.create({
      apiKey: env.E2B_API_KEY,
      template: env.GATEHOUSE_E2B_TEMPLATE,
      timeoutMs: 60_000,
      allowInternetAccess: false,
      metadata: { purpose: "gatehouse-doctor" },
    });
    try {
      const result = await sandbox.commands.run("true", { timeoutMs: 30_000 });
      if (result.exitCode !== 0) return fail(name, `a sandbox started but \`true\` exited ${result.exitCode}`, "Check the template in GATEHOUSE_E2B_TEMPLATE has a POSIX shell");
    } finally {
      await sandbox.kill();
    }
    return ok(name, `started and stopped a sandbox (${sandbox.sandboxId})`);
  } catch (error) {
    const text = errorText(error);
    const fix = /401|403|unauthori[sz]ed|api key/i.test(text)
      ? "E2B refused the key: create a new one in the e2b.dev dashboard and set E2B_API_KEY"
      : /template|404|not found/i.test(text)
        ? "Check GATEHOUSE_E2B_TEMPLATE names a template of this E2B team (or unset it for code-interpreter)"
        : "Check that this machine can reach E2B (api.e2b.dev)";
    return fail(name, `could not start a sandbox: ${text}`, fix);
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// GitHub App

export async function checkGitHubApp({ env, live }: Pick<DoctorOptions, "env" | "live">): Promise<CheckResult> {
  const name = "github app";
  const set = (["GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_APP_WEBHOOK_SECRET"] as const).filter((k) => !!env[k]);
  if (set.length === 0) return skip(name, "not configured: runs deliver to local repositories only");
  if (!env.GITHUB_APP_ID && !env.GITHUB_APP_PRIVATE_KEY) {
    // Signed webhooks are accepted and recorded, but nothing can be delivered to GitHub without the App's id and key.
    return warn(name, "only GITHUB_APP_WEBHOOK_SECRET is set: webhooks are accepted, but runs cannot push or open pull requests", "Set GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY (the App's settings page), or remove GITHUB_APP_WEBHOOK_SECRET");
  }
  if (!env.GITHUB_APP_ID || !env.GITHUB_APP_PRIVATE_KEY) {
    const missing = !env.GITHUB_APP_ID ? "GITHUB_APP_ID" : "GITHUB_APP_PRIVATE_KEY";
    return fail(name, `${set.join(" and ")} ${set.length > 1 ? "are" : "is"} set but ${missing} is missing`, "Copy the App ID and generate a private key on the App's settings page (GitHub → Settings → Developer settings → GitHub Apps)");
  }
  if (!/^\d+$/.test(env.GITHUB_APP_ID)) {
    return fail(name, `GITHUB_APP_ID must be the numeric App ID (got ${JSON.stringify(env.GITHUB_APP_ID)})`, "Use the \"App ID\" number from the App's settings page, not the client id");
  }
  const pem = env.GITHUB_APP_PRIVATE_KEY.includes("\\n") && !env.GITHUB_APP_PRIVATE_KEY.includes("\n") ? env.GITHUB_APP_PRIVATE_KEY.replace(/\\n/g, "\n") : env.GITHUB_APP_PRIVATE_KEY;
  try {
    const key = crypto.createPrivateKey(pem);
    if (key.asymmetricKeyType !== "rsa") throw new Error(`a ${key.asymmetricKeyType} key, GitHub Apps use RSA`);
  } catch (error) {
    return fail(name, `GITHUB_APP_PRIVATE_KEY is not a usable private key: ${errorText(error)}`, "Paste the whole .pem file GitHub generated (from its BEGIN line to its END line), with real newlines or \\n");
  }
  const noSecret = !env.GITHUB_APP_WEBHOOK_SECRET;
  if (!live) {
    return noSecret
      ? warn(name, "App ID and key are set but GITHUB_APP_WEBHOOK_SECRET is not: webhooks (PR merged, comments) are refused", "Set GITHUB_APP_WEBHOOK_SECRET to the App's webhook secret")
      : ok(name, `App ${env.GITHUB_APP_ID} configured (not contacted)`);
  }
  const baseUrl = (env.GITHUB_API_URL ?? "https://api.github.com").replace(/\/+$/, "");
  try {
    const app = new App({ appId: env.GITHUB_APP_ID, privateKey: pem, Octokit: Octokit.defaults({ baseUrl, userAgent: "gatehouse-doctor" }) });
    const { data } = await app.octokit.request("GET /app/installations", { per_page: 100 });
    const accounts = data.map((i) => (i.account && "login" in i.account ? i.account.login : String(i.id)));
    if (accounts.length === 0) {
      return warn(name, `App ${env.GITHUB_APP_ID} authenticates but is installed nowhere`, "Install the App on the accounts or organizations whose repositories Gatehouse should deliver to");
    }
    if (noSecret) {
      return warn(name, `installed on ${accounts.join(", ")}, but GITHUB_APP_WEBHOOK_SECRET is not set: webhooks are refused`, "Set GITHUB_APP_WEBHOOK_SECRET to the App's webhook secret");
    }
    return ok(name, `App ${env.GITHUB_APP_ID} installed on ${accounts.join(", ")}`);
  } catch (error) {
    const status = (error as { status?: number }).status;
    const fix = status === 401
      ? "GitHub refused the App's JWT: GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY must belong to the same App (and this machine's clock must be right)"
      : `Check GITHUB_API_URL (${baseUrl}) and that this machine can reach it`;
    return fail(name, `listing the App's installations failed${status ? ` (${status})` : ""}: ${errorText(error)}`, fix);
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Model providers

export async function checkModels({ env, liveModels, models, timeoutMs = 30_000 }: Pick<DoctorOptions, "env" | "liveModels" | "models" | "timeoutMs">): Promise<CheckResult[]> {
  const configured = (Object.keys(PROVIDERS) as ProviderId[]).filter((p) => PROVIDERS[p].requiredEnv && env[PROVIDERS[p].requiredEnv!]);
  if (configured.length === 0) {
    return [warn("models", "no model provider is configured: every run uses the scripted demo model", "Set at least one of OPENAI_API_KEY, ANTHROPIC_API_KEY, DEEPSEEK_API_KEY, GOOGLE_GENERATIVE_AI_API_KEY or OPENAI_COMPATIBLE_BASE_URL")];
  }
  const routing = defaultRouting({ env });
  const ids = models ?? [...new Set(Object.values(routing))].filter((id) => !id.startsWith("demo:"));
  // One model per provider: the point is the key and the endpoint, not every model.
  const probe = new Map<ProviderId, string>();
  for (const id of ids) {
    const { provider } = parseModelId(id);
    if (!probe.has(provider)) probe.set(provider, id);
  }
  if (!liveModels) {
    return [ok("models", `configured: ${configured.map((p) => PROVIDERS[p].label).join(", ")}; default routing ${routing.planner} / ${routing.implementer} / ${routing.validator} (pass --live-models to call each once)`)];
  }
  const results: CheckResult[] = [];
  for (const provider of configured) {
    const name = `model ${provider}`;
    const id = probe.get(provider);
    if (!id) {
      results.push(skip(name, `${PROVIDERS[provider].label} is configured but no model of it is routed; pass --model ${provider}:<model> to call it`));
      continue;
    }
    try {
      const { usage } = await generateText({ model: getLanguageModel(id, { env }), prompt: "Reply with the word ok.", maxOutputTokens: 16, maxRetries: 0, abortSignal: AbortSignal.timeout(timeoutMs) });
      results.push(ok(name, `${id} answered (${usage.totalTokens ?? "?"} tokens)`));
    } catch (error) {
      const text = errorText(error);
      const fix = /401|403|unauthori[sz]ed|invalid.*key|api key/i.test(text)
        ? `The provider refused the key: check ${PROVIDERS[provider].requiredEnv}`
        : /404|not found|does not exist/i.test(text)
          ? `The model "${id}" is not available with this key: pick another with --model or in the project's routing`
          : "Check that this machine can reach the provider";
      results.push(fail(name, `${id} failed: ${text}`, fix));
    }
  }
  return results;
}

// ---------------------------------------------------------------------------------------------------------------------

/** Every check, in the order an operator fixes things: secrets and URLs, database, executor, integrations. */
export async function runDoctor(options: DoctorOptions): Promise<CheckResult[]> {
  const guard = async (name: string, fn: () => Promise<CheckResult | CheckResult[]> | CheckResult): Promise<CheckResult[]> => {
    try {
      const r = await fn();
      return Array.isArray(r) ? r : [r];
    } catch (error) {
      return [fail(name, `the check itself failed: ${errorText(error)}`, "Report this; the other checks still ran")];
    }
  };
  const { env } = options;
  return [
    ...(await guard("public URL", () => checkPublicUrl({ env }))),
    ...(await guard("session signing", () => checkAuthSecret({ env }))),
    ...(await guard("executor key", () => checkExecutorKey({ env }))),
    ...(await guard("proxy and cookies", () => checkProxy({ env }))),
    ...(await guard("hosting", () => checkHosting({ env }))),
    ...(await guard("database", () => checkDatabase(options))),
    ...(await guard("inngest", () => checkInngest(options))),
    ...(await guard("e2b sandbox", () => checkE2B(options))),
    ...(await guard("github app", () => checkGitHubApp(options))),
    ...(await guard("models", () => checkModels(options))),
  ];
}

export function formatResults(results: CheckResult[]): string {
  const mark: Record<CheckStatus, string> = { ok: "ok  ", warn: "WARN", fail: "FAIL", skip: "skip" };
  return results
    .map((r) => `${mark[r.status]}  ${r.name}: ${r.message}${r.fix ? `\n        fix: ${r.fix}` : ""}`)
    .join("\n");
}

/**
 * The doctor at start in production (instrumentation.ts): configuration plus the cheap live checks (database, GitHub);
 * no Inngest sync (the server is not listening yet), no sandbox, no model calls. Problems go to the log; the app starts
 * anyway — a warning must never keep it down, and a failure is better explained in the log than by a crash loop.
 */
export async function logDoctorAtStart({ env, logger }: { env: Env; logger: { info(m: string, f?: Record<string, unknown>): void; warn(m: string, f?: Record<string, unknown>): void; error(m: string, f?: Record<string, unknown>): void } }): Promise<CheckResult[]> {
  const results = await runDoctor({ env, live: true, inngestSync: false, e2bStart: false, liveModels: false });
  for (const r of results) {
    if (r.status === "fail") logger.error(`doctor: ${r.name}: ${r.message}`, { check: r.name, fix: r.fix });
    else if (r.status === "warn") logger.warn(`doctor: ${r.name}: ${r.message}`, { check: r.name, fix: r.fix });
  }
  const failed = results.filter((r) => r.status === "fail").length;
  const warned = results.filter((r) => r.status === "warn").length;
  logger.info(`doctor: ${failed} failed, ${warned} warning(s)${failed + warned > 0 ? "; run `npm run doctor` for the full report" : ""}`, { failed, warned });
  return results;
}
