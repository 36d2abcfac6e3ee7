"""The fast path (`mcp_toolgate._fastpath`: wasmtime's C API through wasmtime-py's
private bindings) against wasmtime-py's public component API: the same bytes
for every shared vector and for every fault; and the version gate that keeps
the fast path to the wasmtime-py versions it was verified against."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import wasmtime

import mcp_toolgate
import vectorfile
from conftest import FIXTURES, VECTORS
from mcp_toolgate import FAULTS, EngineFault, LoadError, ProblemError, RuleSet, _fastpath, _runtime
from mcp_toolgate._types import fault_outcome

SHARED = sorted(p for p in VECTORS.glob("*.json") if p.name != "host-faults.json")
BUDGET = json.loads((VECTORS / "budget-exponential-anyof.json").read_text(encoding="utf-8"))
LOOKUP = b'{"name":"consultar_pedido","arguments":{"order_id":"123"}}'
SMALL_TURN = '{"context":{},"calls":[{"name":"consultar_pedido","arguments":{"order_id":"1"}}]}'
RETURN = b'{"name":"solicitar_devolucao","arguments":{"order_id":"1","reason":"r","confirmed":true}}'
SEAL_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def _use(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """New instances call through `path` ("fast" skips the test where the fast
    path may not run; ``TOOLGATE_PY_FASTPATH=unverified`` is kept)."""
    if path == "public":
        monkeypatch.setenv(_fastpath.ENV, "0")
        return
    if _fastpath.disabled() is not None:
        monkeypatch.delenv(_fastpath.ENV, raising=False)
    why = _fastpath.disabled()
    if why is not None:
        pytest.skip(f"no fast path here: {why}")


def _both(monkeypatch: pytest.MonkeyPatch, run: Callable[[], tuple[Any, set[str]]]) -> tuple[Any, Any]:
    """`run`'s results on the fast path and on the public path, each checked
    to have run on its path only."""
    results = []
    for path in ("fast", "public"):
        _use(monkeypatch, path)
        result, paths = run()
        assert paths == {path}
        results.append(result)
    return results[0], results[1]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _attempt(f: Callable[[], Any]) -> Any:
    try:
        return f()
    except (EngineFault, ProblemError) as exc:
        return ("raised", type(exc).__name__, str(exc))


def _run_vector_file(vf: vectorfile.VectorFile) -> tuple[list[Any], set[str]]:
    try:
        rules = RuleSet.load(catalog=vf.catalog, policy=vf.policy)
    except LoadError as exc:
        return [("load error", repr(exc.problem))], {_runtime.call_path()[0]}
    paths: set[str] = set()

    def seen() -> None:
        if rules._inst is not None:
            paths.add(rules._inst.path)

    out: list[Any] = [rules.revision, repr(rules.findings)]
    seen()
    for case in vf.cases:
        op = case["op"]
        ctx = case["context_text"] if "context_text" in case else _dumps(case.get("context") or {})
        if op == "evaluate":
            out.append(rules.evaluate_json(vectorfile.call_bytes(case), ctx))
        elif op == "list":
            out.append(_attempt(lambda ctx=ctx: rules.list_exposable_json(ctx)))
        elif op == "turn":
            state = "" if case.get("state") is None else _dumps(case["state"])
            out.append(_attempt(lambda case=case, state=state: rules.turn_json(state, _dumps(case["input"]))))
        elif op == "decide":
            outcome = rules.decide(vectorfile.call_bytes(case), ctx, vectorfile.confirmation(case))
            out.append(outcome.to_dict())
        elif op == "seal_payload":
            out.append(
                _attempt(
                    lambda case=case: rules.seal_payload(
                        vectorfile.call_bytes(case),
                        case.get("caller", ""),
                        case.get("id", ""),
                        case.get("expires_ms", 0),
                    )
                )
            )
        else:
            raise AssertionError(f"op {op!r} is not run here")
        seen()
    return out, paths


@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_every_shared_vector_gives_the_same_bytes_on_both_paths(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vf = vectorfile.load(path)
    fast, public = _both(monkeypatch, lambda: _run_vector_file(vf))
    assert fast == public


def _retail(**options: Any) -> RuleSet:
    return RuleSet.from_files(FIXTURES / "retail-tools.yaml", FIXTURES / "retail-policy.yaml", **options)


def _faults() -> tuple[dict[str, Any], set[str]]:
    out: dict[str, Any] = {}
    paths: set[str] = set()

    def served(rules: RuleSet) -> tuple[Any, ...]:
        payload = rules.seal_payload(RETURN, "user-1", SEAL_ID, 1 << 63)
        return (
            rules.evaluate_json(LOOKUP, "{}"),
            rules.list_exposable_json("{}"),
            rules.turn_json("", SMALL_TURN),
            rules.decide(RETURN, "{}", "none").to_dict(),
            rules.decide(RETURN, "{}", "argument").to_dict(),
            rules.decide(RETURN, "{}", {"seal": {"payload": payload, "caller": "user-1", "now_ms": 1}}).to_dict(),
            payload,
        )

    # Fuel: ENGINE_LIMIT from wasmtime's backstop, then served again.
    rules = _retail()
    out["served"] = served(rules)
    rules.call_fuel = 1_000
    out["fuel evaluate"] = rules.evaluate_json(LOOKUP, "{}")
    out["fuel turn"] = _attempt(lambda: rules.turn_json("", SMALL_TURN))
    out["fuel decide"] = rules.decide(RETURN, "{}", "argument").to_dict()
    out["fuel seal payload"] = _attempt(lambda: rules.seal_payload(RETURN, "", SEAL_ID, 1))
    rules.call_fuel = _runtime.DEFAULT_CALL_FUEL
    out["served after fuel"] = served(rules)
    # The guest meter: ENGINE_LIMIT with fuel to spare.
    runaway = next(c for c in BUDGET["cases"] if c.get("component_only"))["call_text"].encode()
    budget = RuleSet.load(catalog=BUDGET["catalog_text"])
    out["meter"] = budget.evaluate_json(runaway, "{}")
    out["meter decide"] = budget.decide(runaway, "{}", "argument").to_dict()
    # A trap in the canonical ABI: ENGINE_TRAP.
    rules._inject_trap()
    out["trap evaluate"] = rules.evaluate_json(LOOKUP, "{}")
    out["served after trap"] = served(rules)
    rules._inject_trap()
    out["trap list"] = _attempt(rules.list_exposable_json)
    out["served after a list trap"] = rules.evaluate_json(LOOKUP, "{}")
    rules._inject_trap()
    out["trap decide"] = rules.decide(RETURN, "{}", "person").to_dict()
    out["served after a decide trap"] = served(rules)
    # No room for the call: out of memory, told apart by the trap's frames.
    small = _retail(memory_limit=4 << 20)
    big = b'{"name":"consultar_pedido","arguments":{"order_id":"' + b"y" * (3 << 20) + b'"}}'
    out["out of memory"] = small.evaluate_json(big, "{}")
    out["served after out of memory"] = small.evaluate_json(LOOKUP, "{}")
    big_return = RETURN.replace(b'"r"', b'"' + b"y" * (3 << 20) + b'"')
    out["out of memory decide"] = small.decide(big_return, "{}", "argument").to_dict()
    for r in (rules, budget, small):
        assert r._inst is not None
        paths.add(r._inst.path)
    return out, paths


def test_faults_give_the_same_bytes_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, public = _both(monkeypatch, _faults)
    assert fast == public
    assert fast["fuel evaluate"] == fast["meter"] == FAULTS["ENGINE_LIMIT"]
    assert fast["trap evaluate"] == FAULTS["ENGINE_TRAP"]
    assert fast["out of memory"] == FAULTS["ENGINE_OUT_OF_MEMORY"]
    assert (
        fast["served"] == fast["served after fuel"] == fast["served after trap"] == fast["served after a decide trap"]
    )
    for key, code in (
        ("fuel decide", "ENGINE_LIMIT"),
        ("meter decide", "ENGINE_LIMIT"),
        ("trap decide", "ENGINE_TRAP"),
        ("out of memory decide", "ENGINE_OUT_OF_MEMORY"),
    ):
        assert fast[key] == fault_outcome(code).to_dict(), key
    assert fast["fuel seal payload"][:2] == ("raised", "EngineFault")
    assert fast["served"][3]["forward"] is None and fast["served"][4]["forward"] is not None
    # A good seal: allowed, forwarded as with the model's confirmed: true here.
    sealed, argued = fast["served"][5], fast["served"][4]
    assert (sealed["decision"], sealed["forward"]) == (argued["decision"], argued["forward"])
    assert fast["served after out of memory"] == fast["served"][0]


def test_both_paths_find_both_allocation_failure_sites() -> None:
    # One pair of frames for `cabi_realloc` (no room for an argument), one for
    # Rust's allocator (no room to parse it); the same function indices
    # whichever path read them. Measured afresh here, not from the cache.
    rt = _runtime.runtime()
    fast, public = rt._measure_oom_sites(True), rt._measure_oom_sites(False)
    assert len(fast) == 2
    assert fast == public


def test_the_frames_read_from_the_trap_message_are_the_c_apis(monkeypatch: pytest.MonkeyPatch) -> None:
    _use(monkeypatch, "fast")
    inst = _runtime.Instance(_runtime.runtime(), fast=True)
    inst.store.set_limits(memory_size=0)
    with pytest.raises(wasmtime.WasmtimeError) as info:
        inst.calls.call("[static]rule-set.load", (None, "x" * 100_000))
    frames = _fastpath.frames(info.value)
    assert len(frames) >= 2
    assert _runtime._frames_from_text(str(info.value)) == frames


def test_frames_from_text() -> None:
    text = (
        "error while executing at wasm backtrace:\n"
        "    0: 0x30c100 - <unknown>!<wasm function 7561>\n"
        "                    at /src/lib.rs:1:2\n"
        "    1: 0x30c18e - <unknown>!<wasm function 7565>\n"
        "\nCaused by:\n    wasm trap: wasm `unreachable` instruction executed\n"
    )
    assert _runtime._frames_from_text(text) == (7561, 7565)
    # A frame without an index (a name section): no frames, so never out-of-memory.
    assert _runtime._frames_from_text(text.replace("<unknown>!<wasm function 7565>", "policy.wasm!alloc")) == ()
    assert _runtime._frames_from_text("all fuel consumed") == ()
    # wasmtime pads the addresses to one width.
    padded = (
        "error while executing at wasm backtrace:\n"
        "    0:   0x5a45 - <unknown>!<wasm function 59>\n"
        "    1:   0x5ad3 - <unknown>!<wasm function 63>\n"
        "    2: 0x326ac7 - <unknown>!<wasm function 7869>\n"
    )
    assert _runtime._frames_from_text(padded) == (59, 63, 7869)


# -- the gate -----------------------------------------------------------------


def _fresh_gate(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    monkeypatch.setattr(_fastpath, "wasmtime_version", lambda: version)
    monkeypatch.setattr(_fastpath, "_REFUSALS", {})
    monkeypatch.delenv(_fastpath.ENV, raising=False)


def test_the_gate_refuses_a_major_it_was_not_verified_against() -> None:
    assert 51 not in _fastpath.VERIFIED_MAJORS
    for version in ("51.0.0", "49.0.0", "1000.0.0", "x.y", "unknown", ""):
        why = _fastpath.check(version)
        assert why is not None and "not a version the fast path was verified against" in why, version


@pytest.mark.skipif(_fastpath.REFUSAL is not None, reason=f"no fast path here: {_fastpath.REFUSAL}")
def test_the_gate_passes_the_installed_verified_version() -> None:
    version = _fastpath.wasmtime_version()
    assert int(version.split(".")[0]) in _fastpath.VERIFIED_MAJORS
    assert _fastpath.check(version) is None


def test_an_unverified_version_falls_back_to_the_public_path(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_gate(monkeypatch, "51.0.0")
    why = _fastpath.disabled()
    assert why is not None and "wasmtime 51.0.0" in why
    assert _runtime.call_path() == ("public", why)
    rules = _retail()
    assert rules._inst is not None and rules._inst.path == "public"
    assert rules._inst.public_because == why
    decision = rules.evaluate("consultar_pedido", {"order_id": "123"})
    assert decision.ok
    assert rules.evaluate_json(LOOKUP, "{}") == decision.json


@pytest.mark.skipif(_fastpath.REFUSAL is not None, reason=f"no fast path here: {_fastpath.REFUSAL}")
def test_unverified_lifts_only_the_major_check(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_gate(monkeypatch, "51.0.0")
    monkeypatch.setenv(_fastpath.ENV, "unverified")
    assert _fastpath.disabled() is None
    assert _retail()._inst.path == "fast"  # type: ignore[union-attr]
    monkeypatch.setattr(_fastpath, "_REFUSALS", {})
    monkeypatch.setattr(_fastpath, "_BOUND", False)
    monkeypatch.setattr(wasmtime._ffi, "WASMTIME_COMPONENT_LIST", wasmtime._ffi.c_uint8(99))
    why = _fastpath.disabled()
    assert why is not None and "WASMTIME_COMPONENT_LIST is not 13" in why
    assert _retail()._inst.path == "public"  # type: ignore[union-attr]


def test_a_failed_structural_check_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise AttributeError("module 'wasmtime._ffi' has no attribute 'wasmtime_component_val_t'")

    _fresh_gate(monkeypatch, "50.0.1")
    monkeypatch.setattr(_fastpath, "_BOUND", False)
    monkeypatch.setattr(_fastpath, "_bind", broken)
    if 50 not in _fastpath.VERIFIED_MAJORS:  # pragma: no cover
        pytest.skip("50 is no longer a verified major")
    why = _fastpath.disabled()
    assert why is not None and "has no attribute" in why
    rules = _retail()
    assert rules._inst is not None and rules._inst.path == "public"
    assert rules.evaluate("consultar_pedido", {"order_id": "123"}).ok


@pytest.mark.parametrize("setting", ["0", "off", "false", "no", " OFF "])
def test_the_environment_forces_the_public_path(setting: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_fastpath.ENV, setting)
    assert _fastpath.disabled() == f"{_fastpath.ENV}={setting.strip().lower()}"
    rules = _retail()
    assert rules._inst is not None and rules._inst.path == "public"


#: What wasmtime-py keeps private, as used by `_fastpath`.
PRIVATE = (
    r"\b_ffi\b",
    r"\bctypes\b",
    r"\._func\b",
    r"store\._context\(",
    r"\._from_ptr\b",
    r"\.ptr\(",
    r"\bconvert_(to|from)_c\b",
)


def test_only_the_fastpath_module_touches_private_wasmtime() -> None:
    package = Path(mcp_toolgate.__file__).parent
    for source in package.glob("*.py"):
        if source.name == "_fastpath.py":
            continue
        text = source.read_text(encoding="utf-8")
        for needle in PRIVATE:
            assert not re.search(needle, text), f"{source.name} uses {needle}"
