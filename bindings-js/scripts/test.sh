#!/usr/bin/env bash
# The bindings-js test command, from a fresh clone:
#   install (npm ci, from the committed lock file), build (the component via
#   cargo when ../dist has none or an older one, then jco into gen/), lint
#   (tsc --noEmit on the types, the CLI and a typed usage file), and every
#   test: vectors in Node and in workerd, CLI, host faults and trap, MCP over
#   stdio, pack-and-install.
# TOOLGATE_NO_INSTALL=1 skips `npm ci` (a dev loop with node_modules already there).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${TOOLGATE_NO_INSTALL:-}" != "1" || ! -d node_modules ]]; then
  npm ci --no-audit --no-fund
fi
npm run --silent build
npm run --silent lint
node --test test/*.test.mjs
