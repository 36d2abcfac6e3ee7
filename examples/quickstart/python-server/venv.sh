# Sourced by python-server/check.sh and python-agent/check.sh: installs the
# package as a user would, from the pure wheel built from bindings-py, into a
# fresh venv in a temporary directory, with mcp 2.3.0 and every dependency
# pinned by bindings-py/requirements-mcp2.lock (pip's cache is reused).
# Sets QS_ROOT (the checkout), QS_TMP (removed on exit) and QS_PY (the venv's python).
QS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
if [[ ! -f "$QS_ROOT/bindings-py/src/mcp_toolgate/toolgate_policy.wasm" && ! -f "$QS_ROOT/dist/toolgate_policy.wasm" ]]; then
  echo "quickstart: no component: build dist/toolgate_policy.wasm first (cargo run --bin component-build)" >&2
  exit 1
fi
QS_TMP="$(mktemp -d)"
trap 'rm -rf "$QS_TMP"' EXIT
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m pip wheel -q --no-deps -w "$QS_TMP/wheel" "$QS_ROOT/bindings-py"
"$PYTHON" -m venv "$QS_TMP/venv"
QS_PY="$QS_TMP/venv/bin/python"
"$QS_PY" -m pip install -q "$QS_TMP"/wheel/mcp_toolgate-*-py3-none-any.whl "mcp==2.3.0" \
  -c "$QS_ROOT/bindings-py/requirements-mcp2.lock"
