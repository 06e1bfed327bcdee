import type { NextConfig } from "next";
import { standaloneBuild } from "./lib/env";
import { API_CSP, BASE_SECURITY_HEADERS } from "./lib/security/headers";

const base = Object.entries(BASE_SECURITY_HEADERS).map(([key, value]) => ({ key, value }));

const nextConfig: NextConfig = {
  // Native / Node-only packages stay out of the server bundle; they are required at run time.
  serverExternalPackages: ["@libsql/client", "libsql", "jsdom", "mermaid", "@e2b/code-interpreter"],
  poweredByHeader: false,
  // The migrations are read from disk at start (lib/db/index.ts, by a path the tracer cannot follow): ship them with
  // every server function (Vercel) and in the standalone server (Docker).
  outputFileTracingIncludes: { "/**": ["./drizzle/**/*"] },
  // GATEHOUSE_STANDALONE=1 at build time: .next/standalone with a minimal server.js and node_modules (the Dockerfile).
  // Off by default, so `npm start` (next start) keeps working on an ordinary build.
  ...(standaloneBuild() ? { output: "standalone" as const } : {}),
  // `npm test` runs `tsc --noEmit` over the whole project as its own step; the build does not repeat it.
  typescript: { ignoreBuildErrors: true },
  // Pages get their nonce-based policy from proxy.ts; everything else (API, events, static files) a policy allowing nothing.
  async headers() {
    const csp = { key: "content-security-policy", value: API_CSP };
    return [
      { source: "/:path*", headers: base },
      { source: "/api/:path*", headers: [csp] },
      { source: "/e/:path*", headers: [csp] },
      { source: "/v1/:path*", headers: [csp] },
      { source: "/_next/static/:path*", headers: [csp] },
    ];
  },
};

export default nextConfig;
