import type { AuthConfig } from "@auth/core";
import Credentials from "@auth/core/providers/credentials";
import { getEnv } from "@/lib/env";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { consumeLoginToken } from "./login-link";
import { gatehouseAdapter } from "./adapter";
import { externalProviders } from "./providers";
import { getAuthSecret, safeEqual } from "./secret";
import { endSession, SESSION_MAX_AGE_SECONDS, sessionIsLive, startSession } from "./sessions";

export const AUTH_BASE_PATH = "/api/auth";

/**
 * Auth.js configuration. GitHub OAuth and/or an OIDC provider when configured (users become `users` rows on first
 * sign-in through the Drizzle adapter, with no project access until they accept an owner's invitation). The local owner signs in with
 * GATEHOUSE_ADMIN_PASSWORD or the one-time link printed at start. Sessions are JWTs in an httpOnly cookie (Credentials
 * requires the JWT strategy) that carry a server-side session id (sessions.ts): a cookie whose session was signed out
 * or has expired signs nobody in.
 */
export function getAuthConfig(): AuthConfig {
  const env = getEnv();
  const external = externalProviders(env);
  return {
    ...(external.length ? { adapter: gatehouseAdapter() } : {}),
    basePath: AUTH_BASE_PATH,
    secret: getAuthSecret(),
    trustHost: true,
    session: { strategy: "jwt", maxAge: SESSION_MAX_AGE_SECONDS },
    pages: { signIn: "/signin", error: "/signin" },
    providers: [
      ...external,
      Credentials({
        id: "local",
        name: "Local owner",
        credentials: { password: { label: "Password", type: "password" }, token: { label: "Token", type: "text" } },
        async authorize(credentials) {
          const password = typeof credentials?.password === "string" ? credentials.password : "";
          const token = typeof credentials?.token === "string" ? credentials.token : "";
          const byPassword = !!env.GATEHOUSE_ADMIN_PASSWORD && !!password && safeEqual(password, env.GATEHOUSE_ADMIN_PASSWORD);
          const byToken = !byPassword && !!token && (await consumeLoginToken(token));
          if (!byPassword && !byToken) return null;
          const owner = await ensureLocalOwner();
          return { id: owner.id, name: owner.name ?? "Owner", email: owner.email ?? undefined };
        },
      }),
    ],
    callbacks: {
      async jwt({ token, user }) {
        if (user?.id) {
          token.sub = user.id;
          token.sid = await startSession({ userId: user.id });
          return token;
        }
        // Every later use of the cookie: only while its session is recorded (a JWT from before sessions were recorded
        // has none and must sign in again).
        return typeof token.sid === "string" && (await sessionIsLive(token.sid)) ? token : null;
      },
      session({ session, token }) {
        if (token.sub && session.user) (session.user as { id?: string }).id = token.sub;
        return session;
      },
    },
    events: {
      async signOut(message) {
        const sid = "token" in message ? message.token?.sid : undefined;
        if (typeof sid === "string") await endSession(sid);
      },
    },
    logger: {
      // Auth.js logs include request details; keep them out of our logs except real errors (messages only).
      error(error) {
        console.error(`[auth] ${error.name}: ${error.message}`);
      },
      warn() {},
      debug() {},
    },
  };
}
