"""SPEC §7: a host that cannot get a decision denies with its own fixed bytes."""

from __future__ import annotations

import array
import json

import pytest

import mcp_toolgate
from conftest import FIXTURES, VECTORS
from mcp_toolgate import FAULTS, MAX_INPUT_BYTES, EngineFault, RuleSet, _runtime
from mcp_toolgate._types import blocked_result_json, fault_outcome

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
    # Any buffer is its bytes, counted as bytes (a memoryview's len() counts items), on either path.
    wide = array.array("H")
    wide.frombytes(LOOKUP + b" " * (len(LOOKUP) % 2))
    assert retail_rules.evaluate_json(memoryview(wide), "{}") == retail_rules.evaluate_json(bytes(wide), "{}")
    assert retail_rules.evaluate_json(bytearray(LOOKUP), "{}") == retail_rules.evaluate_json(LOOKUP, "{}")
    padded = array.array("Q", b" " * (8 * (MAX_INPUT_BYTES // 8 + 1)))
    assert retail_rules.evaluate_json(memoryview(padded), "{}") == FAULTS["INPUT_TOO_LARGE"]
    # A context text with lone surrogates, whatever its size, is sent as one the engine refuses (as the
    # npm package sends it): INVALID_CONTEXT, never a UnicodeEncodeError in place of a deny. As an
    # object, each is written as its 6-byte `\udcXX` escape and counted as sent.
    unsendable = retail_rules.evaluate_json(LOOKUP, '"\\ud800"')
    for count in (MAX_INPUT_BYTES // 6 + 10, MAX_INPUT_BYTES // 4 + 1):
        lone = '{"surface":"confirming","scopes":["' + "\udc80" * count + '"]}'
        assert retail_rules.evaluate_json(LOOKUP, lone) == unsendable, count
        assert json.loads(unsendable)["error"]["code"] == "INVALID_CONTEXT"
        assert retail_rules.decide(LOOKUP, lone).decision.json == unsendable, count
        as_object = {"surface": "confirming", "scopes": ["\udc80" * count]}
        assert retail_rules.decide(LOOKUP, as_object).decision.code == "INPUT_TOO_LARGE", count


# Each fault below is injected into the real component: the deny has the
# exact bytes of host-faults.json, list/turn raise EngineFault with the code,
# and the next ordinary call on the same object gets the known-good answer.

SMALL_TURN = '{"context":{},"calls":[{"name":"consultar_pedido","arguments":{"order_id":"1"}}]}'
#: About 3.9 MB: parsing it needs far more than 24 MiB (a 1 MB string, 900 000 numbers).
HUGE_CALL = (
    b'{"name":"consultar_pedido","arguments":{"order_id":"1","q":"'
    + b"x" * 1_000_000
    + b'","r":['
    + b"1," * 900_000
    + b"1]}}"
)
#: About 3.6 MB of context: 900 000 scopes.
HUGE_CONTEXT = '{"scopes":[' + '"s",' * 900_000 + '"s"]}'
#: About 3.6 MB of turn input: one call carrying 1.8 million numbers.
HUGE_TURN = '{"context":{},"calls":[{"name":"consultar_pedido","arguments":{"r":[' + "1," * 1_800_000 + "1]}}]}"


def _retail(**options: object) -> RuleSet:
    return RuleSet.from_files(FIXTURES / "retail-tools.yaml", FIXTURES / "retail-policy.yaml", **options)


def _known_good(rules: RuleSet) -> tuple[str, str, str]:
    decision = rules.evaluate_json(LOOKUP, "{}")
    assert decision.startswith('{"ok":true')
    return decision, rules.list_exposable_json("{}"), rules.turn_json("", SMALL_TURN)


def _assert_served(rules: RuleSet, good: tuple[str, str, str]) -> None:
    assert (rules.evaluate_json(LOOKUP, "{}"), rules.list_exposable_json("{}"), rules.turn_json("", SMALL_TURN)) == good


def test_limits_have_defaults() -> None:
    rules = _retail()
    # Fuel is a backstop 2x the guest budget (component-build/src/limits.rs), not a per-runtime number.
    assert rules.call_fuel == mcp_toolgate._runtime.DEFAULT_CALL_FUEL == mcp_toolgate._faults.CALL_BUDGET * 2
    assert rules.memory_limit == mcp_toolgate._runtime.DEFAULT_MEMORY_LIMIT == 1 << 30
    assert MAX_INPUT_BYTES == 4 << 20


def test_fuel_exhaustion_denies_with_engine_limit_and_the_next_call_is_served() -> None:
    rules = _retail()
    good = _known_good(rules)
    rules.call_fuel = 1_000
    assert rules.evaluate_json(LOOKUP, "{}") == FAULTS["ENGINE_LIMIT"]
    with pytest.raises(EngineFault) as info:
        rules.list_exposable()
    assert info.value.code == "ENGINE_LIMIT"
    with pytest.raises(EngineFault) as info:
        rules.turn_json("", SMALL_TURN)
    assert info.value.code == "ENGINE_LIMIT"
    rules.call_fuel = mcp_toolgate._runtime.DEFAULT_CALL_FUEL
    _assert_served(rules, good)


def test_memory_cap_denies_with_engine_out_of_memory_and_the_next_call_is_served() -> None:
    # The store's limit refuses `memory.grow`, the guest's allocator aborts
    # (`unreachable`), and the host knows that abort for an allocation failure.
    rules = _retail(memory_limit=24 << 20)
    good = _known_good(rules)
    assert rules.evaluate_json(HUGE_CALL, "{}") == FAULTS["ENGINE_OUT_OF_MEMORY"]
    _assert_served(rules, good)
    with pytest.raises(EngineFault) as info:
        rules.list_exposable_json(HUGE_CONTEXT)
    assert info.value.code == "ENGINE_OUT_OF_MEMORY"
    _assert_served(rules, good)
    with pytest.raises(EngineFault) as info:
        rules.turn_json("", HUGE_TURN)
    assert info.value.code == "ENGINE_OUT_OF_MEMORY"
    _assert_served(rules, good)
    # Under the default cap the same call gets the engine's own answer.
    assert not _retail().evaluate_json(HUGE_CALL, "{}").startswith('{"ok":false,"error":{"code":"ENGINE_')


def test_no_room_for_the_call_itself_is_out_of_memory_too() -> None:
    # A 3 MB call does not fit under 4 MiB: the guest's `cabi_realloc` fails.
    rules = _retail(memory_limit=4 << 20)
    normal = rules.evaluate_json(LOOKUP, "{}")
    big = b'{"name":"consultar_pedido","arguments":{"order_id":"' + b"y" * (3 << 20) + b'"}}'
    assert rules.evaluate_json(big, "{}") == FAULTS["ENGINE_OUT_OF_MEMORY"]
    assert rules.evaluate_json(LOOKUP, "{}") == normal
    assert rules.evaluate("consultar_pedido", {"order_id": "1"}).ok


def test_trap_denies_with_engine_trap_and_the_next_call_is_served() -> None:
    rules = _retail()
    good = _known_good(rules)
    rules._inject_trap()
    assert rules.evaluate_json(LOOKUP, "{}") == FAULTS["ENGINE_TRAP"]
    _assert_served(rules, good)
    rules._inject_trap()
    with pytest.raises(EngineFault) as info:
        rules.list_exposable()
    assert info.value.code == "ENGINE_TRAP"
    _assert_served(rules, good)
    rules._inject_trap()
    with pytest.raises(EngineFault) as info:
        rules.turn_json("", SMALL_TURN)
    assert info.value.code == "ENGINE_TRAP"
    _assert_served(rules, good)


def test_load_out_of_fuel_fails_closed() -> None:
    with pytest.raises(EngineFault) as info:
        RuleSet.from_files(FIXTURES / "retail-tools.yaml", FIXTURES / "retail-policy.yaml", load_fuel=1_000)
    assert info.value.code == "ENGINE_LIMIT"


def test_a_faulting_decide_is_the_fault_decision_with_the_engines_blocked_result_shape(retail_rules: RuleSet) -> None:
    big = b'{"name":"consultar_pedido","arguments":{"order_id":"' + b"y" * MAX_INPUT_BYTES + b'"}}'
    outcome = retail_rules.decide(big, "{}", "argument")
    decision = FAULTS["INPUT_TOO_LARGE"]
    assert outcome.decision.json == decision
    assert (outcome.forward_json, outcome.digest) == (None, None)
    # Byte for byte `blocked_result` of policy-core for a decision about no tool
    # (`Outcome::fault` in host-rs): the text escaped as serde_json does.
    text = decision.replace("\\", "\\\\").replace('"', '\\"')
    assert outcome.blocked_result_json == (
        '{"content":[{"type":"text","text":"' + text + '"}],"structuredContent":' + decision + ',"isError":true}'
    )
    assert outcome.blocked_result == {
        "content": [{"type": "text", "text": decision}],
        "structuredContent": json.loads(decision),
        "isError": True,
    }
    for code, fault in FAULTS.items():
        built = blocked_result_json(fault)
        assert json.loads(built)["content"][0]["text"] == fault, code
        assert built == fault_outcome(code).blocked_result_json


def test_blocked_result_json_escapes_as_the_engine_does() -> None:
    """The engine's own blocked results (the shared vectors) are rebuilt byte
    for byte from their decisions (json.dumps with ensure_ascii=False escapes
    as serde_json does), and so are texts with every kind of character."""
    seen = 0
    for path in sorted(VECTORS.glob("pipeline-*.json")):
        for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
            expect = case["expect"]
            if (
                case["op"] == "decide"
                and expect["blocked_result"]
                and '"structuredContent"' in expect["blocked_result"]
            ):
                assert blocked_result_json(expect["decision"]) == expect["blocked_result"], case["name"]
                seen += 1
    assert seen > 0
    tricky = "".join(chr(c) for c in range(0x80)) + "é\u2028\u2029\ufeff😀"
    assert json.dumps(tricky, ensure_ascii=False) == (
        '"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u000f'
        "\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d"
        "\\u001e\\u001f !\\\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\\\]^_`"
        'abcdefghijklmnopqrstuvwxyz{|}~\x7fé\u2028\u2029\ufeff😀"'
    )


def test_an_inconsistent_outcome_from_the_engine_is_engine_trap(
    retail_rules: RuleSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed = retail_rules.decide(LOOKUP, "{}", "none")
    assert allowed.ok and allowed.forward_json is not None
    denied = retail_rules.decide(b'{"name":"solicitar_devolucao","arguments":{}}', "{}", "none")
    assert not denied.ok
    for decision, forward in ((allowed.decision.json, None), (denied.decision.json, "{}"), ("not json", None)):
        monkeypatch.setattr(_runtime, "outcome_fields", lambda _r, d=decision, f=forward: (d, f, None, None))
        assert retail_rules.decide(LOOKUP, "{}", "none") == fault_outcome("ENGINE_TRAP")
    monkeypatch.undo()
    assert retail_rules.decide(LOOKUP, "{}", "none") == allowed
