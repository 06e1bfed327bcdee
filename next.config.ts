import type { NextConfig } from "next";

const nextConfig: NextConfig = {
  // Native / Node-only packages stay out of the server bundle; they are required at run time.
  serverExternalPackages: ["@libsql/client", "libsql", "jsdom", "mermaid", "simple-git", "@e2b/code-interpreter"],
  poweredByHeader: false,
  typedRoutes: false,
};

export default nextConfig;
