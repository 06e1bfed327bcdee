import { resetEnvCache } from "@/lib/env";
import { clearGitHubCaches, githubClock } from "@/lib/github/app";
import { generateAppKey, startGitHubEmulator } from "./emulator";

export const APP_ID = "4242";
export const WEBHOOK_SECRET = "whsec-gatehouse-test-0123456789";

/** Start the emulator and point the GitHub App configuration at it (a fresh RSA key per test file). */
export async function configureGitHub() {
  const { privateKey, publicKey } = generateAppKey();
  const emulator = await startGitHubEmulator({ appId: APP_ID, publicKey });
  // Tests own their environment (as tests/setup.ts does); the app reads it only through lib/env.ts.
  process.env.GITHUB_APP_ID = APP_ID;
  process.env.GITHUB_APP_PRIVATE_KEY = privateKey;
  process.env.GITHUB_APP_WEBHOOK_SECRET = WEBHOOK_SECRET;
  process.env.GITHUB_API_URL = emulator.url;
  resetEnvCache();
  clearGitHubCaches();
  githubClock.now = () => Date.now();
  return { emulator, privateKey };
}
