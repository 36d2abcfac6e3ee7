"""Shared paths. Tests run against the installed `toolgate` (scripts/test.sh
installs the wheel it builds); the repo's shared vectors are read in place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

BINDINGS = Path(__file__).resolve().parent.parent
REPO = BINDINGS.parent
VECTORS = REPO / "tests" / "vectors"
FIXTURES = VECTORS / "fixtures"
EXAMPLES = REPO / "examples"
RUST_CLI = Path(os.environ.get("TOOLGATE_RUST_CLI", REPO / "target" / "release" / "toolgate"))


@pytest.fixture(scope="session")
def retail_rules():
    from mcp_toolgate import RuleSet

    return RuleSet.from_files(FIXTURES / "retail-tools.yaml", FIXTURES / "retail-policy.yaml")
