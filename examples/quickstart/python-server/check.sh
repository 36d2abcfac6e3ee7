#!/usr/bin/env bash
# The Python server quick start as written: server.py and policy.yaml copied into
# a fresh venv's folder with mcp-toolgate installed from its wheel, then
# check_client.py spawns `python server.py` over stdio and checks every answer.
set -euo pipefail
source "$(dirname "$0")/venv.sh"
here="$QS_ROOT/examples/quickstart/python-server"
mkdir "$QS_TMP/python-server"
cp "$here/server.py" "$here/policy.yaml" "$here/check_client.py" "$QS_TMP/python-server/"
cd "$QS_TMP/python-server"
"$QS_PY" check_client.py
