"""A prepared engine (``toolgate prepare``, the Rust CLI) runs in Python through
``TOOLGATE_COMPONENT``, ``RuleSet.load(prepared=DIR)`` and ``toolgate eval|list
--prepared DIR``: the prepared texts decide byte for byte as the shipped
component (and the Rust CLI) does, other texts load as ever, and one prepared
from another build's component is refused. Needs target/release/toolgate
(``TOOLGATE_REQUIRE_RUST_CLI=1``: a missing one fails instead of skipping)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, RUST_CLI

POLICY = FIXTURES / "plans-policy.yaml"
CATALOG = FIXTURES / "plans-catalog.json"
OTHER_CATALOG = FIXTURES / "seed-catalog.json"

# Prints every answer a host reads, for the policy and catalog files named.
ANSWERS = r"""
import json, sys
from mcp_toolgate import LoadError, RuleSet
calls = [
    {"name": "alterar_plano", "arguments": {}},
    {"name": "alterar_plano", "arguments": {"customer_id": "c-1", "new_plan_id": "p-2"}},
    {"name": "alterar_plano", "arguments": {"customer_id": "c-1", "new_plan_id": "p-2", "confirmed": True}},
    {"name": "consultar_plano", "arguments": {"customer_id": "c-1"}},
    {"name": "no_such_tool", "arguments": {}},
]
out = []
for policy, catalog in json.loads(sys.argv[1]):
    try:
        rules = RuleSet.load(catalog=open(catalog, encoding="utf-8").read(),
                             policy=None if policy is None else open(policy, encoding="utf-8").read())
    except LoadError as e:
        out.append(["refused", e.code, str(e)])
        continue
    out.append(rules.revision)
    for context in ('{}', '{"surface":"direct"}', '{"scopes":[]}'):
        out.append(rules.list_exposable_json(context))
        out.extend(rules.evaluate_json(json.dumps(c).encode(), context) for c in calls)
print(json.dumps(out))
"""


def _answers(texts: list[tuple[str | None, str]], component: Path | None, cache: Path) -> list:
    env = {**os.environ, "TOOLGATE_CACHE_DIR": str(cache)}
    env.pop("TOOLGATE_COMPONENT", None)
    if component is not None:
        env["TOOLGATE_COMPONENT"] = str(component)
    run = subprocess.run([sys.executable, "-c", ANSWERS, json.dumps(texts)], env=env, capture_output=True, check=True)
    return json.loads(run.stdout)


def _need_rust_cli() -> None:
    if not RUST_CLI.is_file():
        if os.environ.get("TOOLGATE_REQUIRE_RUST_CLI") == "1":
            pytest.fail(f"TOOLGATE_REQUIRE_RUST_CLI=1 but {RUST_CLI} is not built")
        pytest.skip(f"{RUST_CLI} is not built")


def _prepare(out: Path) -> Path:
    _need_rust_cli()
    subprocess.run(
        [str(RUST_CLI), "prepare", "--policy", str(POLICY), "--catalog", str(CATALOG), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return out


def _custom_section(name: str, payload: bytes) -> bytes:
    """A wasm custom section (sizes below 128: one-byte LEB128)."""
    body = bytes([len(name)]) + name.encode() + payload
    assert len(body) < 128
    return bytes([0, len(body)]) + body


def _cli(*args: str, cache: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "TOOLGATE_CACHE_DIR": str(cache)}
    env.pop("TOOLGATE_COMPONENT", None)
    return subprocess.run([sys.executable, "-m", "mcp_toolgate", *args], input=stdin, env=env, capture_output=True)


def test_a_prepared_component_names_the_shipped_one(tmp_path: Path) -> None:
    import hashlib

    import mcp_toolgate
    from mcp_toolgate import _runtime

    out = _prepare(tmp_path / "prepared")
    shipped = Path(mcp_toolgate.__file__).parent / "toolgate_policy.wasm"
    origins = _runtime.custom_sections((out / "toolgate_policy.wasm").read_bytes(), _runtime.PREPARED_FROM)
    assert origins == [hashlib.sha256(shipped.read_bytes()).digest()]
    assert _runtime.custom_sections(shipped.read_bytes(), _runtime.PREPARED_FROM) == []


def test_a_component_prepared_from_another_build_is_refused(tmp_path: Path) -> None:
    from mcp_toolgate import EngineFault, RuleSet

    out = _prepare(tmp_path / "prepared")
    component = out / "toolgate_policy.wasm"
    component.write_bytes(component.read_bytes() + _custom_section("toolgate:prepared-from", bytes([7]) * 32))
    policy, catalog = POLICY.read_text(encoding="utf-8"), CATALOG.read_text(encoding="utf-8")
    with pytest.raises(EngineFault) as refused:
        RuleSet.load(catalog=catalog, policy=policy, prepared=out)
    assert refused.value.code == "COMPONENT_INVALID"
    assert "another build" in refused.value.message
    # The CLI says so (exit 2) and answers nothing; so for a directory without one.
    for where in (out, tmp_path / "nothing"):
        run = _cli("list", "--catalog", str(CATALOG), "--prepared", str(where), cache=tmp_path / "cache")
        assert run.returncode == 2, run.stderr
        assert run.stdout == b""
        assert b"(COMPONENT_INVALID)" in run.stderr
    with pytest.raises(EngineFault, match="cannot read"):
        RuleSet.load(catalog=catalog, prepared=tmp_path / "nothing")


def test_a_prepared_directory_holds_only_what_prepare_made(tmp_path: Path) -> None:
    """A component `toolgate prepare` did not make (the shipped one copied in,
    a stale deploy of another build's) or a file that is not one is refused
    there, COMPONENT_INVALID and exit 2, as the Rust CLI refuses it; the same
    component outside a prepared directory loads as ever."""
    import mcp_toolgate
    from mcp_toolgate import EngineFault, RuleSet

    _need_rust_cli()
    shipped = Path(mcp_toolgate.__file__).parent / "toolgate_policy.wasm"
    catalog = CATALOG.read_text(encoding="utf-8")
    for name, content in (("plain", shipped.read_bytes()), ("text", b"(component)"), ("junk", b"\0asm\x0d\0\x01\0xx")):
        where = tmp_path / name
        where.mkdir()
        (where / "toolgate_policy.wasm").write_bytes(content)
        with pytest.raises(EngineFault) as refused:
            RuleSet.load(catalog=catalog, prepared=where)
        assert refused.value.code == "COMPONENT_INVALID", name
        run = _cli("list", "--catalog", str(CATALOG), "--prepared", str(where), cache=tmp_path / "cache")
        native = subprocess.run(
            [str(RUST_CLI), "list", "--catalog", str(CATALOG), "--prepared", str(where)], capture_output=True
        )
        assert (run.returncode, native.returncode) == (2, 2), (name, run.stderr, native.stderr)
        assert run.stdout == b"" and b"(COMPONENT_INVALID)" in run.stderr, (name, run.stderr)
    assert RuleSet.load(catalog=catalog).list_exposable()


def test_eval_and_list_prepared_answer_as_the_rust_cli(tmp_path: Path) -> None:
    out = _prepare(tmp_path / "prepared")
    calls = (
        b'{"name":"alterar_plano","arguments":{}}\n'
        b'{"name":"consultar_plano","arguments":{"customer_id":"c-1"}}\n'
        b"not json\n"
    )
    for args in (
        ["eval", "--policy", str(POLICY), "--catalog", str(CATALOG)],
        ["eval", "--catalog", str(OTHER_CATALOG)],
        ["list", "--policy", str(POLICY), "--catalog", str(CATALOG), "--surface", "direct"],
    ):
        with_dir = [*args, "--prepared", str(out)]
        python = _cli(*with_dir, cache=tmp_path / "cache", stdin=calls)
        native = subprocess.run([str(RUST_CLI), *with_dir], input=calls, capture_output=True)
        shipped = _cli(*args, cache=tmp_path / "cache", stdin=calls)
        assert python.returncode == 0, python.stderr
        assert native.returncode == 0, native.stderr
        assert python.stdout
        assert python.stdout == native.stdout, args
        assert python.stdout == shipped.stdout, args


def test_a_prepared_component_decides_as_the_shipped_one(tmp_path: Path) -> None:
    out = _prepare(tmp_path / "prepared")
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nunknown_key: 1\n", encoding="utf-8")
    texts = [(str(POLICY), str(CATALOG)), (None, str(OTHER_CATALOG)), (str(bad), str(CATALOG))]
    prepared = _answers(texts, out / "toolgate_policy.wasm", tmp_path / "cache")
    shipped = _answers(texts, None, tmp_path / "cache")
    assert prepared == shipped
    assert shipped[-1][:2] == ["refused", "POLICY_UNKNOWN_KEY"]
