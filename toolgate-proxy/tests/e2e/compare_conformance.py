"""Compares two conformance runs' summaries (the logs of `conformance server`):
every scenario that passes directly must pass through the proxy.
Usage: compare_conformance.py DIRECT_LOG PROXY_LOG"""

import re
import sys

LINE = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed$")


def summary(path):
    text = open(path, encoding="utf-8").read()
    if "=== SUMMARY ===" not in text:
        sys.exit(f"{path}: no summary (the suite did not finish)")
    out = {}
    for line in text.split("=== SUMMARY ===", 1)[1].splitlines():
        m = LINE.match(line.strip())
        if m:
            out[m.group(2)] = m.group(1) == "✓"
    return out


direct, proxied = summary(sys.argv[1]), summary(sys.argv[2])
if not direct:
    sys.exit("no scenarios ran directly")
passing = sorted(s for s, ok in direct.items() if ok)
if not passing:
    sys.exit("no scenario passes directly against the reference server: nothing to compare")
regressions = [s for s in passing if not proxied.get(s, False)]
for s in passing:
    print(("ok   " if s not in regressions else "FAIL ") + f"conformance {s}: passes directly and through the proxy")
print(f"(directly: {len(passing)} of {len(direct)} scenarios pass against the reference server)")
print(f"{len(passing) - len(regressions)} passed, {len(regressions)} failed")
sys.exit(1 if regressions else 0)
