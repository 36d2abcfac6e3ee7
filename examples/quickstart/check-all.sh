#!/usr/bin/env bash
# Every quick start of the README, as written: first that each code block the
# README shows under a `<!-- quickstart: FILE -->` marker is really in FILE
# (line for line, indentation aside, so the README cannot drift from what is tested), then each
# quick start's own check.sh, which installs what a user would install (the
# packed npm package, a built wheel, the workspace's binaries) into a clean
# temporary directory and runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 - README.md <<'PY'
import pathlib, re, sys
readme = pathlib.Path(sys.argv[1]).read_text()
blocks = re.findall(r"<!-- quickstart: (\S+) -->\n```[a-z]*\n(.*?)```", readme, re.S)
if len(blocks) < 5:
    sys.exit(f"README.md: {len(blocks)} quick-start blocks, expected one per audience (5)")
for path, block in blocks:
    # Indentation aside: the README shows lines out of their blocks.
    lines = {line.strip() for line in pathlib.Path(path).read_text().splitlines()}
    for line in block.splitlines():
        if line.strip() and line.strip() not in lines:
            sys.exit(f"README.md: a line of the quick start for {path} is not in that file:\n  {line}")
    print(f"README quick start matches {path}")
PY
for quickstart in gateway node-server python-server python-agent rust-host; do
  printf '\n--- quick start: %s\n' "$quickstart"
  bash "examples/quickstart/$quickstart/check.sh"
done
