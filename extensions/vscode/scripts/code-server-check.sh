#!/usr/bin/env bash
# The extension inside a real VS Code host, offline: code-server (from the npm registry, installed without its install
# scripts, so no native module is built and nothing is downloaded) installs the .vsix and runs it against a demo
# Gatehouse server, all inside a network namespace that has only loopback (`unshare -n`, so needs root), and Chromium
# drives the workbench (scripts/code-server-check.mjs). Screenshots go to e2e/.artifacts/vscode/.
# Not part of CI: code-server is about 300 MB installed. Usage: npm run check:code-server (in extensions/vscode).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
node24="$root/node_modules/node/bin/node"   # code-server needs Node 24: the root's `node` devDependency
cs_dir="${CODE_SERVER_DIR:-$HOME/.cache/gatehouse-code-server}"
version=4.139.1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ ! -f "$cs_dir/node_modules/code-server/lib/vscode/node_modules/.package-lock.json" ]; then
  echo "== installing code-server@$version into $cs_dir (npm registry only, --ignore-scripts)"
  mkdir -p "$cs_dir" && cd "$cs_dir"
  [ -f package.json ] || echo '{"name":"gatehouse-code-server","private":true}' > package.json
  npm install --no-audit --no-fund --ignore-scripts "code-server@$version"
  (cd node_modules/code-server/lib/vscode && npm install --omit=dev --no-audit --no-fund --ignore-scripts)
fi
[ -f "$here/gatehouse-vscode.vsix" ] || (cd "$here" && npm run package)

mkdir -p "$work/ext" "$work/data/User" "$work/folder"
cat > "$work/inside.sh" <<INSIDE
set -euo pipefail
ip link set lo up
cs="$node24 $cs_dir/node_modules/code-server/out/node/entry.js --extensions-dir $work/ext --user-data-dir $work/data"
\$cs --install-extension "$here/gatehouse-vscode.vsix" 2>&1 | grep -v spdlog | tail -2
cd "$root"
DEMO_LATER_RUN_MS=45000 "$node24" node_modules/.bin/tsx tests/vscode/demo-server.ts > "$work/demo.log" 2>&1 &
demo=\$!
for i in \$(seq 90); do grep -q '^{' "$work/demo.log" && break; sleep 1; done
url=\$(grep '^{' "$work/demo.log" | sed 's/.*"url":"\([^"]*\)".*/\1/')
printf '{"gatehouse.serverUrl": "%s", "gatehouse.refreshSeconds": 5, "workbench.startupEditor": "none", "security.workspace.trust.enabled": false, "telemetry.telemetryLevel": "off", "extensions.autoCheckUpdates": false, "chat.disableAIFeatures": true}\n' "\$url" > "$work/data/User/settings.json"
\$cs --auth none --bind-addr 127.0.0.1:8123 --disable-telemetry --disable-update-check --disable-workspace-trust "$work/folder" > "$work/code-server.log" 2>&1 &
code=\$!
for i in \$(seq 90); do curl -s -o /dev/null http://127.0.0.1:8123/healthz && break; sleep 1; done
status=0
DEMO_LOG="$work/demo.log" WORKBENCH_URL="http://127.0.0.1:8123/?folder=$work/folder" "$node24" "$here/scripts/code-server-check.mjs" || status=\$?
kill \$code \$demo 2>/dev/null || true
exit \$status
INSIDE
unshare -n bash "$work/inside.sh"
