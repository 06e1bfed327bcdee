import { App } from "@octokit/app";
import { Octokit } from "@octokit/core";
import { getEnv } from "@/lib/env";
import { AppError } from "@/lib/errors";
import { log } from "@/lib/log";

/*
 * The GitHub App as the orchestrator uses it: app-JWT requests (installations, access tokens) through @octokit/app, and
 * per-repository installation tokens narrowed to one repository and the permissions delivery needs. Tokens live only
 * in this process's memory: never in the database, a log, an event, a commit or a sandbox.
 */

export const DEFAULT_GITHUB_API_URL = "https://api.github.com";

/** What delivery needs on the one repository: push the run branch, open / update / merge its pull request. */
export const DELIVERY_PERMISSIONS = { contents: "write", pull_requests: "write" } as const;

/** A token is replaced this long before GitHub says it expires (a push can take a while). */
export const TOKEN_REFRESH_MARGIN_MS = 5 * 60_000;

/** 5xx / network failures are retried this many times (then the step fails and the executor retries the step). */
const MAX_SERVER_RETRIES = 3;

/** The clock token expiry is judged by. A seam for tests, which move it instead of waiting an hour. */
export const githubClock = { now: (): number => Date.now() };

/** GitHub refused the app's credentials (401) even with a freshly minted token: a person has to fix the setup. */
export class GitHubAuthError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GitHubAuthError";
  }
}

export function isGitHubAuthError(error: unknown): error is GitHubAuthError {
  return error instanceof GitHubAuthError;
}

export function githubConfigured(): boolean {
  const env = getEnv();
  return !!(env.GITHUB_APP_ID && env.GITHUB_APP_PRIVATE_KEY);
}

export function githubApiUrl(): string {
  return (getEnv().GITHUB_API_URL ?? DEFAULT_GITHUB_API_URL).replace(/\/+$/, "");
}

type Rest = InstanceType<typeof Octokit>;

let cachedApp: { key: string; app: App; Rest: typeof Octokit } | null = null;

/** PEM keys pasted into one env line often carry literal "\n". */
function normalizeKey(key: string): string {
  return key.includes("\\n") && !key.includes("\n") ? key.replace(/\\n/g, "\n") : key;
}

function appClient(): { app: App; Rest: typeof Octokit } {
  const env = getEnv();
  if (!env.GITHUB_APP_ID || !env.GITHUB_APP_PRIVATE_KEY) {
    throw new AppError(
      "unavailable:github",
      "GitHub delivery is not configured on this server: set GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY (and GITHUB_APP_WEBHOOK_SECRET for webhooks).",
    );
  }
  const baseUrl = githubApiUrl();
  const key = `${env.GITHUB_APP_ID}|${baseUrl}|${env.GITHUB_APP_PRIVATE_KEY.length}`;
  if (cachedApp?.key !== key) {
    const Rest = Octokit.defaults({ baseUrl, userAgent: "gatehouse" });
    const app = new App({
      appId: env.GITHUB_APP_ID,
      privateKey: normalizeKey(env.GITHUB_APP_PRIVATE_KEY),
      Octokit: Rest,
      log: { debug: () => {}, info: () => {}, warn: (m: string) => log.warn(`github app: ${m}`), error: (m: string) => log.error(`github app: ${m}`) },
    });
    withServerRetries(app.octokit);
    cachedApp = { key, app, Rest };
    tokens.clear();
    installations.clear();
  }
  return { app: cachedApp.app, Rest: cachedApp.Rest };
}

/** Requests authenticated as the app itself (a JWT of at most 10 minutes, minted by @octokit/auth-app). */
export function appOctokit(): Rest {
  return appClient().app.octokit as Rest;
}

function statusOf(error: unknown): number | null {
  const status = (error as { status?: unknown })?.status;
  return typeof status === "number" ? status : null;
}

/** A 5xx, a 429 or no answer at all (status 500 from Octokit for network errors) is worth another try. */
function retriable(error: unknown): boolean {
  const status = statusOf(error);
  return status === null || status >= 500 || status === 429;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

function withServerRetries(octokit: Rest) {
  octokit.hook.wrap("request", async (request, options) => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await request(options);
      } catch (error) {
        if (attempt >= MAX_SERVER_RETRIES || !retriable(error)) throw error;
        log.warn("github request failed; retrying", { route: `${options.method} ${options.url}`, status: statusOf(error), attempt: attempt + 1 });
        await pause(200 * 2 ** attempt);
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------------------------------
// Installations and installation tokens

export type RepositoryRef = { owner: string; repo: string; installationId?: number };

const installations = new Map<string, number>();
const tokens = new Map<string, { token: string; expiresAt: number }>();
/** Counts tokens minted (for the health of the cache, and the tests that prove refresh). */
export const tokenStats = { minted: 0 };

const repoKey = (ref: RepositoryRef) => `${ref.owner}/${ref.repo}`.toLowerCase();

async function asAuthError<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (statusOf(error) === 401) {
      throw new GitHubAuthError(
        `GitHub refused the app's credentials while ${what} (401 Bad credentials). Check GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY, and that the app is still installed, then resume the run.`,
      );
    }
    throw error;
  }
}

export async function installationIdFor(ref: RepositoryRef): Promise<number> {
  if (ref.installationId) return ref.installationId;
  const known = installations.get(repoKey(ref));
  if (known) return known;
  const { data } = await asAuthError(`looking up the installation for ${ref.owner}/${ref.repo}`, () =>
    appOctokit().request("GET /repos/{owner}/{repo}/installation", { owner: ref.owner, repo: ref.repo }),
  );
  installations.set(repoKey(ref), data.id);
  return data.id;
}

/**
 * An installation token for one repository with DELIVERY_PERMISSIONS, from the cache until TOKEN_REFRESH_MARGIN_MS
 * before it expires. `fresh` drops the cached one first (after GitHub refused it).
 */
export async function installationToken(ref: RepositoryRef, { fresh = false }: { fresh?: boolean } = {}): Promise<string> {
  const key = repoKey(ref);
  const cached = tokens.get(key);
  if (!fresh && cached && cached.expiresAt - TOKEN_REFRESH_MARGIN_MS > githubClock.now()) return cached.token;
  tokens.delete(key);
  const installationId = await installationIdFor(ref);
  const { data } = await asAuthError(`minting an installation token for ${ref.owner}/${ref.repo}`, () =>
    appOctokit().request("POST /app/installations/{installation_id}/access_tokens", {
      installation_id: installationId,
      repositories: [ref.repo],
      permissions: { ...DELIVERY_PERMISSIONS },
    }),
  );
  tokenStats.minted += 1;
  tokens.set(key, { token: data.token, expiresAt: Date.parse(data.expires_at) });
  return data.token;
}

/** Forget every cached token and installation id (tests; a changed app configuration). */
export function clearGitHubCaches() {
  tokens.clear();
  installations.clear();
  cachedApp = null;
}

/**
 * Run `fn` with the repository's installation token; when GitHub answers 401 (token expired or revoked early), mint a
 * fresh token and try once more. A second 401 is a GitHubAuthError.
 */
export async function withInstallationToken<T>(
  ref: RepositoryRef,
  what: string,
  fn: (token: string) => Promise<T>,
  isUnauthorized: (error: unknown) => boolean = (e) => statusOf(e) === 401,
): Promise<T> {
  try {
    return await fn(await installationToken(ref));
  } catch (error) {
    if (!isUnauthorized(error)) throw error;
    log.info("github token refused; minting a fresh one", { repository: `${ref.owner}/${ref.repo}` });
  }
  try {
    return await fn(await installationToken(ref, { fresh: true }));
  } catch (error) {
    if (!isUnauthorized(error)) throw error;
    throw new GitHubAuthError(
      `GitHub refused the installation token for ${ref.owner}/${ref.repo} while ${what} (401), even a freshly minted one. Check that the app is installed on the repository with contents and pull requests write access, then resume the run.`,
    );
  }
}

/**
 * An Octokit for one repository's endpoints: every request carries the current installation token (re-minted on a
 * 401 once), and 5xx answers are retried a bounded number of times.
 */
export function repoOctokit(ref: RepositoryRef): Rest {
  const { Rest } = appClient();
  const octokit = new Rest();
  octokit.hook.wrap("request", async (request, options) =>
    withInstallationToken(ref, `calling ${options.method} ${String(options.url)}`, async (token) => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await request({ ...options, headers: { ...options.headers, authorization: `token ${token}` } });
        } catch (error) {
          if (attempt >= MAX_SERVER_RETRIES || !retriable(error)) throw error;
          log.warn("github request failed; retrying", { route: `${options.method} ${options.url}`, status: statusOf(error), attempt: attempt + 1 });
          await pause(200 * 2 ** attempt);
        }
      }
    }),
  );
  return octokit;
}
