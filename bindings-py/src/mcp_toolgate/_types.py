"""Typed views of what the component returns. Each keeps the exact bytes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from ._calljson import engine_json
from ._faults import FAULTS

Surface = Literal["confirming", "direct"]

#: How the host obtained the confirmation for a call (docs/spec.md §8, WIT
#: ``confirmation``): ``"none"`` (nothing but the call: confirmation fields the
#: model wrote never count), ``"argument"`` (the model's literal
#: ``confirmed: true`` counts), ``"person"`` (the host asked the person about
#: this very call and they accepted), ``"invalid"`` (a seal the host could not
#: accept: denied ``CONFIRMATION_INVALID``), or a seal the host opened and
#: authenticated with its own key:
#: ``{"seal": {"payload": str, "caller": str, "now_ms": int}}`` (``now_ms``:
#: the host's clock, milliseconds since the Unix epoch).
Confirmation = Literal["none", "argument", "person", "invalid"] | Mapping[str, Mapping[str, Any]]


_DECODER = json.JSONDecoder()


def _object_spans(text: str, start: int) -> tuple[dict[str, tuple[int, int]], int]:
    """The raw span of each member value of the compact JSON object at `start`."""
    spans: dict[str, tuple[int, int]] = {}
    i = start + 1
    if text[i] == "}":
        return spans, i + 1
    while True:
        key, i = _DECODER.raw_decode(text, i)
        i += 1  # ':'
        _, end = _DECODER.raw_decode(text, i)
        spans[key] = (i, end)
        i = end + 1
        if text[end] == "}":
            return spans, i


def _array_spans(text: str, start: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    i = start + 1
    if text[i] == "]":
        return spans
    while True:
        _, end = _DECODER.raw_decode(text, i)
        spans.append((i, end))
        if text[end] == "]":
            return spans
        i = end + 1


@dataclass(frozen=True)
class Context:
    """Who is calling (SPEC §1): the surface, granted scopes, the route's allowlist.

    ``None`` means "no check" for ``scopes`` and ``allowed_tools``; an empty
    sequence grants nothing.
    """

    surface: Surface = "confirming"
    scopes: Sequence[str] | None = None
    allowed_tools: Sequence[str] | None = None

    def __post_init__(self) -> None:
        # A str is a sequence of its letters: Context(scopes=token.scope)
        # would grant one-letter scopes (the engine refuses a string there).
        for name in ("scopes", "allowed_tools"):
            if isinstance(getattr(self, name), (str, bytes, bytearray)):
                raise TypeError(f"Context.{name} must be a list of strings (or None), not a single string")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"surface": self.surface}
        if self.scopes is not None:
            out["scopes"] = list(self.scopes)
        if self.allowed_tools is not None:
            out["allowed_tools"] = list(self.allowed_tools)
        return out

    def to_json(self) -> str:
        return engine_json(self.to_dict())


ContextLike = Context | Mapping[str, Any] | str | None


def context_json(context: ContextLike) -> str:
    if context is None:
        return '{"surface":"confirming"}'
    if isinstance(context, Context):
        return context.to_json()
    if isinstance(context, str):
        return context
    return engine_json(dict(context))


@dataclass(frozen=True)
class Problem:
    """Why something could not be loaded or computed (WIT ``problem``)."""

    code: str
    message: str
    origin: str
    path: str = ""
    line: int = 0
    column: int = 0

    def location(self, policy_file: str | None = None, catalog_file: str | None = None) -> str:
        """``file:line:column`` (or ``file`` when there is no position)."""
        name = (policy_file if self.origin == "policy" else None) or catalog_file or self.origin
        if self.line == 0:
            return name
        return f"{name}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Finding:
    """A lint on loaded rules: ``severity`` is ``error`` or ``warning``."""

    severity: str
    problem: Problem


@dataclass(frozen=True)
class Decision:
    """One decision (SPEC §5). ``json`` holds the canonical bytes, verbatim."""

    json: str
    ok: bool
    code: str | None
    message: str | None
    retryable: bool | None
    outcome: str | None
    tool: str | None
    blocked_by_policy: bool
    metadata: Mapping[str, Any] = field(repr=False)
    error: Mapping[str, Any] | None = field(repr=False)

    @classmethod
    def from_json(cls, text: str) -> Decision:
        data = json.loads(text)
        error = data.get("error")
        metadata = data.get("metadata") or {}
        return cls(
            json=text,
            ok=bool(data.get("ok")),
            code=error.get("code") if error else None,
            message=error.get("message") if error else None,
            retryable=error.get("retryable") if error else None,
            outcome=error.get("outcome") if error else None,
            tool=metadata.get("tool"),
            blocked_by_policy=bool(metadata.get("blocked_by_policy")),
            metadata=metadata,
            error=error,
        )

    @property
    def details(self) -> Any:
        return self.error.get("details") if self.error else None

    @property
    def policy_revision(self) -> str | None:
        return self.metadata.get("policy_revision")

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self.json)

    def __str__(self) -> str:
        return self.json

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class ToolCall:
    """A call as ``{"name", "arguments"}``."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": dict(self.arguments)}

    @classmethod
    def from_value(cls, value: Any) -> ToolCall | None:
        if value is None:
            return None
        return cls(name=value["name"], arguments=value.get("arguments") or {})


@dataclass(frozen=True)
class TurnResultEntry:
    """What the turn did with one proposed call."""

    name: str
    action: str  # execute | await_confirmation | refused | already_selected
    decision: Decision


@dataclass(frozen=True)
class TurnState:
    """The state after one turn (SPEC §6). ``json`` is the engine's exact output;
    persist ``as_dict()`` (or ``json``) and pass it back as the next turn's state."""

    json: str = field(repr=False)
    transaction_status: str
    pending_tool_call: ToolCall | None
    available_mcp_tools: tuple[str, ...]
    selected_tool_call: ToolCall | None
    tool_policy_result: Decision | None
    confirmation_required: bool
    confirmation_received: bool
    execute: tuple[ToolCall, ...]
    results: tuple[TurnResultEntry, ...]
    #: What the person is asked (the pending call under these rules): pass
    #: it as ``user_confirmed`` so the yes runs only the call they were shown.
    pending_digest: str | None = None
    #: The rules' revision the pending call was asked under; a yes under
    #: other rules is asked again.
    pending_policy_revision: str | None = None

    @classmethod
    def from_json(cls, text: str) -> TurnState:
        data = json.loads(text)
        # Decisions keep the engine's exact bytes: cut them out of the text.
        top, _ = _object_spans(text, 0)
        policy_span = top["tool_policy_result"]
        policy = text[policy_span[0] : policy_span[1]]
        decisions = []
        for a, _b in _array_spans(text, top["results"][0]):
            entry, _ = _object_spans(text, a)
            d0, d1 = entry["decision"]
            decisions.append(text[d0:d1])
        return cls(
            json=text,
            transaction_status=data["transaction_status"],
            pending_tool_call=ToolCall.from_value(data.get("pending_tool_call")),
            available_mcp_tools=tuple(data.get("available_mcp_tools") or ()),
            selected_tool_call=ToolCall.from_value(data.get("selected_tool_call")),
            tool_policy_result=Decision.from_json(policy) if policy != "null" else None,
            confirmation_required=bool(data.get("confirmation_required")),
            confirmation_received=bool(data.get("confirmation_received")),
            execute=tuple(ToolCall.from_value(c) for c in data.get("execute") or ()),  # type: ignore[misc]
            results=tuple(
                TurnResultEntry(r["name"], r["action"], Decision.from_json(raw))
                for r, raw in zip(data.get("results") or (), decisions, strict=True)
            ),
            pending_digest=data.get("pending_digest"),
            pending_policy_revision=data.get("pending_policy_revision"),
        )

    @property
    def awaiting_confirmation(self) -> bool:
        return self.transaction_status == "AWAITING_CONFIRMATION"

    def as_dict(self) -> dict[str, Any]:
        """A plain dict of the state, for the app to persist."""
        return json.loads(self.json)


def blocked_result_json(decision_json: str) -> str:
    """The MCP ``CallToolResult`` JSON for a blocked call, in the engine's shape
    (``blocked_result`` in policy-core/src/pipeline.rs) for a decision about no
    tool (so no output schema): the decision JSON as text and as
    ``structuredContent``. Used for the host's own fault decisions, byte for
    byte as every host builds them (the text escaped as serde_json does, which
    ``json.dumps(..., ensure_ascii=False)`` matches: both escape only ``"``,
    ``\\`` and control characters, the same way)."""
    text = json.dumps(decision_json, ensure_ascii=False)
    return f'{{"content":[{{"type":"text","text":{text}}}],"structuredContent":{decision_json},"isError":true}}'


@dataclass(frozen=True)
class Outcome:
    """What ``RuleSet.decide`` answers (WIT ``outcome``): the decision and what
    the host does with it.

    - allowed: forward exactly ``forward`` (the arguments, as the engine wrote
      them in ``forward_json``);
    - denied with ``blocked_result``: answer the ``tools/call`` with it (the MCP
      ``CallToolResult``, exact bytes in ``blocked_result_json``);
    - denied without one (``NOT_FOUND``): answer as the server answers a tool
      it does not have.

    ``digest`` is the call digest (``sha256:…``) approvals and seals bind, when
    the call names a tool the caller may see with object arguments. The
    ``…_json`` fields are the engine's exact bytes; ``forward`` and
    ``blocked_result`` are parsed on first use."""

    decision: Decision
    forward_json: str | None
    blocked_result_json: str | None
    digest: str | None

    @property
    def ok(self) -> bool:
        """Whether the call is allowed (``decision.ok``)."""
        return self.decision.ok

    @cached_property
    def forward(self) -> dict[str, Any] | None:
        """The arguments to forward, parsed (``None`` when denied)."""
        return None if self.forward_json is None else json.loads(self.forward_json)

    @cached_property
    def blocked_result(self) -> dict[str, Any] | None:
        """The blocked ``CallToolResult``, parsed (``None`` when allowed or ``NOT_FOUND``)."""
        return None if self.blocked_result_json is None else json.loads(self.blocked_result_json)

    def to_dict(self) -> dict[str, str | None]:
        """The outcome as the conformance vectors write it (every field the exact text or ``None``)."""
        return {
            "decision": self.decision.json,
            "forward": self.forward_json,
            "blocked_result": self.blocked_result_json,
            "digest": self.digest,
        }

    def __bool__(self) -> bool:
        return self.ok


def fault_outcome(code: str) -> Outcome:
    """The outcome of a call the engine could not decide (SPEC §7): the host-built
    decision and its blocked result, nothing forwarded, no digest (as
    ``Outcome::fault`` in host-rs)."""
    decision = FAULTS[code]
    return Outcome(Decision.from_json(decision), None, blocked_result_json(decision), None)
