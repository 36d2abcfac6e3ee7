"""A prepared engine (``toolgate prepare``, the Rust CLI) runs in Python through
``TOOLGATE_COMPONENT``: the prepared texts decide byte for byte as the shipped
component does, and other texts load as ever. Needs target/release/toolgate
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


def test_a_prepared_component_decides_as_the_shipped_one(tmp_path: Path) -> None:
    if not RUST_CLI.is_file():
        if os.environ.get("TOOLGATE_REQUIRE_RUST_CLI") == "1":
            pytest.fail(f"TOOLGATE_REQUIRE_RUST_CLI=1 but {RUST_CLI} is not built")
        pytest.skip(f"{RUST_CLI} is not built")
    out = tmp_path / "prepared"
    subprocess.run(
        [str(RUST_CLI), "prepare", "--policy", str(POLICY), "--catalog", str(CATALOG), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nunknown_key: 1\n", encoding="utf-8")
    texts = [(str(POLICY), str(CATALOG)), (None, str(OTHER_CATALOG)), (str(bad), str(CATALOG))]
    prepared = _answers(texts, out / "toolgate_policy.wasm", tmp_path / "cache")
    shipped = _answers(texts, None, tmp_path / "cache")
    assert prepared == shipped
    assert shipped[-1][:2] == ["refused", "POLICY_UNKNOWN_KEY"]
