#!/usr/bin/env bash
# bindings-py's whole test run, from a fresh clone:
#   own virtual environment (python3 -m venv), pinned deps from requirements-dev.lock,
#   a wheel built from this folder (the build hook ships ../dist/toolgate_policy.wasm,
#   building it with `cargo run -q -p component-build` when missing), installed,
#   then ruff (lint + format check) and pytest on the installed package.
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
"$VENV/bin/python" -m pytest -p no:cacheprovider -q "$@"
