import type { Server } from "node:http";
import Provider from "oidc-provider";
import { OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_ISSUER, OIDC_PORT, OIDC_USER } from "./oidc-constants";

/**
 * A real OpenID Connect provider on loopback for the sign-in e2e test (the `oidc-provider` package with its built-in
 * development login and consent pages). The app's webServer env points AUTH_OIDC_ISSUER here.
 */
export async function startOidcProvider({ appOrigin }: { appOrigin: string }): Promise<{ close: () => Promise<void> }> {
  const provider = new Provider(OIDC_ISSUER, {
    clients: [
      {
        client_id: OIDC_CLIENT_ID,
        client_secret: OIDC_CLIENT_SECRET,
        redirect_uris: [`${appOrigin}/api/auth/callback/oidc`],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    async findAccount(_ctx, sub) {
      return { accountId: sub, claims: async () => ({ sub, email: OIDC_USER.email, email_verified: true, name: OIDC_USER.name }) };
    },
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    // Put the profile claims in the ID token: Auth.js reads the OIDC profile from it.
    conformIdTokenClaims: false,
    cookies: { keys: ["e2e-oidc-cookie-key-not-a-secret"] },
    features: { devInteractions: { enabled: true } },
  });
  const server: Server = provider.listen(OIDC_PORT, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });
  return { close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
