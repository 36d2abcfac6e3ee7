"""µs per decision in Python, and load time, on the seed catalog.

    python scripts/bench.py [--n 20000]

A benchmark, not a test. Prints: component compile (cold, no cache) and cached
start-up, rule-set load, and per-decision cost for the raw bytes API
(`evaluate_json`) and the typed API (`evaluate` -> Decision).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
CATALOG = HERE.parent / "tests" / "vectors" / "fixtures" / "seed-catalog.json"
if not CATALOG.is_file():
    CATALOG = HERE / "tests" / "data" / "seed-catalog.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TOOLGATE_CACHE_DIR"] = cache
        from mcp_toolgate import Context, RuleSet, _fastpath, _runtime

        wasm = _runtime.component_path().read_bytes()
        t = time.perf_counter()
        _runtime.Runtime(wasm)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        rt = _runtime.Runtime(wasm)
        cached = time.perf_counter() - t
        _runtime._RUNTIMES[_runtime.component_path()] = rt

    catalog = CATALOG.read_text(encoding="utf-8")
    tools = json.loads(catalog)["tools"]
    t = time.perf_counter()
    rules = RuleSet.load(catalog=catalog)
    load = time.perf_counter() - t

    ctx = Context(scopes=["mcp:read", "mcp:write"])
    ctx_json = ctx.to_json()
    read_tool = next(
        t["name"] for t in tools if t.get("effect") == "read" and not t.get("inputSchema", {}).get("required")
    )
    calls = {
        "allowed read": {"name": read_tool, "arguments": {}},
        "unknown tool": {"name": "does_not_exist", "arguments": {}},
    }
    print(f"python {sys.version.split()[0]}, seed catalog: {len(tools)} tools ({CATALOG.name})")
    path, why = _runtime.call_path()
    print(f"wasmtime {_fastpath.wasmtime_version()}, the {path} path" + (f" ({why})" if why else ""))
    print(f"component compile (cold): {cold * 1000:.0f} ms; from the native-code cache: {cached * 1000:.0f} ms")
    t = time.perf_counter()
    RuleSet.load(catalog=catalog)
    load2 = time.perf_counter() - t
    print(
        f"rule-set load (instantiate + contract check + load): {load * 1000:.1f} ms first, {load2 * 1000:.1f} ms next"
    )
    for label, call in calls.items():
        raw = json.dumps(call).encode()
        for _ in range(200):
            rules.evaluate_json(raw, ctx_json)
        samples = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(args.n // 5):
                rules.evaluate_json(raw, ctx_json)
            samples.append((time.perf_counter() - t) / (args.n // 5) * 1e6)
        typed = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(args.n // 5):
                rules.evaluate(call, context=ctx)
            typed.append((time.perf_counter() - t) / (args.n // 5) * 1e6)
        code = rules.evaluate(call, context=ctx).code
        print(
            f"{label:>13} ({code or 'allowed'}): evaluate_json {statistics.median(samples):.1f} µs/decision, "
            f"evaluate -> Decision {statistics.median(typed):.1f} µs/decision"
        )


if __name__ == "__main__":
    main()
