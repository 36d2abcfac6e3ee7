"""SPEC §7: a host that cannot get a decision denies with its own fixed bytes."""

from __future__ import annotations

import json

import pytest

import toolgate
from conftest import FIXTURES, VECTORS
from toolgate import FAULTS, MAX_INPUT_BYTES, EngineFault, RuleSet

LOOKUP = b'{"name":"consultar_pedido","arguments":{"order_id":"123"}}'


def test_embedded_fault_bytes_equal_the_shared_file() -> None:
    shared = json.loads((VECTORS / "host-faults.json").read_text(encoding="utf-8"))
    assert shared["faults"] == FAULTS
    assert shared["limits"]["max_input_bytes"] == MAX_INPUT_BYTES


def test_call_over_the_limit_is_denied_without_reaching_the_component(retail_rules: RuleSet) -> None:
    prefix = b'{"name":"consultar_pedido","arguments":{"order_id":"'
    big = prefix + b"y" * (MAX_INPUT_BYTES - len(prefix) - 3) + b'"}}'
    assert len(big) == MAX_INPUT_BYTES
    assert retail_rules.evaluate_json(big, "{}").startswith('{"ok":true')
    assert retail_rules.evaluate_json(big + b" ", "{}") == FAULTS["INPUT_TOO_LARGE"]
    huge_context = '{"surface":"confirming","scopes":["' + "s" * MAX_INPUT_BYTES + '"]}'
    assert retail_rules.evaluate_json(LOOKUP, huge_context) == FAULTS["INPUT_TOO_LARGE"]
    assert retail_rules.evaluate("consultar_pedido", {"order_id": "x" * MAX_INPUT_BYTES}).code == "INPUT_TOO_LARGE"


def test_fuel_exhaustion_denies_and_the_next_call_is_served() -> None:
    rules = RuleSet.from_files(FIXTURES / "retail-tools.yaml", FIXTURES / "retail-policy.yaml")
    normal = rules.evaluate_json(LOOKUP, "{}")
    assert normal.startswith('{"ok":true')
    rules.call_fuel = 1_000
    assert rules.evaluate_json(LOOKUP, "{}") == FAULTS["ENGINE_LIMIT"]
    rules.call_fuel = toolgate._runtime.DEFAULT_CALL_FUEL
    assert rules.evaluate_json(LOOKUP, "{}") == normal


def test_trap_denies_and_the_instance_is_rebuilt() -> None:
    # A real trap: the guest cannot grow its memory past the store's limit,
    # so its allocator aborts (`unreachable`).
    rules = RuleSet.from_files(FIXTURES / "retail-tools.yaml", FIXTURES / "retail-policy.yaml", memory_limit=4 << 20)
    normal = rules.evaluate_json(LOOKUP, "{}")
    big = b'{"name":"consultar_pedido","arguments":{"order_id":"' + b"y" * (3 << 20) + b'"}}'
    assert rules.evaluate_json(big, "{}") == FAULTS["ENGINE_TRAP"]
    assert rules.evaluate_json(LOOKUP, "{}") == normal
    assert rules.evaluate_json(big, "{}") == FAULTS["ENGINE_TRAP"]
    assert rules.evaluate("consultar_pedido", {"order_id": "1"}).ok


def test_trap_in_a_non_decision_call_raises_with_the_code() -> None:
    rules = RuleSet.from_files(FIXTURES / "retail-tools.yaml", FIXTURES / "retail-policy.yaml")
    rules.call_fuel = 1_000
    with pytest.raises(EngineFault) as info:
        rules.list_exposable()
    assert info.value.code == "ENGINE_LIMIT"
    rules.call_fuel = toolgate._runtime.DEFAULT_CALL_FUEL
    assert [t["name"] for t in rules.list_exposable()] == ["consultar_pedido", "solicitar_devolucao"]


def test_load_out_of_fuel_fails_closed() -> None:
    with pytest.raises(EngineFault) as info:
        RuleSet.from_files(FIXTURES / "retail-tools.yaml", FIXTURES / "retail-policy.yaml", load_fuel=1_000)
    assert info.value.code == "ENGINE_LIMIT"
