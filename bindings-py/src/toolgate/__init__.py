"""toolgate: the MCP tool-call policy engine, from Python.

The decisions come from the same WebAssembly component every toolgate runtime
runs (shipped inside this package); nothing is re-implemented here.

    >>> from toolgate import RuleSet, Context
    >>> rules = RuleSet.from_files("tools.yaml", policy="tool_policies.yaml")
    >>> d = rules.evaluate("alterar_plano", {"new_plan_id": "X"}, context=Context())
    >>> d.ok, d.code, d.json        # typed fields, canonical bytes kept
    >>> o = rules.decide({"name": "alterar_plano", "arguments": {...}}, Context(), "none")
    >>> o.forward, o.blocked_result  # what to forward, or what to answer with
"""

from ._faults import FAULTS, MAX_INPUT_BYTES
from ._rules import (
    POLICY_ENV,
    EngineFault,
    LoadError,
    ProblemError,
    RuleSet,
    ToolgateError,
    contract_version,
)
from ._runtime import CONTRACT_VERSION, component_path
from ._types import (
    Confirmation,
    Context,
    Decision,
    Finding,
    Outcome,
    Problem,
    ToolCall,
    TurnResultEntry,
    TurnState,
)

__version__ = "0.1.0"

__all__ = [
    "CONTRACT_VERSION",
    "FAULTS",
    "MAX_INPUT_BYTES",
    "POLICY_ENV",
    "Confirmation",
    "Context",
    "Decision",
    "EngineFault",
    "Finding",
    "LoadError",
    "Outcome",
    "Problem",
    "ProblemError",
    "RuleSet",
    "ToolCall",
    "ToolgateError",
    "TurnResultEntry",
    "TurnState",
    "component_path",
    "contract_version",
]
