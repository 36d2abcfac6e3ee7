"""The Python API: typed results that keep the canonical bytes, stable codes."""

from __future__ import annotations

import json
from typing import Any

import pytest

import mcp_toolgate
from conftest import FIXTURES
from mcp_toolgate import Context, Decision, LoadError, Outcome, ProblemError, RuleSet, ToolCall, TurnState


def test_contract_version_is_checked() -> None:
    assert mcp_toolgate.contract_version() == mcp_toolgate.CONTRACT_VERSION == "0.2.0"
    assert mcp_toolgate._runtime.INTERFACE == "toolgate:policy/engine@0.2.0"


def test_component_is_shipped_inside_the_package() -> None:
    path = mcp_toolgate.component_path()
    assert path.name == "toolgate_policy.wasm" and path.is_file()
    assert path.read_bytes()[:4] == b"\0asm"


def test_decision_is_typed_and_keeps_the_bytes(retail_rules: RuleSet) -> None:
    d = retail_rules.evaluate("solicitar_devolucao", {"order_id": "123", "reason": "x"})
    assert isinstance(d, Decision)
    assert (d.ok, d.code, d.retryable, d.outcome, d.tool) == (
        False,
        "CONFIRMATION_REQUIRED",
        True,
        "rejected",
        "solicitar_devolucao",
    )
    assert d.blocked_by_policy and not d
    assert d.metadata["policy_source"] == "tool_policies"
    assert d.policy_revision == retail_rules.revision
    assert (
        str(d)
        == d.json
        == retail_rules.evaluate_json(
            b'{"name":"solicitar_devolucao","arguments":{"order_id":"123","reason":"x"}}', "{}"
        )
    )


def test_every_call_form_gives_the_same_decision(retail_rules: RuleSet) -> None:
    forms = [
        retail_rules.evaluate("consultar_pedido", {"order_id": "1"}),
        retail_rules.evaluate({"name": "consultar_pedido", "arguments": {"order_id": "1"}}),
        retail_rules.evaluate(ToolCall("consultar_pedido", {"order_id": "1"})),
        retail_rules.evaluate(b'{"name":"consultar_pedido","arguments":{"order_id":"1"}}'),
        retail_rules.evaluate('{"name": "consultar_pedido", "arguments": {"order_id": "1"}}', context={}),
    ]
    assert len({d.json for d in forms}) == 1 and forms[0].ok


def test_context_forms(retail_rules: RuleSet) -> None:
    call = {"name": "solicitar_devolucao", "arguments": {"order_id": "1", "reason": "x", "confirmed": True}}
    assert retail_rules.evaluate(call).ok
    assert retail_rules.evaluate(call, context=Context(surface="direct")).code == "NOT_FOUND"
    assert retail_rules.evaluate(call, context={"allowed_tools": ["consultar_pedido"]}).code == "NOT_FOUND"
    assert retail_rules.evaluate(call, context='{"surface":"confirming"}').ok
    assert Context(scopes=[]).to_json() == '{"surface":"confirming","scopes":[]}'


def test_hidden_tool_answers_like_unknown(retail_rules: RuleSet) -> None:
    hidden = retail_rules.evaluate("cancelar_pedido", {})
    unknown = retail_rules.evaluate("nao_existe", {})
    assert hidden.json.replace("cancelar_pedido", "T") == unknown.json.replace("nao_existe", "T")


def test_load_error_names_line_column_and_code() -> None:
    catalog = (FIXTURES / "retail-tools.yaml").read_text()
    with pytest.raises(LoadError) as info:
        RuleSet.load(catalog=catalog, policy='version: 1\ndefaults:\n  require_confirmation: "true"\n')
    e = info.value
    assert isinstance(e, mcp_toolgate.ToolgateError)
    assert e.code == e.problem.code and e.origin == "policy" and (e.line, e.column) == (3, 25)
    assert e.problem.location("p.yaml", "c.yaml") == "p.yaml:3:25"


def test_bad_context_is_a_problem_error(retail_rules: RuleSet) -> None:
    with pytest.raises(ProblemError) as info:
        retail_rules.list_exposable({"surface": "sideways"})
    assert info.value.problem.origin == "context"


def test_from_env_reads_tool_policies_path() -> None:
    legacy = RuleSet.from_env(FIXTURES / "retail-tools.yaml", env={})
    with_policy = RuleSet.from_env(
        FIXTURES / "retail-tools.yaml", env={"TOOL_POLICIES_PATH": str(FIXTURES / "retail-policy.yaml")}
    )
    call = {"name": "solicitar_devolucao", "arguments": {"order_id": "1", "reason": "x"}}
    assert legacy.evaluate(call).metadata["policy_source"] == "tools_yaml"
    assert with_policy.evaluate(call).metadata["policy_source"] == "tool_policies"
    assert legacy.revision != with_policy.revision


def test_turn_state_round_trips_as_a_plain_dict(retail_rules: RuleSet) -> None:
    calls = [
        {"name": "consultar_pedido", "arguments": {"order_id": "123"}},
        {"name": "solicitar_devolucao", "arguments": {"order_id": "123", "reason": "r", "confirmed": True}},
    ]
    s1 = retail_rules.turn(None, calls)
    assert isinstance(s1, TurnState) and s1.awaiting_confirmation
    assert s1.pending_tool_call == ToolCall("solicitar_devolucao", {"order_id": "123", "reason": "r"})
    assert [c.name for c in s1.execute] == ["consultar_pedido"]
    assert [(r.name, r.action) for r in s1.results] == [
        ("consultar_pedido", "execute"),
        ("solicitar_devolucao", "await_confirmation"),
    ]
    assert s1.tool_policy_result is not None and s1.tool_policy_result.code == "CONFIRMATION_REQUIRED"
    assert s1.results[1].decision.json in s1.json and s1.tool_policy_result.json in s1.json
    stored = json.loads(json.dumps(s1.as_dict()))  # what an app persists
    s2 = retail_rules.turn(stored, [], user_confirmed=True)
    assert s2.transaction_status == "EXECUTING" and s2.confirmation_received
    assert s2.execute == (ToolCall("solicitar_devolucao", {"confirmed": True, "order_id": "123", "reason": "r"}),)
    assert retail_rules.turn(s1, [], user_confirmed=False).transaction_status == "CANCELLED"


def test_a_yes_naming_the_digest_runs_only_the_call_shown(retail_rules: RuleSet) -> None:
    def propose(order_id: str) -> TurnState:
        return retail_rules.turn(
            None, [{"name": "solicitar_devolucao", "arguments": {"order_id": order_id, "reason": "r"}}]
        )

    shown, replaced = propose("1"), propose("2")
    assert shown.pending_digest and shown.pending_digest != replaced.pending_digest
    assert shown.pending_policy_revision == retail_rules.revision
    # The person said yes to order 1, but the model's order 2 replaced it meanwhile.
    again = retail_rules.turn(replaced, [], user_confirmed=shown.pending_digest)
    assert again.awaiting_confirmation and again.execute == () and not again.confirmation_received
    ran = retail_rules.turn(shown, [], user_confirmed=shown.pending_digest)
    assert ran.transaction_status == "EXECUTING"
    assert [c.arguments["order_id"] for c in ran.execute] == ["1"]
    # A state whose pending call was edited after the engine wrote it is refused.
    edited = shown.as_dict()
    edited["pending_tool_call"]["arguments"]["order_id"] = "2"
    with pytest.raises(ProblemError) as info:
        retail_rules.turn(edited, [], user_confirmed=True)
    assert info.value.code == "STATE_INVALID_VALUE"


def test_a_turn_the_engine_cannot_read_as_given_is_refused(retail_rules: RuleSet) -> None:
    # The turn's input is written as the engine reads calls (_calljson), not
    # by json.dumps: an int key would become "1" and a set a TypeError; both
    # are the engine's own refusal now, as a Node turn can only send text.
    for arguments in ({"order_id": "123", 1: "x"}, {"order_id": {"123"}}):
        with pytest.raises(ProblemError) as info:
            retail_rules.turn(None, [{"name": "consultar_pedido", "arguments": arguments}])
        assert info.value.problem.origin == "input", info.value.problem
    with pytest.raises(ProblemError):
        retail_rules.turn(None, [], context={"surface": "confirming", 7: True})


def test_one_transactional_call_per_turn(retail_rules: RuleSet) -> None:
    calls = [
        {"name": "solicitar_devolucao", "arguments": {"order_id": "1", "reason": "r"}},
        {"name": "solicitar_devolucao", "arguments": {"order_id": "2", "reason": "r"}},
    ]
    s = retail_rules.turn(None, calls)
    assert [r.action for r in s.results] == ["await_confirmation", "refused"]
    assert s.results[1].decision.code == "TRANSACTION_LIMIT"


def test_forged_state_is_rejected(retail_rules: RuleSet) -> None:
    with pytest.raises(ProblemError) as info:
        retail_rules.turn({"transaction_status": "AWAITING_CONFIRMATION"}, [])
    assert info.value.problem.origin == "state"


def test_findings(retail_rules: RuleSet) -> None:
    assert not hasattr(retail_rules, "strip_fields")  # contract 0.2.0: the engine forwards
    # SPEC §2: every write in the retail example now confirms (a legacy
    # tool_type no longer takes its confirmation from the defaults' false).
    assert not any(f.problem.code == "TRANSACTIONAL_WITHOUT_CONFIRMATION" for f in retail_rules.findings)
    # Only a tool's own opt-out runs a write unconfirmed, and is reported.
    opted_out = RuleSet.load(
        catalog='{"tools":[{"name":"w","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}}]}',
        policy="version: 1\ntool_policies:\n  w: {operation_type: transactional, require_confirmation: false}\n",
    )
    assert any(f.problem.code == "TRANSACTIONAL_WITHOUT_CONFIRMATION" for f in opted_out.findings)


def test_seed_catalog_loads_standalone() -> None:
    rules = RuleSet.load(catalog=(FIXTURES / "seed-catalog.json").read_text(encoding="utf-8"))
    assert len(rules.list_exposable()) > 0


def test_lone_surrogates_get_a_decision_not_an_exception(retail_rules: RuleSet) -> None:
    assert retail_rules.evaluate("consultar_pedido", {"order_id": "\ud800"}).code == "BAD_REQUEST"
    ctx = {"surface": "confirming", "scopes": ["\ud800"]}
    assert not retail_rules.evaluate("consultar_pedido", {"order_id": "1"}, context=ctx).ok


def test_lone_surrogates_are_sent_as_the_npm_package_sends_them(retail_rules: RuleSet) -> None:
    """An object call's lone surrogate as JSON.stringify's escape (the same
    decision bytes as that text); a context text holding one as a text the
    engine refuses, however a backslash stands before it (an escape in its
    place made `x\\` plus the surrogate a valid, granted scope); turn state
    and input, and rule texts, refused, never decided on a stand-in."""
    # Two surrogate code points in a row are no character in a Python str:
    # refused, never read as the character their escapes would pair to.
    pair = retail_rules.evaluate({"name": "consultar_pedido", "arguments": {"order_id": "\ud83d\ude00"}})
    assert pair.code == "BAD_REQUEST", pair.json
    as_object = retail_rules.evaluate({"name": "consultar_pedido", "arguments": {"order_id": "x\ud800"}})
    as_text = retail_rules.evaluate(b'{"name":"consultar_pedido","arguments":{"order_id":"x\\ud800"}}')
    assert as_object.code == "BAD_REQUEST" and as_object.json == as_text.json
    refused = retail_rules.evaluate_json(LOOKUP, '"\\ud800"')
    assert json.loads(refused)["error"]["code"] == "INVALID_CONTEXT"
    for context in ('{"scopes":["x\\\ud800"]}', '{"scopes":["x\ud800"]}'):
        assert retail_rules.evaluate_json(LOOKUP, context) == refused, context
        assert retail_rules.decide(LOOKUP, context).decision.json == refused, context
        with pytest.raises(ProblemError):
            retail_rules.list_exposable_json(context)
    with pytest.raises(ValueError, match="lone surrogate"):
        retail_rules.turn('{"x":"\ud800"}')
    with pytest.raises(ValueError, match="lone surrogate"):
        retail_rules.turn(None, [{"name": "consultar_pedido", "arguments": {}}], context='{"scopes":["\ud800"]}')
    with pytest.raises(ValueError, match="lone surrogate"):
        RuleSet.load(catalog='{"tools":[{"name":"t\ud800"}]}')


def test_a_context_takes_lists_of_scopes_and_tools_not_a_string() -> None:
    """A str is a sequence of its letters: `Context(scopes=token.scope)`
    would grant one-letter scopes."""
    for field in ("scopes", "allowed_tools"):
        with pytest.raises(TypeError, match="single string"):
            Context(**{field: "abc"})
    assert Context(scopes=("a", "b")).to_dict() == {"surface": "confirming", "scopes": ["a", "b"]}


LOOKUP = b'{"name":"consultar_pedido","arguments":{"order_id":"123"}}'
RETURN = {"name": "solicitar_devolucao", "arguments": {"order_id": "1", "reason": "x", "confirmed": True}}


def test_decide_is_typed_and_keeps_the_bytes(retail_rules: RuleSet) -> None:
    allowed = retail_rules.decide(RETURN, Context(), "argument")
    assert isinstance(allowed, Outcome) and allowed.ok and allowed
    assert allowed.forward == {"confirmed": True, "order_id": "1", "reason": "x"}  # declared: kept
    assert allowed.forward_json == '{"confirmed":true,"order_id":"1","reason":"x"}'
    assert allowed.blocked_result is None and allowed.blocked_result_json is None
    assert allowed.decision.json == retail_rules.evaluate(RETURN, context=Context()).json
    # The default source is "none": the model's confirmed: true does not count.
    denied = retail_rules.decide(RETURN)
    assert not denied.ok and denied.decision.code == "CONFIRMATION_REQUIRED"
    # The digest approvals and seals bind: there while a confirmation is pending.
    assert denied.forward is None and denied.forward_json is None
    assert denied.digest is not None and denied.digest.startswith("sha256:")
    assert denied.blocked_result is not None and denied.blocked_result["isError"] is True
    assert denied.blocked_result["content"] == [{"type": "text", "text": denied.decision.json}]
    assert denied.to_dict() == {
        "decision": denied.decision.json,
        "forward": None,
        "blocked_result": denied.blocked_result_json,
        "digest": denied.digest,
    }
    # A person confirmed: the engine sets the declared field itself.
    person = retail_rules.decide(
        {"name": "solicitar_devolucao", "arguments": {"order_id": "1", "reason": "x"}}, None, "person"
    )
    assert person.ok and person.forward == allowed.forward and person.digest == denied.digest
    assert retail_rules.decide(RETURN, confirmation="invalid").decision.code == "CONFIRMATION_INVALID"
    # The call as JSON text, bytes, a ToolCall: the same outcome.
    text = json.dumps(RETURN)
    for call in (text, text.encode(), ToolCall(RETURN["name"], RETURN["arguments"])):
        assert retail_rules.decide(call, None, "argument") == allowed
    hidden = retail_rules.decide({"name": "nao_existe", "arguments": {}})
    assert hidden.decision.code == "NOT_FOUND" and hidden.blocked_result_json is None and hidden.digest is None


def test_seal_payload_and_a_sealed_confirmation(retail_rules: RuleSet) -> None:
    sid = "seal-id-0123456789"
    payload = retail_rules.seal_payload(RETURN, "user-1", sid, 2_000)
    assert json.loads(payload) == {
        "v": mcp_toolgate.CONTRACT_VERSION,
        "tool": "solicitar_devolucao",
        "digest": retail_rules.decide(RETURN).digest,
        "revision": retail_rules.revision,
        "caller": "user-1",
        "id": sid,
        "expires_ms": 2_000,
    }
    seal = {"payload": payload, "caller": "user-1", "now_ms": 1_999}
    assert retail_rules.decide(RETURN, None, {"seal": seal}).ok
    for changed in ({"now_ms": 2_000}, {"caller": "user-2"}, {"payload": payload.replace("user-1", "user-2")}):
        outcome = retail_rules.decide(RETURN, None, {"seal": {**seal, **changed}})
        assert outcome.decision.code == "CONFIRMATION_INVALID", changed
    with pytest.raises(ProblemError) as info:
        retail_rules.seal_payload(RETURN, "", "short", 1)
    assert info.value.code == "CALL_INVALID_VALUE" and info.value.origin == "call"
    with pytest.raises(ProblemError):
        retail_rules.seal_payload({"name": "nao_existe", "arguments": {}}, "", sid, 1)


@pytest.mark.parametrize(
    "confirmation",
    [
        "yes",
        None,
        True,
        {"seal": {"payload": "p", "caller": ""}},
        {"seal": {"payload": "p", "caller": "", "now_ms": -1}},
        {"seal": {"payload": "p", "caller": "", "now_ms": 1 << 64}},
        {"seal": {"payload": "p", "caller": "", "now_ms": True}},
        {"seal": {"payload": 1, "caller": "", "now_ms": 1}},
        {"seal": {"payload": "p", "caller": "", "now_ms": 1}, "also": 1},
        {"person": True},
    ],
)
def test_a_bad_confirmation_is_a_type_error(retail_rules: RuleSet, confirmation: Any) -> None:
    with pytest.raises(TypeError, match="confirmation"):
        retail_rules.decide(RETURN, None, confirmation)


def test_seal_payload_checks_its_arguments(retail_rules: RuleSet) -> None:
    for args in (("", "seal-id-0123456789", -1), ("", "seal-id-0123456789", 1 << 64), (1, "seal-id-0123456789", 1)):
        with pytest.raises(TypeError):
            retail_rules.seal_payload(RETURN, *args)
    with pytest.raises(ValueError, match="lone surrogate"):
        retail_rules.seal_payload(RETURN, "\ud800", "seal-id-0123456789", 1)


def test_wit_enums_keep_the_api_strings() -> None:
    rules = RuleSet.load(
        catalog='{"tools":[{"name":"w","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}}]}',
        policy="version: 1\ntool_policies:\n  w: {operation_type: transactional, require_confirmation: false}\n",
    )
    assert {f.severity for f in rules.findings} <= {"error", "warning"} and rules.findings
    assert all(type(f.severity) is str and type(f.problem.origin) is str for f in rules.findings)
    with pytest.raises(LoadError) as info:
        RuleSet.load(catalog='{"tools":[]}', policy="version: 1\nfoo: 1\n")
    assert info.value.origin == "policy" and type(info.value.origin) is str
