#!/usr/bin/env python3
"""Where a function's time goes, from a `perf record -g` profile.

`perf report` splits a profile by leaf function, which scatters a load or a
decision of the component over hundreds of allocator, hashing and copying
leaves. This groups the samples under a function by what it called: for every
sample whose stack passes through FUNCTION (matched as a substring of the
symbol, so a mangled Rust name works), the frame DEPTH levels below its
outermost occurrence is counted, as a share of those samples.
`--leaves` adds the leaf functions under FUNCTION and every function under it
counted once per sample (inclusive shares).

Usage:
  perf script -i perf.data -F ip,sym > stacks.txt
  bench/perf-callers.py stacks.txt FUNCTION [--depth N] [--top N] [--leaves]

How the profiles in docs/performance.md were taken (names kept, wasmtime
writing /tmp/perf-PID.map):
  CARGO_PROFILE_GUEST_STRIP=none target/release/component-build /tmp/named.wasm
  TOOLGATE_PERFMAP=1 perf record -g target/release/bench profile-component-load 80 \\
      --component /tmp/named.wasm --catalog target/bench-data/1000/catalog.json
  perf script -F ip,sym > stacks.txt
  bench/perf-callers.py stacks.txt Rules4load
  bench/perf-callers.py stacks.txt compile_all --leaves

Standard library only.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from collections.abc import Iterator

# A Rust legacy-mangled symbol's hash suffix, and its `_ZN` prefix: dropped so
# the names stay readable and one function is one row.
_HASH = re.compile(r"17h[0-9a-f]{16}E$")


def short(symbol: str, width: int = 150) -> str:
    """The symbol without its hash and mangling prefix, cut to `width`."""
    symbol = _HASH.sub("", symbol)
    symbol = symbol.removeprefix("_ZN")
    return symbol[:width]


def stacks(path: str) -> Iterator[list[str]]:
    """Each sample's frames, leaf first, from `perf script -F ip,sym` output."""
    frames: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            text = line.strip()
            if not text:
                if frames:
                    yield frames
                    frames = []
                continue
            # "ADDRESS SYMBOL": the symbol may itself contain spaces.
            _, _, symbol = text.partition(" ")
            frames.append(symbol or text)
    if frames:
        yield frames


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stacks", help="output of `perf script -F ip,sym`")
    parser.add_argument("function", help="a substring of the symbol to group under")
    parser.add_argument("--depth", type=int, default=1, help="levels below FUNCTION to group by (default 1)")
    parser.add_argument("--top", type=int, default=25, help="rows to print (default 25)")
    parser.add_argument("--leaves", action="store_true", help="also the leaf and inclusive shares under FUNCTION")
    args = parser.parse_args(argv)
    if args.depth < 1:
        parser.error("--depth must be at least 1")

    total = 0
    samples = 0
    callees: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    for frames in stacks(args.stacks):
        samples += 1
        hits = [i for i, frame in enumerate(frames) if args.function in frame]
        if not hits:
            continue
        total += 1
        outermost = max(hits)
        below = outermost - args.depth
        callees[short(frames[below]) if below >= 0 else "<self>"] += 1
        if args.leaves:
            leaves[short(frames[0])] += 1
            for frame in set(frames[:outermost]):
                inclusive[short(frame)] += 1

    print(f"{total} of {samples} samples pass through {args.function!r}")
    if total == 0:
        return 1

    def table(title: str, counts: collections.Counter[str]) -> None:
        print(f"--- {title}")
        for name, count in counts.most_common(args.top):
            print(f"{100 * count / total:5.1f} %  {name}")

    table(f"called {args.depth} level(s) below", callees)
    if args.leaves:
        table("leaf functions", leaves)
        table("inclusive", inclusive)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
