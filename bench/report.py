#!/usr/bin/env python3
"""Merges the per-runtime benchmark results into one table, the `ratio` lines
scripts read, the scale and start-up figures, and an SVG chart.

The `load` and `cold` lines are the harnesses' own (`bench rust`, bench/node,
bench/python print them); this report shows the figures behind them from their
JSON (`toolgate_ready_ns` / `cedar_ready_ns` per scale, `cold`), as ratios. The
Rust JSON has the ready figures of rust-native and rust-wasmtime (not the fuel
line's), and its cold start under `start` (`cold_cli_ms`). The chart plots time
per decision and ready to decide against catalog size.

Usage: bench/report.py RESULTS.json... [--svg OUT.svg]

Standard library only: it runs before any virtualenv exists.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

RUNTIMES = ["rust-native", "rust-wasmtime", "node", "python"]
TARGETS = {"rust-native": 0.3, "rust-wasmtime": 0.5, "node": 0.1, "python": 0.5}
SEED = "34"


def load(paths: list[str]) -> dict[str, dict[str, Any]]:
    by_runtime: dict[str, dict[str, Any]] = {}
    for path in paths:
        data = json.loads(Path(path).read_text())
        for entry in data if isinstance(data, list) else [data]:
            by_runtime[entry["runtime"]] = entry
    return by_runtime


def fmt_ns(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def table(results: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "Per decision, seed catalog (34 tools), mix of 8 calls; median of rounds, ns:",
        (
            f"{'runtime':<14} {'toolgate':>10} {'cedar':>10} {'ratio':>7} {'target':>7}"
            f" {'floor':>8} {'tg/floor':>8} {'tg-structural':>14} {'cedar-authorize':>16}"
        ),
    ]
    ratio_lines = []
    for runtime in RUNTIMES:
        entry = results.get(runtime)
        if not entry:
            continue
        seed = entry["scales"][SEED]
        toolgate, cedar = seed["toolgate_ns"], seed["cedar_ns"]
        floor = seed.get("floor_ns")
        ratio = toolgate / cedar
        lines.append(
            f"{runtime:<14} {fmt_ns(toolgate):>10} {fmt_ns(cedar):>10} {ratio:>7.3f} {TARGETS[runtime]:>7.2f}"
            f" {fmt_ns(floor):>8} {(toolgate / floor if floor else float('nan')):>8.2f}"
            f" {fmt_ns(seed.get('toolgate_structural_ns')):>14} {fmt_ns(seed.get('cedar_authorize_ns')):>16}"
        )
        ratio_lines.append(f"ratio {runtime} {toolgate:.0f} {cedar:.0f} {ratio:.3f}")
    lines.append("")
    for runtime in RUNTIMES:
        if runtime in results:
            lines.append(f"  {runtime}: Cedar = {results[runtime].get('peer', '?')}")
    return [*lines, "", *ratio_lines]


def scale(results: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["", "Scale: ns per decision by catalog size (toolgate | cedar):"]
    sizes = sorted({int(s) for e in results.values() for s in e["scales"]})
    lines.append(f"{'runtime':<14}" + "".join(f" {n:>24,}" for n in sizes) + f" {'tg 10k/34':>10}")
    for runtime in RUNTIMES:
        entry = results.get(runtime)
        if not entry:
            continue
        row = f"{runtime:<14}"
        for n in sizes:
            figures = entry["scales"].get(str(n))
            cell = fmt_ns(figures["toolgate_ns"]) + " | " + fmt_ns(figures["cedar_ns"]) if figures else "-"
            row += f" {cell:>24}"
        first, last = entry["scales"].get(str(sizes[0])), entry["scales"].get(str(sizes[-1]))
        if first and last:
            row += f" {last['toolgate_ns'] / first['toolgate_ns']:>10.2f}"
        lines.append(row)
    lines.append("")
    lines.append("Rule-set load, ms (toolgate | cedar where measured):")
    for runtime in RUNTIMES:
        entry = results.get(runtime)
        if not entry:
            continue
        cells = []
        for n in sizes:
            figures = entry["scales"].get(str(n), {})
            tg = figures.get("toolgate_load_ms")
            cd = figures.get("cedar_load_ms")
            cells.append(f"{n}: {tg:.2f}" if tg is not None else f"{n}: -")
            if cd is not None:
                cells[-1] += f" | {cd:.2f}"
        lines.append(f"  {runtime:<14} " + ", ".join(cells))
    return lines


def start(results: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["", "Start-up:"]
    for runtime in RUNTIMES:
        entry = results.get(runtime)
        if entry and entry.get("start"):
            pretty = ", ".join(
                f"{k}={v:,.2f}" if isinstance(v, float) else f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}"
                for k, v in entry["start"].items()
            )
            lines.append(f"  {runtime}: {pretty}")
    return lines


def ready_and_cold(results: dict[str, dict[str, Any]]) -> list[str]:
    """Ready to decide (load + the first decision on every tool) against Cedar's
    load, and the cold start against the bare interpreter, where the JSON has them."""
    ready: list[str] = []
    for runtime in RUNTIMES:
        entry = results.get(runtime)
        if not entry:
            continue
        cells = []
        for n, figures in sorted(entry["scales"].items(), key=lambda kv: int(kv[0])):
            tg, cd = figures.get("toolgate_ready_ns"), figures.get("cedar_ready_ns")
            if tg is not None and cd:
                cells.append(f"{int(n):,}: {tg / 1e6:.2f} | {cd / 1e6:.2f} ({tg / cd:.2f}x)")
        if cells:
            ready.append(f"  {runtime:<14} " + ", ".join(cells))
        elif runtime.startswith("rust-"):
            ready.append(f"  {runtime:<14} (the `load {runtime}` lines of `bench rust`)")
    cold: list[str] = []
    for runtime in RUNTIMES:
        figures = (results.get(runtime) or {}).get("cold")
        if not figures:
            continue
        line = f"  {runtime:<14} {figures['toolgate_ms']:.1f} (bare interpreter {figures['bare_ms']:.1f}"
        if figures.get("bare_ms"):
            line += f", {figures['toolgate_ms'] / figures['bare_ms']:.1f}x"
        line += f"; median of {figures.get('runs', '?')})"
        if figures.get("phases_ms"):
            line += "; in the child: " + ", ".join(f"{k} {v:.1f}" for k, v in figures["phases_ms"].items())
        cold.append(line)
    lines: list[str] = []
    if any(not line.endswith("`bench rust`)") for line in ready):
        lines += ["", "Ready to decide: load + the first decision on every tool, ms (toolgate | Cedar's load, ratio):"]
        lines += ready
    if cold:
        lines += ["", "Cold start: a fresh process to the first decision on the seed catalog, ms:"]
        lines += cold
    return lines


def time_label(ns: float) -> str:
    """A tick label for a time in ns, in the largest unit it reaches."""
    for unit, size in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= size:
            return f"{ns / size:g} {unit}"
    return f"{ns:g} ns"


def panel(
    results: dict[str, dict[str, Any]],
    keys: tuple[str, str],
    titles: list[str],
    label: Callable[[float], str],
) -> list[str]:
    """One log-log panel of `keys` (toolgate, Cedar) against catalog size,
    toolgate solid and Cedar dashed, one colour per runtime; [] when no runtime
    has either figure at any size. Drawn from (0, 0): the caller places it."""
    colours = {"rust-native": "#1b7837", "rust-wasmtime": "#2166ac", "node": "#b2182b", "python": "#762a83"}
    width, height, left, right, bottom = 760, 440, 70, 190, 50
    top = 30 + 16 * (len(titles) - 1)
    shown = {r: e for r, e in results.items() if any(f.get(k) for f in e["scales"].values() for k in keys)}
    sizes = sorted({int(n) for e in shown.values() for n, f in e["scales"].items() if any(f.get(k) for k in keys)})
    values = [f[k] for e in shown.values() for f in e["scales"].values() for k in keys if f.get(k)]
    if not sizes or not values:
        return []

    lo, hi = math.log10(min(values) / 1.5), math.log10(max(values) * 1.5)
    xs_lo, xs_hi = math.log10(sizes[0]), math.log10(sizes[-1])

    def x(n: int) -> float:
        span = xs_hi - xs_lo or 1
        return left + (math.log10(n) - xs_lo) / span * (width - left - right)

    def y(ns: float) -> float:
        return top + (hi - math.log10(ns)) / (hi - lo) * (height - top - bottom)

    out = [f"<text x='{left}' y='{18 + 16 * i}' font-size='14'>{title}</text>" for i, title in enumerate(titles)]
    for exp in range(math.floor(lo), math.ceil(hi) + 1):
        for mult in (1, 2, 5):
            ns = mult * 10**exp
            if lo <= math.log10(ns) <= hi:
                yy = y(ns)
                out.append(f"<line x1='{left}' x2='{width - right}' y1='{yy:.1f}' y2='{yy:.1f}' stroke='#ddd'/>")
                out.append(f"<text x='{left - 6}' y='{yy + 4:.1f}' text-anchor='end'>{label(ns)}</text>")
    for n in sizes:
        xx = x(n)
        out.append(f"<line x1='{xx:.1f}' x2='{xx:.1f}' y1='{top}' y2='{height - bottom}' stroke='#ddd'/>")
        out.append(f"<text x='{xx:.1f}' y='{height - bottom + 18}' text-anchor='middle'>{n:,} tools</text>")
    legend_y = top + 10
    for runtime in RUNTIMES:
        entry = shown.get(runtime)
        if not entry:
            continue
        colour = colours[runtime]
        for key, dash in ((keys[0], ""), (keys[1], " stroke-dasharray='6 4'")):
            points = [(int(n), f[key]) for n, f in entry["scales"].items() if f.get(key)]
            if not points:
                continue
            points.sort()
            path = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in points)
            out.append(f"<polyline points='{path}' fill='none' stroke='{colour}' stroke-width='2'{dash}/>")
            for n, v in points:
                out.append(f"<circle cx='{x(n):.1f}' cy='{y(v):.1f}' r='3' fill='{colour}'/>")
        lx = width - right + 15
        for name, dash in (("toolgate", ""), ("Cedar", " stroke-dasharray='6 4'")):
            out.append(
                f"<line x1='{lx}' x2='{lx + 22}' y1='{legend_y}' y2='{legend_y}'"
                f" stroke='{colour}' stroke-width='2'{dash}/>"
            )
            out.append(f"<text x='{lx + 28}' y='{legend_y + 4}'>{runtime} {name}</text>")
            legend_y += 18
        legend_y += 6
    return out


def svg(results: dict[str, dict[str, Any]]) -> str:
    """Two log-log panels against catalog size, one colour per runtime, toolgate
    solid and Cedar dashed: time per decision (Cedar's decision), and ready to
    decide, that is load + the first decision on every tool (Cedar's load). A
    panel with no figures in the JSON (an old Rust JSON, say) is left out."""
    width, height = 760, 440
    panels = [
        panel(
            results,
            ("toolgate_ns", "cedar_ns"),
            ["ns per decision vs catalog size (log-log): toolgate solid, Cedar dashed"],
            lambda ns: f"{ns / 1000:g} µs" if ns >= 1000 else f"{ns:g} ns",
        ),
        panel(
            results,
            ("toolgate_ready_ns", "cedar_ready_ns"),
            [
                "ready to decide vs catalog size (log-log): toolgate solid, Cedar's load dashed",
                "toolgate: load + the first decision on every tool; Cedar: its load of the same rules",
            ],
            time_label,
        ),
    ]
    panels = [p for p in panels if p]
    if not panels:
        return "<svg xmlns='http://www.w3.org/2000/svg'/>"
    total = height * len(panels)
    out = [
        (
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{total}'"
            " font-family='sans-serif' font-size='12'>"
        ),
        f"<rect width='{width}' height='{total}' fill='white'/>",
    ]
    for i, drawn in enumerate(panels):
        out.append(f"<g transform='translate(0,{height * i})'>")
        out += drawn
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    svg_out = None
    if "--svg" in argv:
        at = argv.index("--svg")
        svg_out = argv[at + 1]
        argv = argv[:at] + argv[at + 2 :]
    results = load(argv)
    if not results:
        print("no results", file=sys.stderr)
        return 1
    print("\n".join(table(results) + scale(results) + start(results) + ready_and_cold(results)))
    if svg_out:
        Path(svg_out).write_text(svg(results))
        print(f"\nchart: {svg_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
