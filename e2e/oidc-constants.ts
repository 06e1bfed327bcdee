import { E2E_PORTS } from "./ports";

/** Shared by playwright.config.ts (the app's env) and the OIDC provider the e2e test starts. Test-only values. */
export const OIDC_PORT = E2E_PORTS.GATEHOUSE_E2E_OIDC_PORT;
export const OIDC_ISSUER = `http://127.0.0.1:${OIDC_PORT}`;
export const OIDC_CLIENT_ID = "gatehouse-e2e";
export const OIDC_CLIENT_SECRET = "e2e-oidc-client-secret-not-a-real-one";
export const OIDC_NAME = "E2E SSO";

/** The person who signs in through the provider (any login name maps to these claims). */
export const OIDC_USER = { name: "Ada Lovelace", email: "ada@example.com" };
