import type { Provider } from "@auth/core/providers";
import GitHub from "@auth/core/providers/github";
import type { Env } from "@/lib/env";

/** The sign-in methods this server offers, for the sign-in page (no secrets). */
export type SignInMethod = { id: string; name: string; type: "oauth" | "oidc" | "local" };

/** OAuth/OIDC providers configured by env (GitHub, any OIDC issuer). Empty → local mode. */
export function externalProviders(env: Env): Provider[] {
  const providers: Provider[] = [];
  if (env.AUTH_GITHUB_ID && env.AUTH_GITHUB_SECRET) {
    providers.push(GitHub({ clientId: env.AUTH_GITHUB_ID, clientSecret: env.AUTH_GITHUB_SECRET }));
  }
  if (env.AUTH_OIDC_ISSUER && env.AUTH_OIDC_CLIENT_ID && env.AUTH_OIDC_CLIENT_SECRET) {
    providers.push({
      id: "oidc",
      name: env.AUTH_OIDC_NAME,
      type: "oidc",
      issuer: env.AUTH_OIDC_ISSUER.replace(/\/$/, ""),
      clientId: env.AUTH_OIDC_CLIENT_ID,
      clientSecret: env.AUTH_OIDC_CLIENT_SECRET,
      checks: ["pkce", "state", "nonce"],
      authorization: { params: { scope: "openid email profile" } },
    });
  }
  return providers;
}

export function signInMethods(env: Env): SignInMethod[] {
  const methods: SignInMethod[] = [];
  if (env.AUTH_GITHUB_ID && env.AUTH_GITHUB_SECRET) methods.push({ id: "github", name: "GitHub", type: "oauth" });
  if (env.AUTH_OIDC_ISSUER && env.AUTH_OIDC_CLIENT_ID && env.AUTH_OIDC_CLIENT_SECRET) {
    methods.push({ id: "oidc", name: env.AUTH_OIDC_NAME, type: "oidc" });
  }
  // The local owner stays available: by password when one is set, and always by the one-time link printed at start.
  methods.push({ id: "local", name: "Owner", type: "local" });
  return methods;
}

/** Local mode: no external provider, so the owner account is the only way in. */
export function isLocalMode(env: Env): boolean {
  return signInMethods(env).every((m) => m.type === "local");
}
