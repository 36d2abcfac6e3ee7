#!/usr/bin/env bash
# Prepares the Node benchmark (idempotent, quiet):
#   1. bench/node: `npm ci` from the committed lock file (@cedar-policy/cedar-wasm, pinned)
#      when node_modules is missing or older than the lock file;
#   2. toolgate as users get it: `npm pack` of bindings-js (after its own `npm run build`),
#      installed into bench/node/node_modules (--no-save) when the tarball changed;
#   3. the floor: target/bench/node-floor (bench/node/floor.mjs; needs target/bench/floor.wasm).
# Then: node bench/node/bench.mjs --data target/bench-data [--quick|--smoke] [--json OUT]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
npm_q=(--no-audit --no-fund --loglevel=error)

# 1. Cedar (and nothing else) from the lock file.
if [[ ! -f "$here/node_modules/.package-lock.json" || "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]]; then
  (cd "$here" && npm ci "${npm_q[@]}" >/dev/null)
fi

# 2. The toolgate npm package, packed from bindings-js.
if [[ ! -d "$repo/bindings-js/node_modules" ]]; then
  (cd "$repo/bindings-js" && npm ci "${npm_q[@]}" >/dev/null)
fi
# bindings-js's own build rule: gen/ from $TOOLGATE_COMPONENT, else ../dist/toolgate_policy.wasm
# when it is newer than the engine sources (bench/run builds it first), else cargo; a no-op
# when gen/ is up to date. Its log is shown only when it fails.
if ! log="$(cd "$repo/bindings-js" && npm run --silent build 2>&1)"; then
  printf '%s\n' "$log" >&2
  exit 1
fi
pack="$repo/target/bench/npm"
mkdir -p "$pack"
tarball="$pack/$(cd "$repo/bindings-js" && npm pack --silent --pack-destination "$pack" | tail -n 1)"
sum="$(sha256sum "$tarball" | cut -d' ' -f1)"
stamp="$here/node_modules/toolgate/.bench-tarball-sha256"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$sum" ]]; then
  (cd "$here" && npm install --no-save "${npm_q[@]}" "$tarball" >/dev/null)
  echo "$sum" > "$stamp"
fi

# 3. The floor, transpiled through bindings-js's build script.
if [[ ! -f "$repo/target/bench/floor.wasm" ]]; then
  (cd "$repo" && cargo run --release -q --bin component-build -- --package toolgate-floor target/bench/floor.wasm)
fi
node "$here/floor.mjs"
