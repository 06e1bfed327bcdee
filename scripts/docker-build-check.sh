#!/usr/bin/env bash
# The Dockerfile's build steps on a machine without Docker, then a smoke check of the result:
#   1. deps:    a copy of the build context (the tracked files; .dockerignore excludes nothing tracked), `npm ci`
#   2. build:   GATEHOUSE_STANDALONE=1 npm run build
#   3. runtime: .next/standalone + .next/static + public + drizzle, as the runtime stage copies them, in a fresh directory
#   4. smoke:   `node server.js` from that directory (the container's CMD) answers /api/health, then exits 0 on SIGTERM;
#               with --e2e, the e2e smoke spec (e2e/smoke.spec.ts) runs against that server (E2E_STANDALONE_DIR).
# Usage: scripts/docker-build-check.sh [--e2e] [--keep] [--reuse]
#   OUT=<dir> chooses where (default a temporary directory); --reuse skips steps 1-3 when OUT already holds a runtime.
set -euo pipefail

E2E=0
KEEP=0
REUSE=0
for arg in "$@"; do
  case "$arg" in
    --e2e) E2E=1 ;;
    --keep) KEEP=1 ;;
    --reuse) REUSE=1 ;;
    *) echo "unknown argument: $arg (use --e2e, --keep, --reuse)" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-docker-check-XXXXXX")}"
CONTEXT="$OUT/context"
RUNTIME="$OUT/runtime"
DATA="$OUT/data"
cleanup() {
  [[ -n "${SERVER_PID:-}" ]] && kill "$SERVER_PID" 2>/dev/null || true
  if [[ "$KEEP" == 0 ]]; then rm -rf "$OUT"; else echo "kept $OUT"; fi
}
trap cleanup EXIT

mkdir -p "$CONTEXT" "$RUNTIME" "$DATA"
if [[ "$REUSE" == 1 && -f "$RUNTIME/server.js" ]]; then
  echo "== reusing the runtime in $RUNTIME"
else
echo "== deps: npm ci in a copy of the build context ($CONTEXT)"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -c) | tar -x -C "$CONTEXT"
(cd "$CONTEXT" && npm ci --no-audit --no-fund --prefer-offline >/dev/null)

echo "== build: GATEHOUSE_STANDALONE=1 npm run build"
(cd "$CONTEXT" && NEXT_TELEMETRY_DISABLED=1 GATEHOUSE_STANDALONE=1 npm run build >"$OUT/build.log" 2>&1) || { tail -40 "$OUT/build.log"; exit 1; }
test -f "$CONTEXT/.next/standalone/server.js" || { echo "no .next/standalone/server.js: is output: standalone on?" >&2; exit 1; }

echo "== runtime: the files the runtime stage copies ($RUNTIME)"
cp -a "$CONTEXT/.next/standalone/." "$RUNTIME/"
mkdir -p "$RUNTIME/.next"
cp -a "$CONTEXT/.next/static" "$RUNTIME/.next/static"
cp -a "$CONTEXT/public" "$RUNTIME/public"
cp -a "$CONTEXT/drizzle" "$RUNTIME/drizzle"
echo "   $(du -sh "$RUNTIME" | cut -f1) (the build context with node_modules: $(du -sh "$CONTEXT" | cut -f1))"
fi

if [[ "$E2E" == 1 ]]; then
  echo "== e2e: e2e/smoke.spec.ts against node server.js"
  (cd "$ROOT" && E2E_STANDALONE_DIR="$RUNTIME" npx playwright test e2e/smoke.spec.ts)
  exit $?
fi

PORT="${PORT:-$((20000 + RANDOM % 20000))}"
ADMIN_TOKEN="smoke-admin-token-$RANDOM$RANDOM$RANDOM"
echo "== smoke: node server.js on 127.0.0.1:$PORT"
rm -rf "$DATA" && mkdir -p "$DATA"
# exec: $! is node itself (the container's PID 1 equivalent), so SIGTERM reaches it and not a wrapping shell.
(cd "$RUNTIME" && exec env -i PATH="$PATH" HOME="$OUT" NODE_ENV=production HOSTNAME=127.0.0.1 HOST=127.0.0.1 PORT="$PORT" \
  GATEHOUSE_DATA_DIR="$DATA" GATEHOUSE_ADMIN_TOKEN="$ADMIN_TOKEN" NEXT_MANUAL_SIG_HANDLE=true NEXT_TELEMETRY_DISABLED=1 LOG_LEVEL=info \
  node server.js >"$OUT/server.log" 2>&1) &
SERVER_PID=$!
for _ in $(seq 1 120); do
  if body="$(curl -fsS "http://127.0.0.1:$PORT/api/health" 2>/dev/null)"; then break; fi
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/server.log"; echo "the server exited" >&2; exit 1; }
  sleep 1
done
echo "   /api/health: ${body:-no answer}"
[[ "${body:-}" == *'"ok":true'* ]] || { cat "$OUT/server.log"; exit 1; }
grep -q '"msg":"database ready' "$OUT/server.log" || { cat "$OUT/server.log"; echo "no JSON start-up line (database ready)" >&2; exit 1; }
# The WAL checkpoint worker (lib/db/checkpointer.ts) must load libsql from the standalone node_modules, not fall back.
grep -q '"msg":"database ready[^"]*WAL checkpoints on a worker thread' "$OUT/server.log" || { cat "$OUT/server.log"; echo "the WAL checkpoint worker did not start in the standalone layout" >&2; exit 1; }
grep -q '"msg":"doctor: ' "$OUT/server.log" || { cat "$OUT/server.log"; echo "no doctor line at start" >&2; exit 1; }
code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/signin")"
echo "   /signin: $code"
[[ "$code" == 200 ]] || { cat "$OUT/server.log"; exit 1; }
# The Mermaid parser's worker (lib/mermaid/worker.ts) must load jsdom and mermaid from the standalone node_modules.
mermaid="$(curl -s -H "authorization: Bearer $ADMIN_TOKEN" -H 'content-type: application/json' \
  -d '{"source":"flowchart TD\n  A --> B"}' "http://127.0.0.1:$PORT/api/mermaid/validate")"
echo "   /api/mermaid/validate: $mermaid"
[[ "$mermaid" == *'"valid":true'* ]] || { cat "$OUT/server.log"; exit 1; }
! grep -q "Mermaid diagrams are parsed on the request's thread" "$OUT/server.log" || { cat "$OUT/server.log"; echo "the Mermaid worker did not start in the standalone layout" >&2; exit 1; }
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" && status=0 || status=$?
SERVER_PID=
echo "   exit status after SIGTERM: $status"
[[ "$status" == 0 ]] || { cat "$OUT/server.log"; exit 1; }
grep -q 'SIGTERM: stopping' "$OUT/server.log" || { cat "$OUT/server.log"; echo "no graceful shutdown on SIGTERM" >&2; exit 1; }
echo "OK: the Dockerfile's build steps produce a standalone server that starts, migrates, answers and stops cleanly"
