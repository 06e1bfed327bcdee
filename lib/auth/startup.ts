import { execFileSync } from "node:child_process";
import { getEnv, secretValues, type Env } from "@/lib/env";
import { createLoginLink } from "./login-link";
import { SIGN_IN_LINK_COMMAND, SIGN_IN_LINK_VALIDITY } from "./sign-in-help";
import { isLocalMode, signInMethods } from "./providers";

/** Shapes of real credentials (high confidence, so a warning means something). */
const SECRET_SHAPES: Array<[string, string]> = [
  ["private key", "-----BEGIN ([A-Z]+ )?PRIVATE KEY-----"],
  ["Anthropic key", "sk-ant-[A-Za-z0-9_-]{32,}"],
  ["OpenAI key", "sk-(proj-|svcacct-|admin-)?[A-Za-z0-9_-]{40,}"],
  ["GitHub token", "(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})"],
  ["AWS access key", "(AKIA|ASIA)[0-9A-Z]{16}"],
  ["Google API key", "AIza[0-9A-Za-z_-]{35}"],
  ["Gatehouse API token", "(gatehouse_api_|gh_pat_)[A-Za-z0-9_-]{32}"],
];

export type CommittedSecretFinding = { file: string; what: string };

/**
 * Test fixtures are not deployed and hold fake keys on purpose (the redaction and secret-planting tests need real
 * shapes), so the scan passes over them by name: the test folders and files named *.test.* / *.spec.*. Everything else
 * a deployer commits is scanned.
 */
export const FIXTURE_PATHSPECS = [":(exclude,glob)tests/**", ":(exclude,glob)e2e/**", ":(exclude,glob)**/*.test.*", ":(exclude,glob)**/*.spec.*"];

function git(cwd: string, args: string[]): string {
  try {
    return execFileSync("git", args, { cwd, encoding: "utf8", timeout: 5_000, stdio: ["ignore", "pipe", "ignore"], maxBuffer: 4 << 20 });
  } catch (error) {
    // git grep exits 1 when nothing matches; not a repository → nothing to check.
    return (error as { stdout?: string }).stdout ?? "";
  }
}

/**
 * Secrets that look committed to the repository in `cwd`: tracked .env files or data directory, configured secret
 * values, and known credential shapes in tracked files, test fixtures aside. Uses git's own index (fast; no file walk).
 */
export function findCommittedSecrets({ cwd, secrets = [] }: { cwd: string; secrets?: readonly string[] }): CommittedSecretFinding[] {
  const findings: CommittedSecretFinding[] = [];
  const tracked = git(cwd, ["ls-files", "-z", "--", ".", ...FIXTURE_PATHSPECS]).split("\0").filter(Boolean);
  for (const file of tracked) {
    const base = file.split("/").pop() ?? file;
    if (/^\.env(\..+)?$/.test(base) && !/\.(example|sample|template)$/.test(base)) findings.push({ file, what: "an env file" });
    else if (/^data\//.test(file) || /\.db(-wal|-shm)?$/.test(base)) findings.push({ file, what: "the data directory / a database file" });
    else if (/^auth-secret$/.test(base)) findings.push({ file, what: "the generated AUTH_SECRET" });
  }
  const values = secrets.filter((s) => s.length >= 8);
  if (values.length) {
    const args = ["grep", "-l", "-I", "-F", ...values.flatMap((v) => ["-e", v]), "--", ".", ...FIXTURE_PATHSPECS];
    for (const file of git(cwd, args).split("\n").filter(Boolean)) findings.push({ file, what: "a secret configured in env" });
  }
  for (const [what, pattern] of SECRET_SHAPES) {
    for (const file of git(cwd, ["grep", "-l", "-I", "-E", "-e", pattern, "--", ".", ...FIXTURE_PATHSPECS]).split("\n").filter(Boolean)) {
      findings.push({ file, what: `something shaped like a ${what}` });
    }
  }
  return findings;
}

function isLoopback(host: string): boolean {
  return host === "127.0.0.1" || host === "localhost" || host === "::1" || host.startsWith("127.");
}

/** The banner lines and warnings for this configuration (pure apart from the committed-secrets scan). */
export function startupWarnings(env: Env, { cwd = process.cwd() }: { cwd?: string } = {}): string[] {
  const warnings: string[] = [];
  if (!isLoopback(env.HOST)) {
    warnings.push(
      `HOST=${env.HOST}: Gatehouse is reachable from other machines. Put it behind HTTPS and configure sign-in (GitHub or OIDC), or unset HOST to listen on 127.0.0.1 only.`,
    );
  }
  if (env.NODE_ENV === "production" && !env.AUTH_SECRET) {
    warnings.push(`AUTH_SECRET is not set: sessions are signed with a secret generated into ${env.dataDir}/auth-secret.`);
  }
  const findings = findCommittedSecrets({ cwd, secrets: secretValues(env) });
  for (const { file, what } of findings.slice(0, 20)) {
    warnings.push(`${file} is tracked by git and contains ${what}: remove it from the repository and rotate the secret.`);
  }
  if (findings.length > 20) warnings.push(`… and ${findings.length - 20} more tracked files that look like secrets.`);
  return warnings;
}

const globalForBanner = globalThis as unknown as { __gatehouseBannerPrinted?: boolean };

/**
 * What the server prints when it starts: where it listens, how to sign in — in local mode a one-time sign-in link
 * (as Jupyter does) — and warnings (exposed HOST, secrets that look committed). Once per process.
 */
export async function printStartupBanner({ print = console.log, warn = console.warn }: { print?: (line: string) => void; warn?: (line: string) => void } = {}) {
  if (globalForBanner.__gatehouseBannerPrinted) return;
  globalForBanner.__gatehouseBannerPrinted = true;
  const env = getEnv();
  // Warnings first, so that what a newcomer needs next — the URL and the sign-in link — is the last thing on screen.
  for (const warning of startupWarnings(env)) warn(`[security] ${warning}`);
  const lines = [`Gatehouse on ${env.publicUrl} (listening on ${env.HOST}:${env.PORT})`];
  const external = signInMethods(env).filter((m) => m.type !== "local");
  if (external.length) lines.push(`Sign-in: ${external.map((m) => m.name).join(", ")}${env.GATEHOUSE_ADMIN_PASSWORD ? " and the owner password" : ""}`);
  if (isLocalMode(env)) {
    const link = await createLoginLink({ publicUrl: env.publicUrl });
    // The link stays the last line; how to get another one (after signing out) comes just before it.
    lines.push(`For another one-time link later (after signing out, or once this one is used), run: ${SIGN_IN_LINK_COMMAND}`);
    if (env.GATEHOUSE_ADMIN_PASSWORD) lines.push(`Sign in as the owner with GATEHOUSE_ADMIN_PASSWORD, or with this one-time link (${SIGN_IN_LINK_VALIDITY}):`);
    else lines.push(`Sign in as the owner with this one-time link (${SIGN_IN_LINK_VALIDITY}):`);
    lines.push(`    ${link}`);
  }
  for (const line of lines) print(line);
}

/** Tests: allow the banner to print again. */
export function resetStartupBanner() {
  globalForBanner.__gatehouseBannerPrinted = false;
}
