#!/usr/bin/env bash
# The bindings-js test command, from a fresh clone:
#   install (npm ci, from the committed lock file), build (the component via
#   cargo when ../dist has none or an older one, then jco into gen/), lint
#   (tsc --noEmit on the types, the CLI and a typed usage file), and every
#   test: vectors in Node and in workerd, CLI, host faults and trap, MCP over
#   stdio, pack-and-install; then, when the native CLI is built
#   ($TOOLGATE_RUST_CLI, else ../target/release/toolgate), the packed-artifact
#   test (scripts/test-packed.sh: both tarballs installed, `npx toolgate proxy`
#   in front of server-filesystem, driven by the SDK's Client; needs the npm
#   registry).
# TOOLGATE_NO_INSTALL=1 skips `npm ci` (a dev loop with node_modules already there).
# TOOLGATE_REQUIRE_RUST_CLI=1 makes a missing native CLI a failure (else the packed test is skipped).
# TOOLGATE_SKIP_PACKED=1 skips the packed-artifact test.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${TOOLGATE_NO_INSTALL:-}" != "1" || ! -d node_modules ]]; then
  npm ci --no-audit --no-fund
fi
npm run --silent build
npm run --silent lint
# Node runs cores - 1 test files at a time by default: one on a 2-core
# machine, where the files mostly wait on child processes (2.5 -> 1.5 min here).
node --test --test-concurrency="$(nproc)" test/*.test.mjs

if [[ "${TOOLGATE_SKIP_PACKED:-}" == "1" ]]; then
  echo "bindings-js: packed-artifact test skipped (TOOLGATE_SKIP_PACKED=1)"
else
  NATIVE="${TOOLGATE_RUST_CLI:-../target/release/toolgate}"
  if [[ -x "$NATIVE" ]]; then
    bash scripts/test-packed.sh "$NATIVE"
  elif [[ "${TOOLGATE_REQUIRE_RUST_CLI:-}" == "1" ]]; then
    echo "bindings-js: $NATIVE is not built (TOOLGATE_REQUIRE_RUST_CLI=1): cannot run the packed-artifact test" >&2
    exit 1
  else
    echo "bindings-js: packed-artifact test skipped: $NATIVE is not built"
  fi
fi
