#!/usr/bin/env bash
# Lints the Python benchmark and bench/'s own scripts (the report, the profile
# grouping) with bindings-py's tools and rules (ruff check and format), plus
# mypy --strict, from the venv bench/python/setup.sh makes.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/../../target/bench/py-venv"
cd "$HERE"
"$VENV/bin/ruff" check . ../report.py ../perf-callers.py
"$VENV/bin/ruff" format --check . ../report.py ../perf-callers.py
"$VENV/bin/mypy" bench.py ../report.py ../perf-callers.py
