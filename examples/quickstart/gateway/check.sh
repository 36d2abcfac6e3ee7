#!/usr/bin/env bash
# The test of the gateway quick start: runs quickstart.sh exactly as written (with
# `toolgate` on PATH, in an empty temporary folder), checks the policy it wrote, then
# drives the proxy command it gave the client with the MCP SDK's real Client (client.mjs).
#
#   bash examples/quickstart/gateway/check.sh [/path/to/toolgate]   (default: target/release/toolgate)
#
# Needs Node and the npm registry (the SDK, the filesystem server). Exits non-zero on failure.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BINARY="$(realpath "${1:-$HERE/../../../target/release/toolgate}")"
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[[ -x "$BINARY" ]] || fail "$BINARY is not an executable (build it: cargo build --release -p toolgate-cli)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-quickstart-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/bin" "$WORK/run"
ln -s "$BINARY" "$WORK/bin/toolgate"
export PATH="$WORK/bin:$PATH"
export DIR="$WORK/files"

echo "== the MCP SDK for the client (npm ci in $HERE)"
(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)

echo "== quickstart.sh (in $WORK/run, DIR=$DIR)"
(cd "$WORK/run" && bash "$HERE/quickstart.sh") || fail "quickstart.sh failed"
POLICY="$WORK/run/tool_policies.yaml"
[[ -s "$POLICY" ]] || fail "quickstart.sh wrote no tool_policies.yaml"
# Each write tool's entry (its lines up to the next tool) says require_confirmation: true.
for tool in write_file edit_file move_file create_directory; do
  awk -v t="  \"$tool\":" '$0 == t { on = 1; next } /^  [^ ]/ { on = 0 } on' "$POLICY" \
    | grep -qx '    require_confirmation: true' || fail "tool_policies.yaml does not mark $tool require_confirmation: true"
done
ok "tool_policies.yaml written; write_file, edit_file, move_file, create_directory need confirmation"
[[ -s "$WORK/run/mcp.json" ]] || fail "quickstart.sh wrote no mcp.json"

echo "== the client starts the proxy from mcp.json"
printf 'hello from the quick start\n' > "$DIR/hello.txt"
(cd "$WORK/run" && node "$HERE/client.mjs" "$WORK/run/mcp.json" "$DIR") || fail "client.mjs"
ok "gateway quick start"
