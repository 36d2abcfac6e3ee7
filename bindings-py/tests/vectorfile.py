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
    "turn": {"name", "op", "state", "input", "expect"},
    "strip_fields": {"name", "op", "tool", "expect"},
}
REQUIRED = {"evaluate": {"expect"}, "list": {"expect"}, "turn": {"input", "expect"}, "strip_fields": {"tool", "expect"}}


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
        if case["op"] == "evaluate":
            call_bytes(case)
            if "context" in case and "context_text" in case:
                raise VectorFormatError(f"{path.name}: cases[{i}]: at most one of context, context_text")
    return VectorFile(path, policy, catalog, policy_file, catalog_file, expect_load_error, cases)
