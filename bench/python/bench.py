"""toolgate's Python benchmark against Cedar, same process, same run.

    bash bench/python/setup.sh      # target/bench/py-venv: the toolgate wheel, cedarpy (requirements.lock)
    target/bench/py-venv/bin/python bench/python/bench.py --data target/bench-data [--quick|--smoke] [--json OUT]
        [--scales 34,1000,10000]
    bash bench/python/lint.sh       # ruff (bindings-py's rules) and mypy --strict

Reads the shared workload that ``target/release/bench gen DIR`` writes. Prints
ns per decision per scale and start-up costs; asserts only that the engines
agree with each other and with the mix. Most of a run's wall time is toolgate
loading the 10 000-tool catalogs (twice: full and structural), about a minute
or more each here; the timed rounds take about 1 min (default), 10 s (quick).

- toolgate: the ``toolgate`` package as users get it (a wheel built by
  bindings-py's own build). ``RuleSet.load(catalog=..., policy=...)`` once per
  scale and catalog (``catalog.json``, and ``catalog-structural.json``:
  argument-value validation off, like for like with what Cedar checks); per call
  ``RuleSet.evaluate_json(call_bytes, context_text)``, the package's documented
  raw contract and its fastest path (``evaluate`` adds building the bytes and a
  typed ``Decision``). The decision is consumed by its canonical prefix
  (``{"ok":true``), checked against ``json.loads`` for every call of the mix.
  ``load_fuel`` is raised to 1e12: the default (1e11) is not enough for the
  10 000-tool catalog (about 2e11).
- Cedar (``cedarpy``, latest 4.x), as an expert would run it: the policy set,
  the schema and the entity store parsed once into cedarpy's preloaded handles
  (``PolicySet.from_str``, ``Schema.from_str``, ``Entities.from_json_str(...,
  schema)``; the policies validated against the schema once, at start); per
  call, from the same call bytes toolgate gets, the gateway's adapter
  (``cedar_request``: parse the call, build the request as the workload's
  adapter does; checked equal to mix.json's ``cedar_request``) and
  ``cedarpy.is_authorized(request, policy_set, entities, schema=schema)`` with
  the handles, as the Rust harness's ``decide_call`` does. Passing the schema
  validates the request, which is what rejects ``confirmed: "true"`` (the
  schema types it Bool). Two ways to give the entities are timed: the
  preloaded store of the whole catalog, and only the entities the call needs
  (the Agent and the Tool, as JSON text built once per tool: mix.json's
  ``cedar_entities``); ``cedar_ns`` is the faster of the two at each scale.
- The floor: ``target/bench/floor.wasm`` (the same WIT world, no engine)
  compiled and cached by the package's own ``_runtime.Runtime``, loaded into a
  ``RuleSet`` and called through the same ``RuleSet.evaluate_json``. bindings-py
  has no public option for another component file in the same process
  (``TOOLGATE_COMPONENT`` picks the one process-wide component), so the bench
  swaps the package's private process-wide runtime while that one ``RuleSet``
  is constructed (``_floor_rules``); every later call goes through the same
  code as toolgate's.
- Before timing, every call of the mix is checked: toolgate's ``ok`` (both
  catalogs) and Cedar's decision (both ways of giving entities) must equal
  ``expect_allowed``, else exit 1.
- Timing: round-robin (toolgate, toolgate structural, Cedar store, Cedar
  per-call entities, floor, then the next round), so machine noise hits all
  alike; each contender's slice runs whole mixes for about the same wall time;
  the figure is the median over rounds of the mean ns per decision over the
  mix. The allowed count is checked every round.
- Ready to decide, per scale, as ``bench rust`` prints it for rust-native and
  rust-wasmtime: ``load python TOOLS NS CEDAR_NS RATIO``, a fresh
  ``RuleSet.load`` of policy and catalog plus the first decision on every tool
  of the catalog (``{"name":<tool>,"arguments":{}}``, so work a load defers is
  counted), against Cedar's preparation of the same rules as this harness
  counts it (``cedar_prepare_ms``: ``PolicySet``, ``Schema``, the policies
  validated, the entity store of that scale), timed again beside it.
- Cold start: ``cold python MS``, the wall time of a fresh interpreter that
  imports the installed package, compiles the component into an empty cache
  directory (``TOOLGATE_CACHE_DIR``, a new temporary directory per run, so no
  precompiled code is reused), loads the seed rules and prints one decision
  (median of 3 runs, 1 in --smoke); beside it ``cold python-bare MS``, the
  same interpreter doing nothing (``python -c pass``). Figures, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
FLOOR = ROOT / "target" / "bench" / "floor.wasm"
SCALES = ("34", "1000", "10000")
#: Enough for 10 000 tools (~2e11); the package default (1e11) is not.
LOAD_FUEL = 1_000_000_000_000
ALLOW_PREFIX = '{"ok":true'


class BenchError(Exception):
    """The engines disagree, or the workload is missing: exit 1."""


@dataclass(frozen=True)
class Budget:
    rounds: int
    #: Wall time per contender per round (whole mixes, at least `min_mixes`).
    slice_seconds: float
    min_mixes: int
    #: Fresh processes for the cold start (median).
    cold_runs: int
    #: Fresh loads per `load` line, toolgate's and Cedar's alternating (medians): single shots
    #: varied severalfold between runs.
    ready_rounds: int


BUDGETS = {
    "smoke": Budget(rounds=1, slice_seconds=0.0, min_mixes=2, cold_runs=1, ready_rounds=1),
    "quick": Budget(rounds=7, slice_seconds=0.06, min_mixes=4, cold_runs=3, ready_rounds=3),
    "default": Budget(rounds=21, slice_seconds=0.2, min_mixes=16, cold_runs=3, ready_rounds=5),
}


def ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def timed(f: Callable[[], T]) -> tuple[T, float]:
    """`f()` and the seconds it took."""
    t = time.perf_counter()
    value = f()
    return value, time.perf_counter() - t


@dataclass
class Contender:
    name: str
    #: Runs the mix `iters` times; returns how many decisions were allows.
    run: Callable[[int], int]
    #: The allowed count one mix must give.
    allowed_per_mix: int
    iters: int = 1
    samples: list[float] | None = None


def race(budget: Budget, mix_len: int, contenders: list[Contender]) -> dict[str, float]:
    """ns per decision, round-robin, median over rounds of the mean over the mix."""
    for c in contenders:  # warm up and size each slice to about the same wall time
        c.run(1)
        t = time.perf_counter()
        c.run(budget.min_mixes)
        per_mix = (time.perf_counter() - t) / budget.min_mixes
        c.iters = max(budget.min_mixes, int(budget.slice_seconds / per_mix) if per_mix > 0 else budget.min_mixes)
        c.samples = []
    gc.collect()
    for _ in range(budget.rounds):
        for c in contenders:
            t = time.perf_counter_ns()
            allowed = c.run(c.iters)
            elapsed = time.perf_counter_ns() - t
            if allowed != c.allowed_per_mix * c.iters:
                raise BenchError(f"{c.name}: {allowed} allows in {c.iters} mixes, expected {c.allowed_per_mix} a mix")
            assert c.samples is not None
            c.samples.append(elapsed / (c.iters * mix_len))
    return {c.name: statistics.median(c.samples or [float("nan")]) for c in contenders}


# -- toolgate -----------------------------------------------------------------


def toolgate_loop(rules: Any, calls: list[bytes], context: str) -> Callable[[int], int]:
    evaluate = rules.evaluate_json

    def run(iters: int) -> int:
        allowed = 0
        for _ in range(iters):
            for call in calls:
                if evaluate(call, context).startswith(ALLOW_PREFIX):
                    allowed += 1
        return allowed

    return run


@contextmanager
def _package_runtime(rt: Any) -> Iterator[None]:
    """Makes `rt` the package's runtime of its default component while the block runs."""
    from mcp_toolgate import _runtime

    key = _runtime.component_path()
    saved = _runtime._RUNTIMES.get(key)
    _runtime._RUNTIMES[key] = rt
    try:
        yield
    finally:
        if saved is None:
            _runtime._RUNTIMES.pop(key, None)
        else:
            _runtime._RUNTIMES[key] = saved


def _floor_rules(path: Path) -> tuple[Any, float]:
    """A RuleSet whose instance runs the floor component (see the module doc)."""
    from mcp_toolgate import RuleSet, _runtime

    if not path.is_file():
        raise BenchError(
            f"no floor component at {path}: build it with "
            "`cargo run --release -q --bin component-build -- --package toolgate-floor target/bench/floor.wasm`"
        )
    rt, took = timed(lambda: _runtime.Runtime(path.read_bytes()))
    with _package_runtime(rt):
        rules = RuleSet.load(catalog="[]")
    return rules, took


# -- Cedar --------------------------------------------------------------------

AGENT = {"type": "Agent", "id": "agent"}
CALL_ACTION = {"type": "Action", "id": "call"}
CONFIRMATION_FIELDS = ("confirmed", "confirmation")


def cedar_request(call: bytes) -> dict[str, Any] | None:
    """The gateway's adapter, from the same bytes toolgate gets: the Cedar
    request for an MCP call (as the workload's adapter writes it in mix.json),
    or None for a call that is not a JSON object with a string name (a deny).
    `confirmed`/`confirmation` go in as given: the schema types them Bool, so
    request validation refuses anything but a JSON boolean."""
    try:
        value = json.loads(call)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments")
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        return None
    context: dict[str, Any] = {"surface": "confirming", "args": list(arguments)}
    for field in CONFIRMATION_FIELDS:
        if field in arguments:
            context[field] = arguments[field]
    return {
        "principal": AGENT,
        "action": CALL_ACTION,
        "resource": {"type": "Tool", "id": value["name"]},
        "context": context,
    }


def entities_by_tool(entities_json: str) -> tuple[dict[str, str], str]:
    """What the call needs, per tool name: the Agent and that Tool, as the JSON
    text cedarpy takes (built once); and the Agent alone, for unknown tools."""
    entities = json.loads(entities_json)
    agents = [e for e in entities if e["uid"]["type"] == "Agent"]
    by_tool = {
        e["uid"]["id"]: json.dumps([*agents, e], separators=(",", ":")) for e in entities if e["uid"]["type"] == "Tool"
    }
    return by_tool, json.dumps(agents, separators=(",", ":"))


def always(entities: Any) -> Callable[[str], Any]:
    """The preloaded entity store of the whole catalog, for every call."""
    return lambda _tool: entities


def needed(by_tool: dict[str, str], agent_only: str) -> Callable[[str], str]:
    """Only the entities the call needs, looked up by tool name."""
    return lambda tool: by_tool.get(tool, agent_only)


@dataclass
class Cedar:
    """cedarpy's preloaded handles; per call, the adapter and one authorization."""

    policies: Any
    schema: Any

    def decide(self, call: bytes, entities_for: Callable[[str], Any]) -> bool:
        import cedarpy

        request = cedar_request(call)
        if request is None:
            return False
        entities = entities_for(request["resource"]["id"])
        return bool(cedarpy.is_authorized(request, self.policies, entities, schema=self.schema).allowed)

    def loop(self, calls: list[bytes], entities_for: Callable[[str], Any]) -> Callable[[int], int]:
        import cedarpy

        authorize, adapter = cedarpy.is_authorized, cedar_request
        policies, schema = self.policies, self.schema

        def run(iters: int) -> int:
            allowed = 0
            for _ in range(iters):
                for call in calls:
                    request = adapter(call)
                    if request is None:
                        continue
                    entities = entities_for(request["resource"]["id"])
                    if authorize(request, policies, entities, schema=schema).allowed:
                        allowed += 1
            return allowed

        return run


def toolgate_decider(rules: Any, calls: list[bytes], context: str) -> Callable[[int], bool]:
    def decide(i: int) -> bool:
        decision = rules.evaluate_json(calls[i], context)
        ok = json.loads(decision)["ok"]
        if ok != decision.startswith(ALLOW_PREFIX):
            raise BenchError(f"decision does not start with its `ok`: {decision}")
        return bool(ok)

    return decide


def cedar_decider(cedar: Cedar, calls: list[bytes], entities_for: Callable[[str], Any]) -> Callable[[int], bool]:
    return lambda i: cedar.decide(calls[i], entities_for)


# -- ready to decide, cold start -----------------------------------------------


def first_calls(catalog: str) -> list[bytes]:
    """`{"name":<tool>,"arguments":{}}` for every tool of the catalog, as `bench rust` builds them."""
    return [f'{{"name":{json.dumps(t["name"])},"arguments":{{}}}}'.encode() for t in json.loads(catalog)["tools"]]


def toolgate_ready(catalog: str, policy: str, calls: list[bytes], context: str) -> int:
    """ns from nothing to a fresh rule set that has decided once on every tool."""
    from mcp_toolgate import RuleSet
    from mcp_toolgate._faults import FAULTS

    gc.collect()
    t = time.perf_counter_ns()
    rules = RuleSet.load(catalog=catalog, policy=policy, load_fuel=LOAD_FUEL)
    decisions = [rules.evaluate_json(call, context) for call in calls]
    took = time.perf_counter_ns() - t
    faults = set(FAULTS.values())
    for call, decision in zip(calls, decisions, strict=True):
        if decision in faults or "ok" not in json.loads(decision):
            raise BenchError(f"the first decision on {call.decode()} is {decision}")
    return took


def cedar_ready(policies_text: str, schema_text: str, entities_text: str) -> int:
    """ns for Cedar's preparation of the same rules, as this harness counts it
    in `cedar_prepare_ms` (and `bench rust`'s Cedar load does): the policy set,
    the schema, the policies validated against it, the entity store."""
    import cedarpy

    gc.collect()
    t = time.perf_counter_ns()
    cedarpy.PolicySet.from_str(policies_text)
    schema = cedarpy.Schema.from_str(schema_text)
    validation = cedarpy.validate_policies(policies_text, schema)
    cedarpy.Entities.from_json_str(entities_text, schema)
    took = time.perf_counter_ns() - t
    if not validation.validation_passed:
        raise BenchError(f"the Cedar policies do not validate against the schema: {validation.errors}")
    return took


#: A fresh interpreter's path to its first decision, in the steps `RuleSet.load`
#: takes (the process-wide runtime is what compiles the component), so the child
#: can say where the time goes; `boot` is from the parent's spawn to the first
#: line (CLOCK_MONOTONIC is one clock for every process).
COLD_SCRIPT = """
import json, sys, time
t0 = time.monotonic()
import mcp_toolgate
from mcp_toolgate import _runtime
t1 = time.monotonic()
_runtime.runtime()
t2 = time.monotonic()
spawned, policy, catalog, call, context = sys.argv[1:]
rules = mcp_toolgate.RuleSet.from_files(catalog, policy)
t3 = time.monotonic()
decision = rules.evaluate_json(call.encode(), context)
t4 = time.monotonic()
phases = {"boot": t0 - float(spawned), "import": t1 - t0, "compile": t2 - t1, "load": t3 - t2, "decide": t4 - t3}
print(json.dumps({"decision": json.loads(decision), "phases_ms": {k: v * 1e3 for k, v in phases.items()}}))
"""


# A child with TOOLGATE_COMPONENT set to a prepared component (`toolgate prepare`):
# loads once (the prepared component's code is compiled or mapped from the cache),
# then times a fresh load + the first decision on every tool, as toolgate_ready does
# (the median of ROUNDS such loads).
PREPARED_SCRIPT = r"""
import gc, json, statistics, sys, time
from mcp_toolgate import RuleSet
policy = open(sys.argv[1], encoding="utf-8").read()
catalog = open(sys.argv[2], encoding="utf-8").read()
context, load_fuel, rounds = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
calls = [f'{{"name":{json.dumps(t["name"])},"arguments":{{}}}}'.encode() for t in json.loads(catalog)["tools"]]
RuleSet.load(catalog=catalog, policy=policy, load_fuel=load_fuel)
samples = []
for _ in range(rounds):
    gc.collect()
    t = time.perf_counter_ns()
    rules = RuleSet.load(catalog=catalog, policy=policy, load_fuel=load_fuel)
    decisions = [rules.evaluate_json(call, context) for call in calls]
    samples.append(time.perf_counter_ns() - t)
    del rules
print(json.dumps({"ns": int(statistics.median(samples)), "decisions": decisions}))
"""


def prepared_ready(data: Path, prepared: Path, scale: str, context: str, rounds: int) -> tuple[int, list[str]]:
    """ns to the rule set of `scale` tools ready to decide with the component prepared for
    it, and its first decisions."""
    env = {**os.environ, "TOOLGATE_COMPONENT": str(prepared / "toolgate_policy.wasm")}
    args = [str(data / "policy.yaml"), str(data / scale / "catalog.json"), context, str(LOAD_FUEL), str(rounds)]
    stdout, _ = spawn_timed(["-c", PREPARED_SCRIPT, *args], env)
    try:
        child = json.loads(stdout)
        return int(child["ns"]), list(child["decisions"])
    except (ValueError, KeyError, TypeError):
        raise BenchError(f"the prepared child printed {stdout!r}") from None


def spawn_timed(args: list[str], env: dict[str, str]) -> tuple[str, float]:
    """stdout of `python ARGS` and its wall time in seconds, spawn to exit."""
    t = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t
    if done.returncode != 0:
        raise BenchError(f"a cold-start child (python {args[0]}) exited with {done.returncode}: {done.stderr}")
    return done.stdout, took


def cold_start(data: Path, call: dict[str, Any], runs: int) -> dict[str, Any]:
    """The cold start and the bare interpreter's, medians of `runs` fresh processes, in the same rounds."""
    cold: list[float] = []
    bare: list[float] = []
    phases: dict[str, list[float]] = {}
    for _ in range(runs):
        cache = tempfile.mkdtemp(prefix="toolgate-bench-cold-")
        env = {**os.environ, "TOOLGATE_CACHE_DIR": cache}
        try:
            bare.append(spawn_timed(["-c", "pass"], env)[1])
            args = [str(time.monotonic()), str(data / "policy.yaml"), str(data / "34" / "catalog.json")]
            stdout, took = spawn_timed(["-c", COLD_SCRIPT, *args, call["call_json"], call["context_json"]], env)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        try:
            child = json.loads(stdout)
            ok = child["decision"]["ok"]
        except (ValueError, KeyError, TypeError):
            raise BenchError(f"the cold-start child printed {stdout!r}, not its decision") from None
        if ok is not call["expect_allowed"]:
            raise BenchError(f"the cold-start child decided {stdout.strip()} on {call['call_json']}")
        cold.append(took)
        for k, v in child["phases_ms"].items():
            phases.setdefault(k, []).append(v)
    return {
        "toolgate_ms": ms(statistics.median(cold)),
        "bare_ms": ms(statistics.median(bare)),
        "runs": runs,
        "toolgate_samples_ms": [ms(x) for x in cold],
        "bare_samples_ms": [ms(x) for x in bare],
        "phases_ms": {k: round(statistics.median(v), 3) for k, v in phases.items()},
    }


# -- the run ------------------------------------------------------------------


def read_text(path: Path) -> str:
    if not path.is_file():
        raise BenchError(f"{path} is missing: run `target/release/bench gen {path.parent}`")
    return path.read_text(encoding="utf-8")


def check_agreement(
    scale: str,
    mix: list[dict[str, Any]],
    deciders: dict[str, Callable[[int], bool]],
) -> None:
    for i, m in enumerate(mix):
        for who, decide in deciders.items():
            ok = decide(i)
            if ok != m["expect_allowed"]:
                raise BenchError(
                    f"at {scale} tools, {who} says {'allow' if ok else 'deny'} on `{m['call_json']}` "
                    f"({m['label']}), the mix expects {'allow' if m['expect_allowed'] else 'deny'}"
                )


def run(data: Path, budget: Budget, scales: list[str], prepared: Path | None = None) -> dict[str, Any]:
    start: dict[str, Any] = {}
    _, took = timed(lambda: __import__("mcp_toolgate"))
    start["import_toolgate_ms"] = ms(took)
    from mcp_toolgate import RuleSet, _runtime

    _, took = timed(lambda: __import__("cedarpy"))
    start["import_cedarpy_ms"] = ms(took)
    import cedarpy

    mix: list[dict[str, Any]] = json.loads(read_text(data / "mix.json"))["calls"]
    policy = read_text(data / "policy.yaml")
    calls = [m["call_json"].encode("utf-8") for m in mix]
    contexts = {m["context_json"] for m in mix}
    if len(contexts) != 1:
        raise BenchError("the mix has more than one toolgate context; this harness expects one")
    context = contexts.pop()
    allowed_per_mix = sum(1 for m in mix if m["expect_allowed"])

    # Start-up, as the package does it: compile the component (no cache), read
    # it back from the native-code cache, instantiate.
    wasm = _runtime.component_path().read_bytes()
    start["component_bytes"] = len(wasm)
    _, took = timed(lambda: _runtime.Runtime(wasm))
    start["compile_ms"] = ms(took)
    rt, took = timed(lambda: _runtime.Runtime(wasm))
    start["precompiled_load_ms"] = ms(took)
    _runtime._RUNTIMES[_runtime.component_path()] = rt
    _, took = timed(lambda: _runtime.Instance(rt))
    start["instance_ms"] = ms(took)
    _, took = timed(lambda: RuleSet.load(catalog="[]"))
    start["instantiate_ms"] = ms(took)  # instance + contract check + an empty load

    floor, took = _floor_rules(FLOOR)
    start["floor_compile_ms"] = ms(took)
    floor_run = toolgate_loop(floor, calls, context)

    # Cedar: policies and schema once; the policies validated against the schema.
    policies_text = read_text(data / "policies.cedar")
    schema_text = read_text(data / "schema.cedarschema")
    policy_set, took = timed(lambda: cedarpy.PolicySet.from_str(policies_text))
    start["cedar_policies_ms"] = ms(took)
    schema, took = timed(lambda: cedarpy.Schema.from_str(schema_text))
    start["cedar_schema_ms"] = ms(took)
    validation, took = timed(lambda: cedarpy.validate_policies(policies_text, schema))
    start["cedar_validate_ms"] = ms(took)
    if not validation.validation_passed:
        raise BenchError(f"the Cedar policies do not validate against the schema: {validation.errors}")
    cedar = Cedar(policy_set, schema)
    for m, call in zip(mix, calls, strict=True):
        if cedar_request(call) != m["cedar_request"]:
            raise BenchError(f"the adapter's request for {m['call_json']} is not mix.json's: {cedar_request(call)}")

    results: dict[str, Any] = {}
    load_lines: list[str] = []
    header = (
        f"{'tools':>6} {'toolgate ns':>12} {'tg-struct ns':>13} {'cedar ns':>10} {'(store':>9} {'per-call)':>10} "
        f"{'floor ns':>9} {'tg/cedar':>9} {'tg/floor':>9} {'tg load ms':>11} {'cedar load ms':>14}"
    )
    print(
        f"python {platform.python_version()}: mcp-toolgate {metadata.version('mcp-toolgate')} (wasmtime "
        f"{metadata.version('wasmtime')}) vs cedarpy {metadata.version('cedarpy')}; ns per decision, median of "
        f"{budget.rounds} round(s) of about {budget.slice_seconds:g} s per contender",
        flush=True,
    )
    print(header, flush=True)
    for scale in scales:
        catalog = read_text(data / scale / "catalog.json")
        structural_catalog = read_text(data / scale / "catalog-structural.json")
        entities_text = read_text(data / scale / "entities.json")
        gc.collect()
        rules, load_s = timed(partial(RuleSet.load, catalog=catalog, policy=policy, load_fuel=LOAD_FUEL))
        structural, structural_load_s = timed(
            partial(RuleSet.load, catalog=structural_catalog, policy=policy, load_fuel=LOAD_FUEL)
        )
        store, cedar_load_s = timed(partial(cedarpy.Entities.from_json_str, entities_text, schema))
        by_tool, agent_only = entities_by_tool(entities_text)
        del catalog, structural_catalog, entities_text
        if scale == "34":  # the seed's own entities: what mix.json says each call needs
            for m in mix:
                if json.loads(by_tool.get(m["call"]["name"], agent_only)) != m["cedar_entities"]:
                    raise BenchError(f"the entities for {m['call_json']} are not mix.json's")

        store_entities, call_entities = always(store), needed(by_tool, agent_only)
        check_agreement(
            scale,
            mix,
            {
                "toolgate": toolgate_decider(rules, calls, context),
                "toolgate (structural schemas)": toolgate_decider(structural, calls, context),
                "cedar (entity store)": cedar_decider(cedar, calls, store_entities),
                "cedar (per-call entities)": cedar_decider(cedar, calls, call_entities),
            },
        )
        floor_decision = floor.evaluate_json(calls[0], context)
        if not isinstance(floor_decision, str) or not floor_decision.startswith(ALLOW_PREFIX):
            raise BenchError(f"the floor answered {floor_decision!r}")

        figures = race(
            budget,
            len(mix),
            [
                Contender("toolgate", toolgate_loop(rules, calls, context), allowed_per_mix),
                Contender("toolgate_structural", toolgate_loop(structural, calls, context), allowed_per_mix),
                Contender("cedar_store", cedar.loop(calls, store_entities), allowed_per_mix),
                Contender("cedar_call_entities", cedar.loop(calls, call_entities), allowed_per_mix),
                Contender("floor", floor_run, len(mix)),  # its fixed answer is an allow
            ],
        )
        cedar_best = min(("cedar_store", "cedar_call_entities"), key=lambda k: figures[k])
        row: dict[str, float] = {
            "toolgate_ns": round(figures["toolgate"], 1),
            "toolgate_structural_ns": round(figures["toolgate_structural"], 1),
            "cedar_ns": round(figures[cedar_best], 1),
            "floor_ns": round(figures["floor"], 1),
            "toolgate_load_ms": ms(load_s),
            "toolgate_structural_load_ms": ms(structural_load_s),
            "cedar_store_ns": round(figures["cedar_store"], 1),
            "cedar_call_entities_ns": round(figures["cedar_call_entities"], 1),
            "cedar_load_ms": ms(cedar_load_s),
        }
        best = "entity store" if cedar_best == "cedar_store" else "per-call entities"
        results[scale] = {**row, "cedar_best": best}
        print(
            f"{scale:>6} {row['toolgate_ns']:>12.0f} {row['toolgate_structural_ns']:>13.0f} {row['cedar_ns']:>10.0f} "
            f"{row['cedar_store_ns']:>9.0f} {row['cedar_call_entities_ns']:>10.0f} {row['floor_ns']:>9.0f} "
            f"{row['toolgate_ns'] / row['cedar_ns']:>9.2f} {row['toolgate_ns'] / row['floor_ns']:>9.2f} "
            f"{row['toolgate_load_ms']:>11.1f} {row['cedar_load_ms']:>14.1f}",
            flush=True,
        )
        del rules, structural, store, by_tool, store_entities, call_entities
        catalog = read_text(data / scale / "catalog.json")
        entities_text = read_text(data / scale / "entities.json")
        ready_calls = first_calls(catalog)
        toolgate_samples: list[int] = []
        cedar_samples: list[int] = []
        for _ in range(budget.ready_rounds):
            toolgate_samples.append(toolgate_ready(catalog, policy, ready_calls, context))
            cedar_samples.append(cedar_ready(policies_text, schema_text, entities_text))
        ready_ns = int(statistics.median(toolgate_samples))
        cedar_ready_ns = int(statistics.median(cedar_samples))
        del catalog, entities_text
        results[scale].update(tools=len(ready_calls), toolgate_ready_ns=ready_ns, cedar_ready_ns=cedar_ready_ns)
        load_lines.append(f"load python {len(ready_calls)} {ready_ns} {cedar_ready_ns} {ready_ns / cedar_ready_ns:.3f}")
        print(
            f"       ready to decide (load + the first decision on every tool): {ready_ns / 1e6:.1f} ms, "
            f"Cedar {cedar_ready_ns / 1e6:.1f} ms",
            flush=True,
        )
    # Prepared engines: `prepared/N` as `toolgate prepare` wrote it for each scale N run.
    prepared_dirs = {} if prepared is None else {scale: prepared / scale for scale in results}
    for scale, prepared_dir in prepared_dirs.items():
        if not (prepared_dir / "toolgate_policy.wasm").is_file():
            continue
        catalog_text = read_text(data / scale / "catalog.json")
        calls = first_calls(catalog_text)
        shipped = RuleSet.load(catalog=catalog_text, policy=policy)
        expected = [shipped.evaluate_json(c, context) for c in calls]
        del shipped
        ready_ns, decisions = prepared_ready(data, prepared_dir, scale, context, budget.ready_rounds)
        if decisions != expected:
            raise BenchError(f"the prepared component and the package's decide differently at {scale} tools")
        cedar_ready_ns = results[scale]["cedar_ready_ns"]
        results[scale]["toolgate_prepared_ready_ns"] = ready_ns
        ratio = ready_ns / cedar_ready_ns
        load_lines.append(f"load python-prepared {len(calls)} {ready_ns} {cedar_ready_ns} {ratio:.3f}")
    if "34" in results:
        start["seed_load_ms"] = results["34"]["toolgate_load_ms"]
    for scale in ("1000", "10000"):
        if scale in results:
            start[f"load_{scale}_ms"] = results[scale]["toolgate_load_ms"]
            start[f"cedar_entities_{scale}_ms"] = results[scale]["cedar_load_ms"]
    start["cedar_prepare_ms"] = ms(
        (start["cedar_policies_ms"] + start["cedar_schema_ms"] + start["cedar_validate_ms"]) / 1e3
        + (results["34"]["cedar_load_ms"] / 1e3 if "34" in results else 0.0)
    )
    print("start (ms): " + ", ".join(f"{k.removesuffix('_ms')} {v:g}" for k, v in start.items() if k.endswith("_ms")))
    if len(results) > 1 and "34" in results:
        top = max(results, key=int)
        growth = results[top]["toolgate_ns"] / results["34"]["toolgate_ns"]
        print(f"toolgate's time per decision at {top} tools / at 34: {growth:.2f}")
    cold = cold_start(data, mix[0], budget.cold_runs)
    print(
        f"cold start, median of {cold['runs']} fresh process(es): {cold['toolgate_ms']:.1f} ms to the first decision, "
        f"python -c pass {cold['bare_ms']:.1f} ms; in the child (ms): "
        + ", ".join(f"{k} {v:.1f}" for k, v in cold["phases_ms"].items())
    )
    # The machine-readable lines (docs/benchmarks.md): ready to decide per scale, cold start.
    for line in load_lines:
        print(line)
    print(f"cold python {cold['toolgate_ms']:.1f}")
    print(f"cold python-bare {cold['bare_ms']:.1f}")
    return {
        "runtime": "python",
        "peer": f"cedarpy {metadata.version('cedarpy')} (is_authorized with preloaded PolicySet, Schema and Entities "
        "handles, request validated against the schema, built per call from the call bytes)",
        "toolgate_api": "RuleSet.evaluate_json(call_bytes, context_text)",
        "python": platform.python_version(),
        "rounds": budget.rounds,
        "scales": results,
        "start": start,
        "ready_to_decide": "per scale: toolgate_ready_ns = RuleSet.load (policy + catalog) + evaluate_json on "
        '{"name":<tool>,"arguments":{}} for every tool; cedar_ready_ns = PolicySet + Schema + validate_policies + '
        "Entities (that scale's store)",
        "cold": cold,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="toolgate (Python package) vs cedarpy, same process, same run")
    parser.add_argument("--data", type=Path, default=ROOT / "target" / "bench-data", help="`bench gen` output")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    mode.add_argument("--smoke", action="store_true", help="one short round: it works and the engines agree")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the figures as JSON")
    parser.add_argument("--scales", default=",".join(SCALES), help="comma-separated (default: 34,1000,10000)")
    parser.add_argument(
        "--prepared",
        type=Path,
        metavar="DIR",
        help="DIR/N: what `toolgate prepare` wrote for N tools (bench/run): a load python-prepared line per scale",
    )
    args = parser.parse_args(argv)
    budget = BUDGETS["smoke" if args.smoke else "quick" if args.quick else "default"]
    scales = [s for s in args.scales.split(",") if s]
    if unknown := [s for s in scales if s not in SCALES]:
        parser.error(f"unknown scale(s) {unknown}: the workload has {', '.join(SCALES)}")

    # The package's native-code cache, in a fresh directory: the compile is
    # measured cold, the next read is the cached start-up.
    cache = tempfile.mkdtemp(prefix="toolgate-bench-cache-")
    os.environ["TOOLGATE_CACHE_DIR"] = cache
    try:
        out = run(args.data, budget, scales, args.prepared)
    except BenchError as e:
        print(f"bench/python: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
