#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance) run
# against @modelcontextprotocol/server-everything over Streamable HTTP, first
# directly, then through `toolgate proxy --listen … --upstream URL` with a
# policy that allows every call. Fails if any scenario that passes directly
# fails through the proxy.
# Usage: conformance.sh PROXY_BIN NODE_BIN
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROXY="$1"
NODE="$2"
OUT="$HERE/results"
rm -rf "$OUT"
mkdir -p "$OUT/direct" "$OUT/proxy"
SERVER_PORT="${CONFORMANCE_SERVER_PORT:-38431}"
PROXY_PORT="${CONFORMANCE_PROXY_PORT:-38432}"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

wait_port() {
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listening on port $1" >&2
  return 1
}

PORT="$SERVER_PORT" "$NODE" "$HERE/node_modules/@modelcontextprotocol/server-everything/dist/index.js" streamableHttp \
  >"$OUT/server.log" 2>&1 &
PIDS+=($!)
wait_port "$SERVER_PORT"

# Allow everything: the defaults cover read tools; a tool whose catalog hint
# says it writes needs confirmation unless its own entry opts out (SPEC §2:
# hints only tighten), so every tool of the pinned server-everything (read
# from its tool modules) gets one.
{
  printf 'version: 1\ndefaults:\n  operation_type: read_only\n  require_confirmation: false\ntool_policies:\n'
  sed -n 's/^const name = "\([^"]*\)";$/  \1: { require_confirmation: false }/p' \
    "$HERE"/node_modules/@modelcontextprotocol/server-everything/dist/tools/*.js
} >"$OUT/allow-all.yaml"
"$PROXY" --policy "$OUT/allow-all.yaml" --listen "127.0.0.1:$PROXY_PORT" \
  --upstream "http://127.0.0.1:$SERVER_PORT/mcp" >"$OUT/proxy.log" 2>&1 &
PIDS+=($!)
wait_port "$PROXY_PORT"

conformance() {
  "$NODE" "$HERE/node_modules/@modelcontextprotocol/conformance/dist/index.js" server --url "$1" \
    --output-dir "$2" >"$2.log" 2>&1 || true
}
conformance "http://127.0.0.1:$SERVER_PORT/mcp" "$OUT/direct"
conformance "http://127.0.0.1:$PROXY_PORT/mcp" "$OUT/proxy"

python3 "$HERE/compare_conformance.py" "$OUT/direct.log" "$OUT/proxy.log"
