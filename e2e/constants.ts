import { E2E_PORTS } from "./ports";

/** Shared by playwright.config.ts (the server's env) and the specs (how they sign in). Test-only credentials. */
export const E2E_PORT = E2E_PORTS.GATEHOUSE_E2E_PORT;
export const E2E_ADMIN_PASSWORD = "e2e-owner-password";
export const E2E_ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef";
/** Signs the GitHub webhook deliveries e2e/github-connect.spec.ts posts. */
export const E2E_GITHUB_WEBHOOK_SECRET = "e2e-github-webhook-secret";
/** The Slack app's signing secret on the e2e server: e2e/chat-settings.spec.ts signs a slash command with it. */
export const E2E_SLACK_SIGNING_SECRET = "e2e-slack-signing-secret-0123456789";
