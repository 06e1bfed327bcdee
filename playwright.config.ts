import { execFileSync } from "node:child_process";
import path from "node:path";
import { defineConfig } from "@playwright/test";
import { E2E_ADMIN_PASSWORD, E2E_ADMIN_TOKEN, E2E_GITHUB_WEBHOOK_SECRET, E2E_PORT, E2E_SLACK_SIGNING_SECRET } from "./e2e/constants";
import { OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_ISSUER, OIDC_NAME } from "./e2e/oidc-constants";

/*
 * E2E against the real server (`next build` + `next start`): embedded executor, demo model, local git, a fresh data
 * directory. Browsers are never downloaded: Debian's chromium is launched through executablePath.
 */
const PORT = E2E_PORT;
const baseURL = `http://127.0.0.1:${PORT}`;
const artifacts = path.join(import.meta.dirname, "e2e", ".artifacts");
const standaloneDir = process.env.E2E_STANDALONE_DIR;
// E2E_SERVER=dev: the specs run against `next dev` instead of the production build (React reports more there, e.g.
// hydration warnings; e2e/console-clean.spec.ts is the one written for it). Pages compile on first visit: allow for it.
const devServer = process.env.E2E_SERVER === "dev";

function chromiumPath(): string | undefined {
  for (const name of ["chromium", "chromium-browser"]) {
    try {
      return execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim() || undefined;
    } catch {
      // try the next name
    }
  }
  return undefined;
}

export default defineConfig({
  testDir: "e2e",
  outputDir: path.join(artifacts, "test-results"),
  fullyParallel: false,
  workers: 1,
  retries: 0,
  timeout: devServer ? 240_000 : 90_000,
  expect: { timeout: 15_000 },
  reporter: [["list"]],
  globalSetup: "./e2e/global-setup.ts",
  use: {
    baseURL,
    trace: "retain-on-failure",
    screenshot: "only-on-failure",
    launchOptions: {
      executablePath: chromiumPath(),
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
  },
  webServer: {
    // E2E_STANDALONE_DIR: the runtime directory scripts/docker-build-check.sh assembled (what the Docker image ships):
    // the specs run against its `node server.js` instead of building here.
    command: standaloneDir
      ? `rm -rf ${path.join(artifacts, "data")} && cd ${JSON.stringify(standaloneDir)} && NEXT_MANUAL_SIG_HANDLE=true node server.js`
      : devServer
        ? `rm -rf ${path.join(artifacts, "data")} && npm run dev`
        : `rm -rf ${path.join(artifacts, "data")} && npm run build && npm start`,
    url: `${baseURL}/api/health`,
    timeout: 300_000,
    reuseExistingServer: false,
    stdout: "pipe",
    env: {
      PORT: String(PORT),
      HOST: "127.0.0.1",
      // The standalone server.js listens on HOSTNAME (next start on --hostname).
      HOSTNAME: "127.0.0.1",
      GATEHOUSE_DATA_DIR: path.join(artifacts, "data"),
      GATEHOUSE_ADMIN_PASSWORD: E2E_ADMIN_PASSWORD,
      GATEHOUSE_ADMIN_TOKEN: E2E_ADMIN_TOKEN,
      // Sign-in through the loopback OIDC provider that e2e/auth-oidc.spec.ts starts.
      AUTH_OIDC_ISSUER: OIDC_ISSUER,
      AUTH_OIDC_CLIENT_ID: OIDC_CLIENT_ID,
      AUTH_OIDC_CLIENT_SECRET: OIDC_CLIENT_SECRET,
      AUTH_OIDC_NAME: OIDC_NAME,
      // Signed installation webhooks (e2e/github-connect.spec.ts); the GitHub App itself stays unconfigured.
      GITHUB_APP_WEBHOOK_SECRET: E2E_GITHUB_WEBHOOK_SECRET,
      // Signed Slack slash commands (e2e/chat-settings.spec.ts links a Slack account with one).
      SLACK_SIGNING_SECRET: E2E_SLACK_SIGNING_SECRET,
      // The dashboard specs start many runs within a couple of minutes; the per-user limit is tested on its own.
      GATEHOUSE_RATE_LIMIT_RUNS: "1000",
      // e2e/notifications.spec.ts's webhook receiver listens on 127.0.0.1.
      GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES: "allow",
      NEXT_TELEMETRY_DISABLED: "1",
      LOG_LEVEL: "warn",
      // Idle keep-alive connections outlive the longest pause between two requests of a spec (npm start's default is 65 s).
      KEEP_ALIVE_TIMEOUT_MS: "120000",
    },
  },
});
