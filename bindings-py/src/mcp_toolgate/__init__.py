"""toolgate: the MCP tool-call policy engine, from Python.

The decisions come from the same WebAssembly component every toolgate runtime
runs (shipped inside this package); nothing is re-implemented here.

    >>> from mcp_toolgate import RuleSet, Context
    >>> rules = RuleSet.from_files("tools.yaml", policy="tool_policies.yaml")
    >>> d = rules.evaluate("alterar_plano", {"customer_id": "42", "new_plan_id": "X"}, context=Context())
    >>> d.ok, d.code, d.json        # typed fields, canonical bytes kept
    >>> o = rules.decide({"name": "alterar_plano", "arguments": {...}}, Context(), "none")
    >>> o.forward, o.blocked_result  # what to forward, or what to answer with

``StateKeys`` (sealed ``requestState``, :mod:`mcp_toolgate.seal`) is loaded on first
use: ``import mcp_toolgate`` does not import ``cryptography``.
"""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from .seal import MAX_STATE_TOKEN_BYTES, MIN_SECRET_BYTES, InvalidStateError, StateKeyError, StateKeys

__version__ = "0.1.0"

_SEAL_NAMES = frozenset(
    {"MAX_STATE_TOKEN_BYTES", "MIN_SECRET_BYTES", "InvalidStateError", "StateKeyError", "StateKeys"}
)


def __getattr__(name: str) -> Any:
    # The sealed-state codec, on first use (PEP 562).
    if name in _SEAL_NAMES:
        from . import seal

        return getattr(seal, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CONTRACT_VERSION",
    "FAULTS",
    "MAX_INPUT_BYTES",
    "MAX_STATE_TOKEN_BYTES",
    "MIN_SECRET_BYTES",
    "POLICY_ENV",
    "Confirmation",
    "Context",
    "Decision",
    "EngineFault",
    "Finding",
    "InvalidStateError",
    "LoadError",
    "Outcome",
    "Problem",
    "ProblemError",
    "RuleSet",
    "StateKeyError",
    "StateKeys",
    "ToolCall",
    "ToolgateError",
    "TurnResultEntry",
    "TurnState",
    "component_path",
    "contract_version",
]
