#!/usr/bin/env bash
# The test of the MCP server author's quick start: packs `toolgate` from bindings-js
# (npm pack, as published), installs that tarball with the SDK and zod into a copy of
# this folder in an empty temporary directory, the way a user would, then runs client.mjs:
# the SDK's real Client starts `node server.mjs` over stdio and checks what guardServer
# lets through.
#
#   bash examples/quickstart/node-server/check.sh
#
# Needs bindings-js built (gen/: `bash bindings-js/scripts/test.sh`) and the npm registry.
# Exits non-zero on failure.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JS="$(cd "$HERE/../../../bindings-js" && pwd)"
SDK_VERSION=1.32.2
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[[ -f "$JS/gen/toolgate_policy.js" ]] \
  || fail "bindings-js is not built: $JS/gen/toolgate_policy.js is missing (run: bash bindings-js/scripts/test.sh)"
ZOD_VERSION="$(node -p 'require(process.argv[1]).packages["node_modules/zod"].version' "$JS/package-lock.json")"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-quickstart-node-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

echo "== npm pack toolgate ($JS)"
TGZ="$WORK/$(cd "$JS" && npm pack --silent --pack-destination "$WORK" | tail -n1)"
[[ -f "$TGZ" ]] || fail "npm pack wrote no tarball"
ok "packed $(basename "$TGZ")"

echo "== install the quick start: $(basename "$TGZ") @modelcontextprotocol/sdk@$SDK_VERSION zod@$ZOD_VERSION"
mkdir "$WORK/app"
cp "$HERE/server.mjs" "$HERE/policy.yaml" "$HERE/package.json" "$HERE/client.mjs" "$WORK/app/"
cd "$WORK/app"
npm install --no-audit --no-fund --loglevel=error "$TGZ" "@modelcontextprotocol/sdk@$SDK_VERSION" "zod@$ZOD_VERSION" >/dev/null
rm -f "$TGZ"   # nothing from the packing is left to lean on
ok "installed toolgate $(node -p 'require("toolgate/package.json").version') from the tarball"

echo "== the SDK's Client starts node server.mjs"
node client.mjs || fail "client.mjs"
ok "node server quick start"
