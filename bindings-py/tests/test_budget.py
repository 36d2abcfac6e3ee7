"""The compute budget is the component's own (the guest meter), the same units
as in the Rust host and in Node: a runaway call is stopped inside the guest
with ENGINE_LIMIT; wasmtime fuel is only a larger backstop."""

from __future__ import annotations

import json

import mcp_toolgate
from conftest import VECTORS
from mcp_toolgate import FAULTS, RuleSet, _faults, _runtime

VECTOR = json.loads((VECTORS / "budget-exponential-anyof.json").read_text(encoding="utf-8"))
RUNAWAY = next(c for c in VECTOR["cases"] if c.get("component_only"))["call_text"].encode()


def test_fuel_is_a_backstop_above_the_guest_budget() -> None:
    assert _runtime.DEFAULT_CALL_FUEL == _faults.CALL_BUDGET * _faults.FUEL_BACKSTOP_FACTOR
    assert _runtime.DEFAULT_CALL_FUEL > _faults.CALL_BUDGET
    assert _runtime.DEFAULT_LOAD_FUEL > _faults.LOAD_BUDGET
    assert mcp_toolgate.MAX_INPUT_BYTES == _faults.MAX_INPUT_BYTES


def test_the_meter_stops_a_runaway_call_not_the_fuel_and_the_next_call_is_served() -> None:
    rules = RuleSet.load(catalog=VECTOR["catalog_text"])
    assert rules.evaluate_json(RUNAWAY, "{}") == FAULTS["ENGINE_LIMIT"]
    # The guest trapped (its meter's division by zero) with fuel to spare.
    inst = rules._inst
    assert inst is not None and inst.poisoned
    assert inst.store.get_fuel() > 0
    ok = rules.evaluate_json(b'{"name":"deep","arguments":{"a":1}}', "{}")
    assert json.loads(ok)["ok"] is True


def test_the_meter_trap_is_engine_limit_on_the_generic_call_path_too() -> None:
    rules = RuleSet.load(catalog=VECTOR["catalog_text"])
    inst = rules._live()
    try:
        inst.call("[method]rule-set.evaluate", rules._handle, RUNAWAY, "{}")
    except _runtime.Trap as trap:
        assert trap.code == "ENGINE_LIMIT"
        assert "divide by zero" in trap.detail
    else:  # pragma: no cover
        raise AssertionError("the runaway call returned")
