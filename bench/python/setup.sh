#!/usr/bin/env bash
# The Python benchmark's environment, idempotent and quiet:
#   target/bench/py-venv (python3 -m venv) with the pinned requirements.lock
#   (wasmtime as bindings-py pins it, cedarpy, hatchling, ruff, mypy), and
#   toolgate as users get it: a wheel built from bindings-py exactly as
#   bindings-py/scripts/test.sh builds it (its hatchling hook ships
#   ../dist/toolgate_policy.wasm, building it with cargo when missing), the
#   platform wheel when target/release/toolgate exists, installed into the venv.
# Re-running does nothing unless the lock, bindings-py's sources or the
# component changed. PYTHON picks the interpreter (default python3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/python"
VENV="$ROOT/target/bench/py-venv"
WHEELS="$ROOT/target/bench/py-wheel"
PYTHON="${PYTHON:-python3}"

# Each part is redone only when its inputs' hash changes.
stamp_of() { sha256sum "$@" | sha256sum | cut -c1-64; }

lock_stamp="$(stamp_of "$HERE/requirements.lock")"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.lock-stamp" 2>/dev/null)" != "$lock_stamp" ]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$HERE/requirements.lock"
  echo "$lock_stamp" >"$VENV/.lock-stamp"
  rm -f "$VENV/.wheel-stamp"
fi

# The wheel's inputs: bindings-py's package sources and build files, and the
# component the hook copies in (built by the hook when dist/ lacks it).
if [ ! -f "$ROOT/dist/toolgate_policy.wasm" ]; then
  (cd "$ROOT" && cargo run -q --bin component-build -- dist/toolgate_policy.wasm)
fi
# The platform wheel when the native binary is built (bench/run builds it), as
# a linux-x64 user gets it: it carries the component's native code, so the
# harness's `cold python` is a user's first start, not a compile.
if [ -x "$ROOT/target/release/toolgate" ]; then
  export TOOLGATE_NATIVE_BINARY="$ROOT/target/release/toolgate"
  inputs_native=(target/release/toolgate)
else
  unset TOOLGATE_NATIVE_BINARY
  inputs_native=()
fi
mapfile -t inputs < <(cd "$ROOT" && find bindings-py/src/mcp_toolgate -name '*.py' -o -name py.typed | sort)
wheel_stamp="$(cd "$ROOT" && stamp_of "${inputs[@]}" bindings-py/pyproject.toml bindings-py/hatch_build.py dist/toolgate_policy.wasm "${inputs_native[@]}")"
if [ "$(cat "$VENV/.wheel-stamp" 2>/dev/null)" != "$wheel_stamp" ]; then
  rm -rf "$WHEELS"
  "$VENV/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w "$WHEELS" "$ROOT/bindings-py"
  WHEEL="$(ls "$WHEELS"/mcp_toolgate-*.whl)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$WHEEL"
  "$VENV/bin/python" -c 'import zipfile,sys; n=zipfile.ZipFile(sys.argv[1]).namelist(); assert "mcp_toolgate/toolgate_policy.wasm" in n, n' "$WHEEL"
  echo "$wheel_stamp" >"$VENV/.wheel-stamp"
fi
