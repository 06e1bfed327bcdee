import fs from "node:fs";
import path from "node:path";
import { z } from "zod";

/**
 * The one place that reads process.env. Every variable is validated here; a wrong value stops start-up with a
 * message naming the variable and what it should be. Everything else imports `getEnv()`.
 */

const optionalString = z
  .string()
  .trim()
  .transform((v) => (v === "" ? undefined : v))
  .optional();

const port = (name: string, fallback: number) =>
  z.coerce
    .number({ error: `${name} must be a port number (1-65535)` })
    .int(`${name} must be a whole number`)
    .min(1, `${name} must be between 1 and 65535`)
    .max(65535, `${name} must be between 1 and 65535`)
    .default(fallback);

const positiveInt = (name: string, fallback: number) =>
  z.coerce
    .number({ error: `${name} must be a positive whole number` })
    .int(`${name} must be a whole number`)
    .min(1, `${name} must be at least 1`)
    .default(fallback);

const flag = (fallback: boolean) =>
  z
    .enum(["1", "0", "true", "false", "yes", "no", ""], { error: "must be true or false" })
    .optional()
    .transform((v) => (v === undefined || v === "" ? fallback : v === "1" || v === "true" || v === "yes"));

const url = (name: string) =>
  z
    .string()
    .trim()
    .transform((v) => (v === "" ? undefined : v))
    .optional()
    .refine((v) => v === undefined || /^https?:\/\/[^\s]+$/.test(v), `${name} must be an http(s) URL`);

const schema = z.object({
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
  PORT: port("PORT", 3000),
  HOST: z.string().trim().min(1).default("127.0.0.1"),
  /** Public origin of the app, used in links (sign-in link, PR bodies). Defaults to http://HOST:PORT. */
  GATEHOUSE_PUBLIC_URL: url("GATEHOUSE_PUBLIC_URL"),
  GATEHOUSE_DATA_DIR: z.string().trim().min(1).default("./data"),
  DATABASE_URL: optionalString.refine(
    (v) => v === undefined || /^(file:|libsql:|https?:|wss?:)/.test(v),
    "DATABASE_URL must start with file:, libsql:, http(s): or ws(s):",
  ),
  DATABASE_AUTH_TOKEN: optionalString,
  /** Set by Vercel on its builds and functions ("1"): no long-lived process, a read-only disk except /tmp. */
  VERCEL: optionalString,
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error", "silent"]).default("info"),
  /**
   * The app runs behind a reverse proxy that sets X-Forwarded-Host / X-Forwarded-Proto. Only then are those headers
   * believed (same-origin checks, sign-in redirects); otherwise a client could name any host in them.
   */
  GATEHOUSE_TRUST_PROXY: flag(false),

  // Sign-in
  AUTH_SECRET: optionalString.refine(
    (v) => v === undefined || v.length >= 32,
    "AUTH_SECRET must be at least 32 characters (e.g. `openssl rand -base64 32`)",
  ),
  GATEHOUSE_ADMIN_TOKEN: optionalString.refine(
    (v) => v === undefined || v.length >= 16,
    "GATEHOUSE_ADMIN_TOKEN must be at least 16 characters",
  ),
  GATEHOUSE_ADMIN_PASSWORD: optionalString.refine(
    (v) => v === undefined || v.length >= 8,
    "GATEHOUSE_ADMIN_PASSWORD must be at least 8 characters",
  ),
  /** GitHub OAuth app (both or neither). Callback URL: <public URL>/api/auth/callback/github. */
  AUTH_GITHUB_ID: optionalString,
  AUTH_GITHUB_SECRET: optionalString,
  /** Any OpenID Connect provider (issuer, client id and secret together). Callback: <public URL>/api/auth/callback/oidc. */
  AUTH_OIDC_ISSUER: url("AUTH_OIDC_ISSUER"),
  AUTH_OIDC_CLIENT_ID: optionalString,
  AUTH_OIDC_CLIENT_SECRET: optionalString,
  /** Label of the OIDC button on the sign-in page. */
  AUTH_OIDC_NAME: z.string().trim().min(1).default("Single sign-on"),

  /**
   * Instance administrators besides the local owner (comma-separated emails, matched case-insensitively): only they
   * may bind a local path as a project's repository.
   */
  GATEHOUSE_ADMIN_EMAILS: z
    .string()
    .optional()
    .transform((v) => (v ?? "").split(",").map((e) => e.trim().toLowerCase()).filter(Boolean))
    .pipe(z.array(z.string().email("GATEHOUSE_ADMIN_EMAILS must be a comma-separated list of email addresses"))),

  // Durable execution. None of the INNGEST_* keys set → the embedded executor.
  INNGEST_EVENT_KEY: optionalString,
  INNGEST_SIGNING_KEY: optionalString,
  INNGEST_SIGNING_KEY_FALLBACK: optionalString,
  INNGEST_BASE_URL: url("INNGEST_BASE_URL"),
  INNGEST_ENV: optionalString,
  INNGEST_DEV: optionalString,
  /**
   * The one secret of embedded mode: Gatehouse's own app runs in signed mode with the signing key made from it
   * (lib/security/executor-key.ts ownSigningKey), and /e/:key takes it as the event key. Unset: generated once into the
   * data directory. Required in production with a remote database (Turso, sqld), where instances share no data directory.
   */
  GATEHOUSE_EXECUTOR_KEY: optionalString.refine(
    (v) => v === undefined || v.length >= 32,
    "GATEHOUSE_EXECUTOR_KEY must be at least 32 characters (e.g. `openssl rand -hex 32`)",
  ),
  /** Extra Inngest serve URLs (comma separated) the embedded executor drives besides Gatehouse's own. */
  GATEHOUSE_EXECUTOR_APPS: optionalString,
  /** Set to false to run the web server without the in-process executor (then run `npm run worker`). */
  GATEHOUSE_EMBEDDED_WORKER: flag(true),
  /**
   * Set by `npm start` (as Next documents it, in the script): Next leaves SIGTERM/SIGINT to the app, which stops its
   * executor gracefully (lib/ops/shutdown.ts) before exiting.
   */
  NEXT_MANUAL_SIG_HANDLE: flag(false),
  /**
   * How the in-process executor reaches Gatehouse's own serve endpoint: "in-process" calls the handler directly (no
   * socket, fastest); "http" goes through GATEHOUSE_PUBLIC_URL/api/inngest like any other app.
   */
  GATEHOUSE_EXECUTOR_TRANSPORT: z.enum(["in-process", "http"], { error: "must be in-process or http" }).default("in-process"),
  /**
   * "cloud": the embedded executor behaves as Inngest Cloud does where the two differ: waits do not look back, and
   * Cloud's limits (steps per run, event size, step duration) are enforced with Cloud's errors. Empty or "off": not.
   */
  GATEHOUSE_EXECUTOR_STRICT: z
    .enum(["cloud", "off", ""], { error: "must be cloud or off" })
    .optional()
    .transform((v) => (v === "cloud" ? ("cloud" as const) : null)),
  /** Strict mode: the largest event accepted, in bytes (Inngest's default 256 KiB; plans allow up to 3 MiB). */
  GATEHOUSE_EXECUTOR_MAX_EVENT_BYTES: positiveInt("GATEHOUSE_EXECUTOR_MAX_EVENT_BYTES", 256 * 1024).pipe(
    z.number().max(3 * 1024 * 1024, "GATEHOUSE_EXECUTOR_MAX_EVENT_BYTES must be at most 3145728 (3 MiB, Inngest's largest)"),
  ),
  /**
   * The host's function duration limit (Vercel: 300 s): in strict mode how long one call to an app may take; in every
   * mode the run's planner, implementer and validator steps work within it less a margin (stepBudget).
   */
  GATEHOUSE_EXECUTOR_MAX_STEP_SECONDS: positiveInt("GATEHOUSE_EXECUTOR_MAX_STEP_SECONDS", 300),
  /**
   * Signing key the executor signs its calls to other Inngest apps with (GATEHOUSE_EXECUTOR_APPS), as Inngest does
   * (X-Inngest-Signature), so apps served with isDev: false and this INNGEST_SIGNING_KEY sync and run. The fallback
   * is tried when an app refuses the first (key rotation).
   */
  GATEHOUSE_EXECUTOR_SIGNING_KEY: optionalString,
  GATEHOUSE_EXECUTOR_SIGNING_KEY_FALLBACK: optionalString,

  // Runs
  MAX_CONCURRENT_RUNS_PER_USER: positiveInt("MAX_CONCURRENT_RUNS_PER_USER", 5),
  /** Days after a run failed or was cancelled before the daily sweep deletes its branch and worktree; 0 keeps them. */
  GATEHOUSE_CLEANUP_AFTER_DAYS: z.coerce
    .number({ error: "GATEHOUSE_CLEANUP_AFTER_DAYS must be a whole number of days (0 keeps them forever)" })
    .int("GATEHOUSE_CLEANUP_AFTER_DAYS must be a whole number of days")
    .min(0, "GATEHOUSE_CLEANUP_AFTER_DAYS must be 0 or more")
    .default(30),
  GATEHOUSE_MAX_BODY_BYTES: positiveInt("GATEHOUSE_MAX_BODY_BYTES", 1_000_000),
  /**
   * Largest GitHub webhook body read (413 beyond). GitHub allows 25 MB, but real deliveries are kilobytes; the body is
   * read before its signature can be checked, so the cap is what a stranger can make the server hold per connection.
   */
  GATEHOUSE_WEBHOOK_MAX_BYTES: positiveInt("GATEHOUSE_WEBHOOK_MAX_BYTES", 5 * 1024 * 1024).refine(
    (v) => v <= 25 * 1024 * 1024,
    "GATEHOUSE_WEBHOOK_MAX_BYTES must be at most 26214400 (GitHub's own 25 MB limit)",
  ),
  /**
   * Bytes of request bodies read at once, across the process, before their sender is verified (webhooks, the Inngest
   * endpoint, the sign-in form): a request that would go past it is refused with 503 and Retry-After.
   */
  GATEHOUSE_UNVERIFIED_BODY_BYTES: positiveInt("GATEHOUSE_UNVERIFIED_BODY_BYTES", 64 * 1024 * 1024),
  /** Per-user rate limits (requests per minute, bursts up to the same number): run creation and gate decisions. */
  GATEHOUSE_RATE_LIMIT_RUNS: positiveInt("GATEHOUSE_RATE_LIMIT_RUNS", 30),
  GATEHOUSE_RATE_LIMIT_DECISIONS: positiveInt("GATEHOUSE_RATE_LIMIT_DECISIONS", 120),
  /** Per-user requests per minute for creating API tokens and projects (each its own bucket). */
  GATEHOUSE_RATE_LIMIT_CREATIONS: positiveInt("GATEHOUSE_RATE_LIMIT_CREATIONS", 20),

  // Models
  OPENAI_API_KEY: optionalString,
  ANTHROPIC_API_KEY: optionalString,
  DEEPSEEK_API_KEY: optionalString,
  GOOGLE_GENERATIVE_AI_API_KEY: optionalString,
  OPENAI_COMPATIBLE_BASE_URL: url("OPENAI_COMPATIBLE_BASE_URL"),
  OPENAI_COMPATIBLE_API_KEY: optionalString,

  /** When set, a local repository binding must resolve (realpath) inside this directory. */
  GATEHOUSE_REPOSITORIES_ROOT: optionalString.refine(
    (v) => v === undefined || path.isAbsolute(v),
    "GATEHOUSE_REPOSITORIES_ROOT must be an absolute path",
  ),

  // Sandbox
  E2B_API_KEY: optionalString,
  /** Which sandbox runs agent commands: auto (E2B when E2B_API_KEY is set, else local), local, or e2b. */
  GATEHOUSE_SANDBOX: z.enum(["auto", "local", "e2b"]).default("auto"),
  /** Local sandbox isolation: auto (bubblewrap when it works), bwrap (refuse to run without it), none. */
  GATEHOUSE_SANDBOX_ISOLATION: z.enum(["auto", "bwrap", "none"]).default("auto"),
  /** Local sandbox limits per command (a cgroup where one can be created, and rlimits per process). */
  GATEHOUSE_SANDBOX_PIDS: positiveInt("GATEHOUSE_SANDBOX_PIDS", 256),
  GATEHOUSE_SANDBOX_MEMORY_MB: positiveInt("GATEHOUSE_SANDBOX_MEMORY_MB", 4096),
  GATEHOUSE_SANDBOX_FILE_MB: positiveInt("GATEHOUSE_SANDBOX_FILE_MB", 1024),
  GATEHOUSE_SANDBOX_OPEN_FILES: positiveInt("GATEHOUSE_SANDBOX_OPEN_FILES", 4096),
  /** E2B template id for sandboxes (default: the code-interpreter template). */
  GATEHOUSE_E2B_TEMPLATE: optionalString,

  // `npm run eval` (which runs on a database of its own): where the app it reports to keeps its data
  /** The app's data directory: eval results for a project are written to <it>/evals/<project id>/ (set by npm run eval). */
  GATEHOUSE_EVAL_APP_DATA_DIR: optionalString,
  /** The app's database, read to find a project's repository for `--from-history <project id>` (default: its file in the data dir). */
  GATEHOUSE_EVAL_APP_DATABASE_URL: optionalString.refine(
    (v) => v === undefined || /^(file:|libsql:|https?:|wss?:)/.test(v),
    "GATEHOUSE_EVAL_APP_DATABASE_URL must start with file:, libsql:, http(s): or ws(s):",
  ),

  // GitHub App
  GITHUB_APP_ID: optionalString,
  GITHUB_APP_PRIVATE_KEY: optionalString,
  GITHUB_APP_WEBHOOK_SECRET: optionalString,
  GITHUB_APP_CLIENT_ID: optionalString,
  GITHUB_APP_CLIENT_SECRET: optionalString,
  GITHUB_API_URL: url("GITHUB_API_URL"),

  // Notifications out (lib/notifications)
  /**
   * Key for the channel secrets stored in the database (webhook secrets, SMTP passwords, Slack and Telegram tokens),
   * AES-256-GCM. Unset: derived from AUTH_SECRET (or its generated file), so changing that makes them unreadable.
   */
  GATEHOUSE_SECRETS_KEY: optionalString.refine(
    (v) => v === undefined || v.length >= 32,
    "GATEHOUSE_SECRETS_KEY must be at least 32 characters (e.g. `openssl rand -base64 32`)",
  ),
  /** Slack Web API base URL (default https://slack.com/api/), e.g. a proxy or a test receiver. */
  GATEHOUSE_SLACK_API_URL: url("GATEHOUSE_SLACK_API_URL"),
  /** Telegram Bot API root (default https://api.telegram.org), e.g. a self-hosted Bot API server. */
  GATEHOUSE_TELEGRAM_API_ROOT: url("GATEHOUSE_TELEGRAM_API_ROOT"),
  /** The Slack app's signing secret (Basic Information → App Credentials): verifies /api/slack/* requests. */
  SLACK_SIGNING_SECRET: optionalString,
  /** Largest Slack or Telegram request body accepted (form-encoded interactions, updates), in bytes. */
  GATEHOUSE_CHAT_MAX_BYTES: positiveInt("GATEHOUSE_CHAT_MAX_BYTES", 256 * 1024),
  /**
   * Whether project owners' webhooks and SMTP servers may be private addresses (loopback, 10/8, 192.168/16,
   * link-local such as cloud metadata …). deny (default): only public unicast addresses; allow: an internal relay or a
   * receiver on this machine (lib/notifications/address-policy.ts).
   */
  GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES: z
    .enum(["deny", "allow"], { error: "GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES must be deny or allow" })
    .default("deny"),
}).superRefine((v, ctx) => {
  // Half-configured sign-in providers would show a button that can never work: say what is missing instead.
  if (!!v.AUTH_GITHUB_ID !== !!v.AUTH_GITHUB_SECRET) {
    const missing = v.AUTH_GITHUB_ID ? "AUTH_GITHUB_SECRET" : "AUTH_GITHUB_ID";
    ctx.addIssue({ code: "custom", path: [missing], message: `${missing} must be set together with ${missing === "AUTH_GITHUB_ID" ? "AUTH_GITHUB_SECRET" : "AUTH_GITHUB_ID"} (GitHub OAuth sign-in)` });
  }
  // Production on a remote database (Vercel + Turso, several replicas on sqld): no data directory is shared, so the
  // secrets Gatehouse would otherwise generate into it must come from the environment, the same on every instance.
  if (v.NODE_ENV === "production" && v.DATABASE_URL && !v.DATABASE_URL.startsWith("file:")) {
    if (!v.AUTH_SECRET) {
      ctx.addIssue({ code: "custom", path: ["AUTH_SECRET"], message: "AUTH_SECRET is required in production with a remote DATABASE_URL (instances share no data directory to keep a generated one): set it to a random string of at least 32 characters (`openssl rand -base64 32`)" });
    }
    const embedded = !(v.INNGEST_EVENT_KEY || v.INNGEST_SIGNING_KEY || v.INNGEST_BASE_URL);
    if (embedded && !v.GATEHOUSE_EXECUTOR_KEY) {
      ctx.addIssue({ code: "custom", path: ["GATEHOUSE_EXECUTOR_KEY"], message: "GATEHOUSE_EXECUTOR_KEY is required in production with a remote DATABASE_URL and the embedded executor: set it to a random string of at least 32 characters (`openssl rand -hex 32`), the same on every instance" });
    }
  }
  const oidc = ["AUTH_OIDC_ISSUER", "AUTH_OIDC_CLIENT_ID", "AUTH_OIDC_CLIENT_SECRET"] as const;
  const set = oidc.filter((name) => !!v[name]);
  if (set.length > 0 && set.length < oidc.length) {
    for (const name of oidc.filter((n) => !v[n])) {
      ctx.addIssue({ code: "custom", path: [name], message: `${name} must be set together with ${set.join(" and ")} (OIDC sign-in)` });
    }
  }
});

type RawEnv = z.infer<typeof schema>;

export type Env = RawEnv & {
  /** Absolute path of the data directory. */
  dataDir: string;
  /** The database URL actually used (default: a file in the data directory). */
  databaseUrl: string;
  /** "embedded" when no Inngest Cloud / self-hosted settings are present. */
  executionMode: "embedded" | "inngest";
  publicUrl: string;
  /** Absolute path of the app's own checkout (the server's working directory): never bindable as a repository. */
  appDir: string;
};

export class EnvError extends Error {
  constructor(public readonly issues: string[]) {
    super(`Invalid environment configuration:\n${issues.map((i) => `  - ${i}`).join("\n")}`);
    this.name = "EnvError";
  }
}

/** Parse an environment record. Pure: tests call it with their own records. */
export function parseEnv(source: Record<string, string | undefined>): Env {
  const result = schema.safeParse(source);
  if (!result.success) {
    throw new EnvError(
      result.error.issues.map((issue) => {
        const name = issue.path.join(".");
        const message = issue.message.startsWith(name) ? issue.message : `${name}: ${issue.message}`;
        return `${message} (got ${JSON.stringify(source[name] ?? "")})`;
      }),
    );
  }
  const raw = result.data;
  const dataDir = path.resolve(raw.GATEHOUSE_DATA_DIR);
  const databaseUrl = raw.DATABASE_URL ?? `file:${path.join(dataDir, "gatehouse.db")}`;
  const executionMode =
    raw.INNGEST_EVENT_KEY || raw.INNGEST_SIGNING_KEY || raw.INNGEST_BASE_URL ? "inngest" : "embedded";
  const publicUrl = raw.GATEHOUSE_PUBLIC_URL ?? `http://${raw.HOST === "0.0.0.0" ? "127.0.0.1" : raw.HOST}:${raw.PORT}`;
  return { ...raw, dataDir, databaseUrl, executionMode, publicUrl, appDir: process.cwd() };
}

/**
 * Build-time choice for next.config.ts: GATEHOUSE_STANDALONE=1 makes `next build` emit the standalone server
 * (.next/standalone, what the Dockerfile ships). Read here rather than through getEnv(): the build must not need the
 * runtime's secrets.
 */
export function standaloneBuild(): boolean {
  const v = process.env.GATEHOUSE_STANDALONE;
  return v === "1" || v === "true";
}

let cached: Env | undefined;

export function getEnv(): Env {
  cached ??= parseEnv(process.env);
  return cached;
}

/**
 * For scripts run outside Next (`npm run sign-in-link`): load the same env files Next loads, in its order, so the
 * script sees the server's data directory and database. A variable already set wins over every file, and an earlier
 * file over a later one (as in Next). Call before getEnv().
 */
export function loadEnvFiles({ dir = process.cwd() }: { dir?: string } = {}): string[] {
  const mode = process.env.NODE_ENV === "production" ? "production" : process.env.NODE_ENV === "test" ? "test" : "development";
  const names = [`.env.${mode}.local`, ...(mode === "test" ? [] : [".env.local"]), `.env.${mode}`, ".env"];
  const loaded: string[] = [];
  for (const name of names) {
    const file = path.join(dir, name);
    if (!fs.existsSync(file)) continue;
    process.loadEnvFile(file);
    loaded.push(name);
  }
  cached = undefined;
  return loaded;
}

/** Tests change variables between cases; this drops the cached parse. */
export function resetEnvCache(): void {
  cached = undefined;
}

/** Names of variables whose values are secrets: never logged, stored, prompted or passed to a sandbox. */
export const SECRET_ENV_NAMES = [
  "AUTH_SECRET",
  "DATABASE_AUTH_TOKEN",
  "GATEHOUSE_ADMIN_TOKEN",
  "GATEHOUSE_ADMIN_PASSWORD",
  "GATEHOUSE_EXECUTOR_KEY",
  "INNGEST_EVENT_KEY",
  "INNGEST_SIGNING_KEY",
  "INNGEST_SIGNING_KEY_FALLBACK",
  "GATEHOUSE_EXECUTOR_SIGNING_KEY",
  "GATEHOUSE_EXECUTOR_SIGNING_KEY_FALLBACK",
  "OPENAI_API_KEY",
  "ANTHROPIC_API_KEY",
  "DEEPSEEK_API_KEY",
  "GOOGLE_GENERATIVE_AI_API_KEY",
  "OPENAI_COMPATIBLE_API_KEY",
  "E2B_API_KEY",
  "GITHUB_APP_PRIVATE_KEY",
  "GITHUB_APP_WEBHOOK_SECRET",
  "GITHUB_APP_CLIENT_SECRET",
  "AUTH_GITHUB_SECRET",
  "AUTH_OIDC_CLIENT_SECRET",
  "GATEHOUSE_SECRETS_KEY",
  "SLACK_SIGNING_SECRET",
] as const satisfies readonly (keyof RawEnv)[];

const secretValuesOf = new WeakMap<Env, readonly string[]>();

/** The secret values currently configured, for redaction (worked out once per parsed environment: redaction is hot). */
export function secretValues(env: Env = getEnv()): readonly string[] {
  let values = secretValuesOf.get(env);
  if (!values) {
    values = Object.freeze(SECRET_ENV_NAMES.map((name) => env[name]).filter((v): v is string => typeof v === "string" && v.length >= 8));
    secretValuesOf.set(env, values);
  }
  return values;
}

/**
 * A minimal environment for child processes (sandboxed commands, git): PATH, HOME, locale — never the app's secrets.
 * Reads process.env here so that no other module has to.
 */
export function baseChildEnv(extra: Record<string, string> = {}): Record<string, string> {
  const keep = ["PATH", "LANG", "LC_ALL", "TZ", "TERM"];
  const out: Record<string, string> = {};
  for (const key of keep) {
    const value = process.env[key];
    if (value !== undefined) out[key] = value;
  }
  // Only absolute PATH entries: an empty or relative one ("", ".", "node_modules/.bin") is looked up from the child's
  // working directory — a worktree the sandbox writes — so a planted `git` there would run on the host.
  const absolute = (out.PATH ?? "").split(":").filter((dir) => dir.startsWith("/"));
  out.PATH = absolute.length > 0 ? absolute.join(":") : "/usr/local/bin:/usr/bin:/bin";
  return { ...out, ...extra };
}
