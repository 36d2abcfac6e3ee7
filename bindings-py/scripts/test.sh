#!/usr/bin/env bash
# bindings-py's whole test run, from a fresh clone:
#   own virtual environment (python3 -m venv), pinned deps from requirements-dev.lock,
#   a wheel built from this folder (the build hook ships ../dist/toolgate_policy.wasm,
#   building it with `cargo run -q --bin component-build` when missing), installed,
#   then ruff (lint + format check) and pytest on the installed package; the
#   middleware again on mcp 2.x (requirements-mcp2.lock); scripts/test-wheel.sh
#   (the packed wheels, end to end) when target/release/toolgate is built.
# TOOLGATE_PY_FASTPATH=0 runs the component through wasmtime-py's public API only
# (=unverified: the fast path on a wasmtime major not yet verified; README, wasmtime versions).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TOOLGATE_PY_VENV:-$HERE/.venv-test}"
PYTHON="${PYTHON:-python3}"

cd "$HERE"
echo "== bindings-py: venv at $VENV ($("$PYTHON" --version))"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -r requirements-dev.lock

echo "== bindings-py: wheel"
rm -rf "$HERE/build/wheel"
"$VENV/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$HERE/build/wheel" "$HERE"
WHEEL="$(ls "$HERE"/build/wheel/mcp_toolgate-*.whl)"
"$VENV/bin/python" -m pip install -q --no-deps --force-reinstall "$WHEEL"
"$VENV/bin/python" -c 'import zipfile,sys; n=zipfile.ZipFile(sys.argv[1]).namelist(); assert "mcp_toolgate/toolgate_policy.wasm" in n, n; print("wheel:", sys.argv[1], "carries the component")' "$WHEEL"

echo "== bindings-py: ruff"
"$VENV/bin/ruff" check src tests scripts examples hatch_build.py
"$VENV/bin/ruff" format --check src tests scripts examples hatch_build.py

echo "== bindings-py: pytest"
# Native code for the component is cached per run inside the venv.
export TOOLGATE_CACHE_DIR="$VENV/cache"
cd "$HERE"
# One worker per core (pytest-xdist): the suite is mostly subprocesses and wasm; 204 s -> 114 s here.
"$VENV/bin/python" -m pytest -p no:cacheprovider -q -n auto "$@"
# (tests/test_middleware_mcp2.py skips here: mcp 1.x; it runs below in the mcp 2.x venv.)

echo "== bindings-py: the middleware on mcp 2.x (own venv from requirements-mcp2.lock)"
VENV2="${TOOLGATE_PY_VENV_MCP2:-$HERE/.venv-mcp2}"
rm -rf "$VENV2"
"$PYTHON" -m venv "$VENV2"
"$VENV2/bin/python" -m pip install -q --upgrade pip
"$VENV2/bin/python" -m pip install -q -r requirements-mcp2.lock
"$VENV2/bin/python" -m pip install -q --no-deps --force-reinstall "$WHEEL"
"$VENV2/bin/python" -m pytest -p no:cacheprovider -q tests/test_middleware_mcp2.py

# The packed artifacts (platform wheel with the native CLI, pure wheel, uvx),
# when the Rust CLI is built (TOOLGATE_REQUIRE_RUST_CLI=1: required).
RUST_CLI="${TOOLGATE_RUST_CLI:-$HERE/../target/release/toolgate}"
if [ -x "$RUST_CLI" ]; then
  bash "$HERE/scripts/test-wheel.sh" "$RUST_CLI"
elif [ "${TOOLGATE_REQUIRE_RUST_CLI:-}" = "1" ]; then
  echo "TOOLGATE_REQUIRE_RUST_CLI=1 but $RUST_CLI is not built" >&2
  exit 1
else
  echo "== bindings-py: test-wheel.sh skipped ($RUST_CLI is not built)"
fi
