"""SPEC §4-§6 conformance: every shared vector file, byte for byte, through the
Python API and through `python -m mcp_toolgate` (and against the Rust CLI when it
is built)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

import vectorfile
from conftest import RUST_CLI, VECTORS
from mcp_toolgate import LoadError, ProblemError, RuleSet
from mcp_toolgate.cli import main as cli_main

SHARED = sorted(p for p in VECTORS.glob("*.json") if p.name != "host-faults.json")


def test_the_shared_vectors_are_found() -> None:
    """An empty or missing corpus would make every vector test below vanish."""
    assert SHARED, f"no vector files in {VECTORS}"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def run_file(vf: vectorfile.VectorFile) -> None:
    if vf.expect_load_error is not None:
        with pytest.raises(LoadError) as info:
            RuleSet.load(catalog=vf.catalog, policy=vf.policy)
        got = {"code": info.value.problem.code, "line": info.value.problem.line, "column": info.value.problem.column}
        want = {k: vf.expect_load_error[k] for k in vf.expect_load_error}
        assert {k: got[k] for k in want} == want
        return
    rules = RuleSet.load(catalog=vf.catalog, policy=vf.policy)
    for case in vf.cases:
        name = case["name"]
        op = case["op"]
        ctx = case["context_text"] if "context_text" in case else _dumps(case.get("context") or {})
        if op == "evaluate":
            got = rules.evaluate_json(vectorfile.call_bytes(case), ctx)
            assert got == case["expect"], name
            _check_code(case, got)
        elif op == "decide":
            outcome = rules.decide(vectorfile.call_bytes(case), ctx, vectorfile.confirmation(case))
            assert outcome.to_dict() == case["expect"], name
            _check_code(case, outcome.decision.json)
            assert outcome.ok == (outcome.forward_json is not None), name
        elif op == "seal_payload":
            try:
                payload: Any = rules.seal_payload(
                    vectorfile.call_bytes(case), case.get("caller", ""), case.get("id", ""), case.get("expires_ms", 0)
                )
            except ProblemError as exc:  # a problem is the case's answer, as the Rust runner writes it
                payload = {"error": exc.code}
            assert payload == case["expect"], name
        elif op == "list":
            got = rules.list_exposable_json(ctx)
            assert got == case["expect"], name
            if "expect_names" in case:
                assert [t["name"] for t in json.loads(got)["tools"]] == case["expect_names"], name
        elif op == "turn":
            state = "" if case.get("state") is None else _dumps(case["state"])
            got = rules.turn_json(state, _dumps(case["input"]))
            assert got == case["expect"], name
            if "expect_status" in case:
                assert json.loads(got)["transaction_status"] == case["expect_status"], name
        else:
            raise AssertionError(f"{name}: op {op!r} is not run here")


def _check_code(case: dict[str, Any], decision_json: str) -> None:
    """The hand-written `expect_code` (null: allowed), and `ok` agreeing with `error`."""
    if "expect_code" not in case:
        return
    decision = json.loads(decision_json)
    error = decision["error"]
    assert (error["code"] if error else None) == case["expect_code"], case["name"]
    assert decision["ok"] is (error is None), case["name"]


def _flags(context: dict[str, Any] | None) -> list[str] | None:
    """The CLI flags for a context, or None when flags cannot say it."""
    context = context or {}
    if set(context) - {"surface", "scopes", "allowed_tools"}:
        return None
    flags: list[str] = []
    surface = context.get("surface", "confirming")
    if surface not in ("confirming", "direct"):
        return None
    flags += ["--surface", surface]
    for key, flag in (("scopes", "--scopes"), ("allowed_tools", "--allow")):
        value = context.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(
            isinstance(v, str) and v and "," not in v and v.strip() == v for v in value
        ):
            return None
        flags += [flag, ",".join(value)]
    return flags


def _files(vf: vectorfile.VectorFile, tmp: Path) -> list[str]:
    args: list[str] = []
    if vf.policy is not None:
        policy = vf.policy_file or tmp / "policy.yaml"
        if vf.policy_file is None:
            policy.write_text(vf.policy, encoding="utf-8")
        args += ["--policy", str(policy)]
    catalog = vf.catalog_file or tmp / "catalog.txt"
    if vf.catalog_file is None:
        catalog.write_text(vf.catalog, encoding="utf-8")
    return [*args, "--catalog", str(catalog)]


def cli_runs(vf: vectorfile.VectorFile, tmp: Path) -> list[tuple[list[str], bytes, bytes | None]]:
    """(argv, stdin, expected stdout or None for a load error) per CLI run."""
    files = _files(vf, tmp)
    if vf.expect_load_error is not None:
        return [(["list", *files], b"", None)]
    runs: list[tuple[list[str], bytes, bytes | None]] = []
    groups: dict[tuple[str, ...], list[tuple[bytes, str]]] = {}
    for case in vf.cases:
        flags = None if "context_text" in case else _flags(case.get("context"))
        if flags is None:
            continue
        if case["op"] == "list":
            runs.append((["list", *files, *flags], b"", case["expect"].encode("utf-8") + b"\n"))
        elif case["op"] == "evaluate":
            line = vectorfile.call_bytes(case)
            if b"\n" in line or line.endswith(b"\r") or not line.strip(b" \t\n\r\x0c"):
                continue
            groups.setdefault(tuple(flags), []).append((line, case["expect"]))
    for flags_key, items in groups.items():
        stdin = b"".join(line + b"\n" for line, _ in items)
        stdout = b"".join(expect.encode("utf-8") + b"\n" for _, expect in items)
        runs.append((["eval", *files, *flags_key], stdin, stdout))
    return runs


def check_cli(vf: vectorfile.VectorFile) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for argv, stdin, expect in cli_runs(vf, Path(tmp)):
            out, err = io.BytesIO(), io.StringIO()
            rc = cli_main(argv, io.BytesIO(stdin), out, err)
            if expect is None:
                assert rc == 2
                le = vf.expect_load_error or {}
                assert err.getvalue().endswith(f" ({le['code']})\n")
                if le.get("line"):
                    assert f":{le['line']}:{le['column']}: " in err.getvalue()
            else:
                assert (rc, out.getvalue()) == (0, expect), argv


@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_vector_file(path: Path) -> None:
    vf = vectorfile.load(path)
    run_file(vf)
    check_cli(vf)


@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_cli_matches_rust_cli(path: Path) -> None:
    if not RUST_CLI.is_file():
        if os.environ.get("TOOLGATE_REQUIRE_RUST_CLI") == "1":
            pytest.fail(f"TOOLGATE_REQUIRE_RUST_CLI=1 but {RUST_CLI} is not built")
        pytest.skip(f"{RUST_CLI} is not built (cargo build --release -p toolgate)")
    vf = vectorfile.load(path)
    with tempfile.TemporaryDirectory() as tmp:
        for argv, stdin, _ in cli_runs(vf, Path(tmp)):
            rust = subprocess.run([str(RUST_CLI), *argv], input=stdin, capture_output=True)
            py = subprocess.run([sys.executable, "-m", "mcp_toolgate", *argv], input=stdin, capture_output=True)
            assert (py.returncode, py.stdout, py.stderr) == (rust.returncode, rust.stdout, rust.stderr), argv


def test_shared_vectors_present_or_pending() -> None:
    """The shared corpus is read from the repo at test time (none is copied)."""
    assert VECTORS.is_dir()
    assert (VECTORS / "host-faults.json").is_file()


def test_runner_rejects_unknown_fields(tmp_path: Path) -> None:
    good = {"spec": "§4", "description": "x", "policy": None, "catalog_text": '{"tools":[]}', "cases": []}
    outcome = {"decision": "{}", "forward": None, "blocked_result": None, "digest": None}
    seal = {"payload": "p", "caller": "", "now_ms": 1}
    bad_seal = {"seal": {**seal, "nonce": 1}}
    (tmp_path / "ok.json").write_text(json.dumps(good))
    vectorfile.load(tmp_path / "ok.json")
    fine = {
        **good,
        "cases": [
            {
                "name": "a",
                "op": "decide",
                "call": {},
                "expect": outcome,
                "expect_code": None,
                "confirmation": {"seal": seal},
            },
            {"name": "b", "op": "decide", "call_text": "{}", "expect": outcome, "expect_code": None},
            {"name": "c", "op": "seal_payload", "call": {}, "caller": "", "id": "x", "expires_ms": 0, "expect": "p"},
            {"name": "d", "op": "seal_payload", "call": {}, "expect": {"error": "CALL_INVALID_VALUE"}},
        ],
    }
    (tmp_path / "fine.json").write_text(json.dumps(fine))
    assert len(vectorfile.load(tmp_path / "fine.json").cases) == 4
    for bad in (
        {**good, "extra": 1},
        {**good, "cases": [{"name": "n", "op": "list", "expect": "", "surprise": True}]},
        {**good, "cases": [{"name": "n", "op": "evaluate", "expect": "", "call": {}, "call_text": "{}"}]},
        {**good, "cases": [{"name": "n", "op": "frobnicate", "expect": ""}]},
        {**good, "cases": [{"name": "n", "op": "strip_fields", "tool": "t", "expect": []}]},
        {**good, "cases": [{"name": "n", "op": "decide", "call": {}, "expect": {**outcome, "extra": None}}]},
        {**good, "cases": [{"name": "n", "op": "decide", "call": {}, "expect": {"decision": "{}"}}]},
        {**good, "cases": [{"name": "n", "op": "decide", "call": {}, "expect": outcome, "tool": "t"}]},
        {**good, "cases": [{"name": "n", "op": "decide", "call": {}, "expect": outcome, "confirmation": "maybe"}]},
        {**good, "cases": [{"name": "n", "op": "decide", "call": {}, "expect": outcome, "confirmation": bad_seal}]},
        {**good, "cases": [{"name": "n", "op": "decide", "expect": outcome}]},
        {**good, "cases": [{"name": "n", "op": "seal_payload", "call": {}, "expect": {"error": "X", "why": "?"}}]},
        {**good, "cases": [{"name": "n", "op": "seal_payload", "call": {}, "expect": "p", "expires_ms": -1}]},
        {**good, "cases": [{"name": "n", "op": "seal_payload", "call": {}, "expect": "p", "context": {}}]},
        {**good, "expect_load_error": {"code": "X", "line": 1, "column": 1, "hint": "?"}},
        # Each op's hand-written anchor is required beside `expect`.
        {**good, "cases": [{"name": "n", "op": "decide", "call": {}, "expect": outcome}]},
        {**good, "cases": [{"name": "n", "op": "evaluate", "call": {}, "expect": ""}]},
        {**good, "cases": [{"name": "n", "op": "list", "expect": ""}]},
        {**good, "cases": [{"name": "n", "op": "turn", "state": None, "input": {}, "expect": ""}]},
        {k: v for k, v in good.items() if k != "catalog_text"},
    ):
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(vectorfile.VectorFormatError):
            vectorfile.load(tmp_path / "bad.json")
