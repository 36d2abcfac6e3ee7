#!/usr/bin/env bash
# Lints the Python benchmark with bindings-py's tools and rules (ruff check and
# format), plus mypy --strict, from the venv bench/python/setup.sh makes.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/../../target/bench/py-venv"
cd "$HERE"
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/mypy" bench.py
