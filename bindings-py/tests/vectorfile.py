"""Reads a conformance vector file (tests/vectors/README.md), rejecting unknown fields."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILE_KEYS = {"spec", "description", "policy", "policy_text", "catalog", "catalog_text", "expect_load_error", "cases"}
LOAD_ERROR_KEYS = {"code", "line", "column"}
CASE_KEYS = {
    # component_only: a case the native engine (no guest meter) does not run.
    "evaluate": {
        "name",
        "op",
        "context",
        "context_text",
        "call",
        "call_text",
        "call_hex",
        "expect",
        "expect_code",
        "component_only",
    },
    "list": {"name", "op", "context", "expect", "expect_names"},
    "turn": {"name", "op", "state", "input", "expect", "expect_status"},
    # The call pipeline: `confirmation` absent is "none".
    "decide": {
        "name",
        "op",
        "context",
        "context_text",
        "call",
        "call_text",
        "call_hex",
        "confirmation",
        "expect",
        "expect_code",
        "component_only",
    },
    "seal_payload": {"name", "op", "call", "call_text", "call_hex", "caller", "id", "expires_ms", "expect"},
}
# `expect` and each op's hand-written anchor beside it (`vectors --write`
# rewrites `expect`: a wrong engine cannot bless itself), as the Node and Rust
# runners require them.
REQUIRED = {
    "evaluate": {"expect", "expect_code"},
    "list": {"expect", "expect_names"},
    "turn": {"input", "expect", "expect_status"},
    "decide": {"expect", "expect_code"},
    "seal_payload": {"expect"},
}
#: Ops that send a call (exactly one of call, call_text, call_hex).
CALL_OPS = {"evaluate", "decide", "seal_payload"}
OUTCOME_KEYS = ("decision", "forward", "blocked_result", "digest")
CONFIRMATIONS = {"none", "argument", "person", "invalid"}
SEAL_KEYS = {"payload", "caller", "now_ms"}
U64_MAX = (1 << 64) - 1


class VectorFormatError(ValueError):
    pass


def _check_keys(where: str, value: Any, allowed: set[str]) -> None:
    if not isinstance(value, dict):
        raise VectorFormatError(f"{where}: must be an object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise VectorFormatError(f"{where}: unknown field(s) {unknown}")


@dataclass
class VectorFile:
    path: Path
    policy: str | None
    catalog: str
    policy_file: Path | None
    catalog_file: Path | None
    expect_load_error: dict[str, Any] | None
    cases: list[dict[str, Any]]


def call_bytes(case: dict[str, Any]) -> bytes:
    given = [k for k in ("call", "call_text", "call_hex") if k in case]
    if len(given) != 1:
        raise VectorFormatError(f"case {case.get('name')!r}: exactly one of call, call_text, call_hex")
    if "call" in case:
        return json.dumps(case["call"], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if "call_text" in case:
        return case["call_text"].encode("utf-8")
    return bytes.fromhex(case["call_hex"])


def _is_u64(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= U64_MAX


def confirmation(case: dict[str, Any]) -> Any:
    """A `decide` case's confirmation as `RuleSet.decide` takes it (absent: "none")."""
    return case.get("confirmation", "none")


def _check_decide(at: str, case: dict[str, Any]) -> None:
    expect = case["expect"]
    _check_keys(f"{at}: expect", expect, set(OUTCOME_KEYS))
    if set(expect) != set(OUTCOME_KEYS) or not isinstance(expect["decision"], str):
        raise VectorFormatError(f"{at}: expect needs decision (a string), forward, blocked_result and digest")
    for key in OUTCOME_KEYS[1:]:
        if expect[key] is not None and not isinstance(expect[key], str):
            raise VectorFormatError(f"{at}: expect.{key} must be a string or null")
    if "confirmation" in case:
        value = case["confirmation"]
        if isinstance(value, str):
            if value not in CONFIRMATIONS:
                raise VectorFormatError(f"{at}: unknown confirmation {value!r}")
        else:
            _check_keys(f"{at}: confirmation", value, {"seal"})
            seal = value.get("seal")
            _check_keys(f"{at}: confirmation.seal", seal, SEAL_KEYS)
            if not (
                isinstance(seal.get("payload"), str)
                and isinstance(seal.get("caller"), str)
                and _is_u64(seal.get("now_ms"))
            ):
                raise VectorFormatError(f"{at}: confirmation.seal needs payload, caller (strings) and now_ms (u64)")


def _check_seal_payload(at: str, case: dict[str, Any]) -> None:
    expect = case["expect"]
    if not isinstance(expect, str) and not (
        isinstance(expect, dict) and list(expect) == ["error"] and isinstance(expect["error"], str)
    ):
        raise VectorFormatError(f'{at}: expect must be the payload string or {{"error": CODE}}')
    for key in ("caller", "id"):
        if key in case and not isinstance(case[key], str):
            raise VectorFormatError(f"{at}: {key} must be a string")
    if "expires_ms" in case and not _is_u64(case["expires_ms"]):
        raise VectorFormatError(f"{at}: expires_ms must be an integer from 0 to 2**64 - 1")


def load(path: Path) -> VectorFile:
    data = json.loads(path.read_text(encoding="utf-8"))
    _check_keys(path.name, data, FILE_KEYS)
    base = path.parent
    if "policy" in data and "policy_text" in data:
        raise VectorFormatError(f"{path.name}: at most one of policy, policy_text")
    if ("catalog" in data) == ("catalog_text" in data):
        raise VectorFormatError(f"{path.name}: exactly one of catalog, catalog_text")
    policy_file = None
    policy = data.get("policy_text")
    if data.get("policy") is not None:
        policy_file = base / data["policy"]
        policy = policy_file.read_text(encoding="utf-8")
    catalog_file = None
    if "catalog" in data:
        catalog_file = base / data["catalog"]
        catalog = catalog_file.read_text(encoding="utf-8")
    else:
        catalog = data["catalog_text"]
    expect_load_error = data.get("expect_load_error")
    if expect_load_error is not None:
        _check_keys(f"{path.name}: expect_load_error", expect_load_error, LOAD_ERROR_KEYS)
    cases = data.get("cases")
    if cases is None:
        if expect_load_error is None:
            raise VectorFormatError(f"{path.name}: cases are required unless expect_load_error is given")
        cases = []
    if not isinstance(cases, list):
        raise VectorFormatError(f"{path.name}: cases must be an array")
    for i, case in enumerate(cases):
        if not isinstance(case, dict) or case.get("op") not in CASE_KEYS:
            raise VectorFormatError(
                f"{path.name}: cases[{i}]: unknown op {case.get('op') if isinstance(case, dict) else case!r}"
            )
        _check_keys(f"{path.name}: cases[{i}] ({case.get('name')})", case, CASE_KEYS[case["op"]])
        missing = ({"name", "op"} | REQUIRED[case["op"]]) - set(case)
        if missing:
            raise VectorFormatError(f"{path.name}: cases[{i}]: missing {sorted(missing)}")
        at = f"{path.name}: cases[{i}] ({case.get('name')})"
        if case["op"] in CALL_OPS:
            call_bytes(case)
            if "context" in case and "context_text" in case:
                raise VectorFormatError(f"{at}: at most one of context, context_text")
        if "expect_code" in case and case["expect_code"] is not None and not isinstance(case["expect_code"], str):
            raise VectorFormatError(f"{at}: expect_code must be a string or null")
        if case["op"] == "decide":
            _check_decide(at, case)
        elif case["op"] == "seal_payload":
            _check_seal_payload(at, case)
    return VectorFile(path, policy, catalog, policy_file, catalog_file, expect_load_error, cases)
