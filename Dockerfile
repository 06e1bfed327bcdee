# syntax=docker/dockerfile:1
# Gatehouse as a container: the Next standalone server (node server.js), running as a non-root user.
# Build: docker build -t gatehouse .      Run: see compose.yaml (several replicas, Inngest, sqld).
# scripts/docker-build-check.sh runs the same build steps on a machine without Docker and smoke-tests the result.

ARG NODE_IMAGE=node:24-bookworm-slim

# 1. Dependencies, from the lockfile only (cached until package*.json change).
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# patches/: fixes applied to dependencies by patch-package in postinstall (see README, "Patched dependencies").
COPY patches ./patches
RUN npm ci --no-audit --no-fund

# 2. The build: .next/standalone holds server.js and the traced node_modules (drizzle/ included, see next.config.ts).
FROM ${NODE_IMAGE} AS build
WORKDIR /app
ENV NEXT_TELEMETRY_DISABLED=1 GATEHOUSE_STANDALONE=1
COPY --from=deps /app/node_modules ./node_modules
COPY . .
RUN npm run build

# 3. The runtime: the standalone server, static files and git (runs work on git worktrees); bubblewrap isolates agent
#    commands when the container may create user namespaces (otherwise use E2B: E2B_API_KEY, GATEHOUSE_SANDBOX=e2b).
FROM ${NODE_IMAGE} AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends git bubblewrap ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 gatehouse \
 && useradd --system --uid 10001 --gid gatehouse --home-dir /app --shell /usr/sbin/nologin gatehouse \
 && mkdir -p /data && chown gatehouse:gatehouse /data && chmod 700 /data
WORKDIR /app
ENV NODE_ENV=production \
    NEXT_TELEMETRY_DISABLED=1 \
    HOSTNAME=0.0.0.0 \
    HOST=0.0.0.0 \
    PORT=3000 \
    GATEHOUSE_DATA_DIR=/data \
    NEXT_MANUAL_SIG_HANDLE=true
COPY --from=build --chown=gatehouse:gatehouse /app/.next/standalone ./
COPY --from=build --chown=gatehouse:gatehouse /app/.next/static ./.next/static
COPY --from=build --chown=gatehouse:gatehouse /app/public ./public
COPY --from=build --chown=gatehouse:gatehouse /app/drizzle ./drizzle
USER gatehouse
EXPOSE 3000
VOLUME ["/data"]
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/api/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM from `docker stop` reaches node directly (exec form): the app stops its executor and database, then exits.
CMD ["node", "server.js"]
