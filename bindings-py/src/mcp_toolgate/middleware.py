"""Server side: toolgate in front of an official ``mcp`` SDK server (1.x).

    mcp = FastMCP("retail")            # or a low-level mcp.server.lowlevel.Server
    ...                                # register tools as usual
    protect(mcp, policy="tool_policies.yaml")

The same rules as the Node middleware (bindings-js ``guardServer``):

- ``tools/list`` shows only the tools this context may see, in the engine's
  order (by name); each entry is the server's own tool object with the
  engine's derived annotations laid over its own;
- ``tools/call`` is decided by the engine's call pipeline (``RuleSet.decide``)
  before the handler runs. An allowed call reaches the handler with exactly
  the arguments the engine forwards; a blocked call gets exactly the engine's
  blocked result (the decision's canonical JSON as text and, unless the tool's
  catalog entry declares an ``outputSchema``, as ``structuredContent``); a
  hidden or unknown tool answers exactly as the SDK answers an unknown tool.
  This middleware never adds, removes or reads the confirmation fields itself:
  the engine does, according to ``confirmation`` (see :func:`protect`);
- the engine decides on exactly the values the handler gets: the arguments are
  written for it by ``_calljson`` (``inf``/``nan`` from ``1e400``,
  ``Infinity``, ``NaN`` on the wire are refused by the engine, never rewritten),
  and on FastMCP, whose handlers get the arguments as its pydantic model
  validated them (coercions, defaults, JSON pre-parsing of strings), those
  validated arguments are decided again when they differ from the ones
  forwarded (with the keys the engine took off the call as the call carried
  them: the engine decides what they mean, as on the first decision; a
  parameter left out whose value is ``None`` counts as absent); a deny is the
  call's result, and an allow runs the handler with the keys the engine
  forwards this time;
- the default context is the confirming surface, with the scopes of the
  request's access token when the transport authenticated it.

The catalog is the server's own ``tools/list`` unless one is given.
"""

from __future__ import annotations

import contextvars
import functools
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcp import types
from mcp.server.lowlevel import Server

from ._calljson import call_json, engine_json
from ._rules import RuleSet
from ._types import Context, ContextLike, Decision, Outcome
from .router import catalog_from_tools

ContextFactory = Callable[[Any], ContextLike]
UnknownTool = Callable[[str], types.CallToolResult]
OnDecision = Callable[[Decision, str], None]

#: The confirmation sources this middleware can be set up with.
ConfirmationSource = Literal["argument", "none"]
CONFIRMATIONS: tuple[ConfirmationSource, ...] = ("argument", "none")


@dataclass
class _Allowed:
    """What the engine allowed for the call in progress (FastMCP's handler check):
    the arguments as the call carried them, what the engine forwarded, and the
    context it decided in."""

    name: str
    sent: Any
    forward: dict[str, Any]
    context: ContextLike
    rules: RuleSet
    denied: Outcome | None = None


_ALLOWED: contextvars.ContextVar[_Allowed | None] = contextvars.ContextVar("toolgate_allowed", default=None)
_CHECKED = "__toolgate_checked__"


class _Denied(Exception):
    """Raised in place of a FastMCP handler whose validated arguments the engine denied."""


def _same_arguments(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether the engine would read the same arguments (top-level key order aside)."""
    return a.keys() == b.keys() and all(engine_json(a[k]) == engine_json(b[k]) for k in a)


def default_context(request_context: Any = None) -> Context:
    """The confirming surface; the access token's scopes when the request was
    authenticated (no token: no scope check)."""
    try:
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
    except Exception:  # pragma: no cover - auth extras missing
        token = None
    if token is None:
        return Context()
    return Context(scopes=list(token.scopes or ()))


def sdk_unknown_tool(name: str) -> types.CallToolResult:
    """What the SDK answers for a tool it does not have: FastMCP's ToolManager
    raises ``ToolError("Unknown tool: <name>")`` and the server turns it into
    an error result with that text."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"Unknown tool: {name}")], isError=True)


def blocked_result(outcome: Outcome) -> types.CallToolResult:
    """The engine's blocked result (``outcome.blocked_result_json``) as the
    SDK's ``CallToolResult``; the SDK writes it back as the same JSON."""
    if outcome.blocked_result_json is None:
        raise ValueError("this outcome has no blocked result")
    return types.CallToolResult.model_validate_json(outcome.blocked_result_json)


def _text(value: str | os.PathLike[str] | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, os.PathLike) or (isinstance(value, str) and "\n" not in value and _is_file(value)):
        return Path(value).read_text(encoding="utf-8")
    return value


def _is_file(value: str) -> bool:
    try:
        return Path(value).is_file()
    except (OSError, ValueError):  # a one-line JSON text too long (or odd) for a path: text
        return False


class Guard:
    """The installed middleware; ``rules`` is built on first use."""

    def __init__(
        self,
        server: Server[Any, Any],
        *,
        fastmcp: Any = None,
        rules: RuleSet | None,
        policy: str | None,
        catalog: str | None,
        context: ContextFactory | ContextLike,
        unknown_tool: UnknownTool,
        confirmation: ConfirmationSource,
        on_decision: OnDecision | None,
    ) -> None:
        if confirmation not in CONFIRMATIONS:
            raise ValueError("confirmation must be 'argument' or 'none'")
        self.confirmation: ConfirmationSource = confirmation
        self._on_decision = on_decision
        self.server = server
        self._fastmcp = fastmcp
        self._rules = rules
        self._policy = policy
        self._catalog = catalog
        self._context = context
        self._unknown_tool = unknown_tool
        self._list: Callable[[Any], Awaitable[Any]] = server.request_handlers[types.ListToolsRequest]
        self._call: Callable[[Any], Awaitable[Any]] = server.request_handlers[types.CallToolRequest]
        server.request_handlers[types.ListToolsRequest] = self._handle_list
        server.request_handlers[types.CallToolRequest] = self._handle_call

    async def rules(self) -> RuleSet:
        if self._rules is None:
            catalog = self._catalog
            if catalog is None:
                listed = await self._list(types.ListToolsRequest(method="tools/list"))
                catalog = catalog_from_tools(listed.root.tools)
            self._rules = RuleSet.load(catalog=catalog, policy=self._policy)
        return self._rules

    def reload(self) -> None:
        """Rebuild the rules on the next request (after tools were added)."""
        self._rules = None

    def context(self) -> ContextLike:
        if not callable(self._context):
            return self._context
        try:
            request_context = self.server.request_context
        except LookupError:
            request_context = None
        return self._context(request_context)

    def _decide(self, rules: RuleSet, name: str, arguments: Any, context: ContextLike) -> Outcome:
        """One call through the engine's pipeline; reports the decision."""
        # The exact values the handler gets (see _calljson): never json.dumps.
        outcome = rules.decide(call_json(name, arguments), context, self.confirmation)
        if self._on_decision is not None:
            self._on_decision(outcome.decision, name)
        return outcome

    def _denied(self, name: str, outcome: Outcome) -> types.CallToolResult:
        """The answer to a denied call: the engine's blocked result, or (none:
        ``NOT_FOUND``) the SDK's answer for a tool it does not have."""
        if outcome.blocked_result_json is None:
            return self._unknown_tool(name)
        return blocked_result(outcome)

    async def _handle_list(self, req: Any) -> types.ServerResult:
        rules = await self.rules()
        exposed = rules.list_exposable(self.context())
        result = await self._list(req)  # the SDK refreshes its tool cache
        listed = result.root
        served = {t.name: t for t in listed.tools}
        tools = []
        for entry in exposed:
            tool = served.get(entry["name"])
            if tool is None:
                continue  # in the catalog, not on this server
            annotations = {
                **(tool.annotations.model_dump(exclude_none=True) if tool.annotations else {}),
                **entry.get("annotations", {}),
            }
            tools.append(tool.model_copy(update={"annotations": types.ToolAnnotations.model_validate(annotations)}))
        return types.ServerResult(listed.model_copy(update={"tools": tools}))

    async def _handle_call(self, req: types.CallToolRequest) -> types.ServerResult:
        name = req.params.name
        sent = req.params.arguments or {}
        rules = await self.rules()
        context = self.context()
        outcome = self._decide(rules, name, sent, context)
        if not outcome.ok:
            return types.ServerResult(self._denied(name, outcome))
        # Allowed: the handler gets exactly the arguments the engine forwards.
        forward = outcome.forward
        assert forward is not None  # RuleSet.decide: an allow always forwards
        req = req.model_copy(update={"params": req.params.model_copy(update={"arguments": dict(forward)})})
        if not self._check_tool(name):
            return await self._call(req)  # type: ignore[no-any-return]
        allowed = _Allowed(name, sent, forward, context, rules)
        token = _ALLOWED.set(allowed)
        try:
            result = await self._call(req)
        finally:
            _ALLOWED.reset(token)
        if allowed.denied is not None:
            return types.ServerResult(self._denied(name, allowed.denied))
        return result  # type: ignore[no-any-return]

    def _check_tool(self, name: str) -> bool:
        """On FastMCP: makes the tool's handler check the arguments it gets
        (see the module doc); False when there is no such tool to check."""
        manager = getattr(self._fastmcp, "_tool_manager", None)
        tool = manager.get_tool(name) if manager is not None else None
        if tool is None:
            return False
        if getattr(tool.fn, _CHECKED, None) is self:
            return True
        fn = tool.fn
        context_kwarg = tool.context_kwarg

        def check(kwargs: dict[str, Any]) -> dict[str, Any]:
            """The arguments the handler runs with (raises `_Denied`)."""
            allowed = _ALLOWED.get()
            if allowed is None or allowed.name != name:
                return kwargs  # not a tools/call request through this guard
            got = {
                k: v for k, v in kwargs.items() if k != context_kwarg and not (v is None and k not in allowed.forward)
            }
            if _same_arguments(got, allowed.forward):
                return kwargs
            # Decided again on what the handler is about to get, with the keys
            # the engine took off the call as the call carried them.
            decided = dict(got)
            if isinstance(allowed.sent, dict):
                for key, value in allowed.sent.items():
                    if key not in allowed.forward and key not in got:
                        decided[key] = value
            outcome = self._decide(allowed.rules, name, decided, allowed.context)
            if not outcome.ok:
                allowed.denied = outcome
                raise _Denied(outcome.decision.json)
            # The keys the engine forwards this time: the validated values
            # where the handler has them (the engine decided on their JSON),
            # the engine's own where it added one; a key it took off is left
            # to the handler's default.
            forward = outcome.forward or {}
            run = {k: v for k, v in kwargs.items() if k == context_kwarg or k in forward or k not in got}
            for key, value in forward.items():
                if key not in got:
                    run[key] = value
            return run

        wrapper: Any
        if tool.is_async:

            @functools.wraps(fn)
            async def wrapper(**kwargs: Any) -> Any:
                return await fn(**check(kwargs))

        else:

            @functools.wraps(fn)
            def wrapper(**kwargs: Any) -> Any:
                return fn(**check(kwargs))

        setattr(wrapper, _CHECKED, self)
        tool.fn = wrapper
        return True


def protect(
    server: Any,
    *,
    policy: str | os.PathLike[str] | None = None,
    catalog: str | os.PathLike[str] | None = None,
    rules: RuleSet | None = None,
    context: ContextFactory | ContextLike = default_context,
    unknown_tool: UnknownTool = sdk_unknown_tool,
    confirmation: ConfirmationSource = "argument",
    on_decision: OnDecision | None = None,
    structured_content: None = None,
) -> Guard:
    """Installs toolgate on a FastMCP or low-level ``Server`` (after its tools
    and handlers are registered).

    ``policy``/``catalog`` are a path or the text (``policy=None``: legacy; no
    catalog: the server's own ``tools/list``). ``context`` is a
    :class:`~mcp_toolgate.Context` or a function of the SDK's request context
    returning one (default: :func:`default_context`). ``unknown_tool`` builds
    the answer for a hidden tool; keep the default unless your low-level server
    answers unknown tools another way. ``on_decision(decision, name)`` sees
    every decision (audit logs).

    ``confirmation`` is how a call that needs confirmation gets it (the
    engine's confirmation source):

    - ``"argument"`` (default): the model's literal ``confirmed: true`` counts,
      the seed runtime's path, for a server author who keeps turn state (the
      model sets it after the person said yes);
    - ``"none"``: the model's confirmation fields never count, so a write that
      needs confirmation is always denied here: it runs only after a person
      confirmed it through the host (an elicitation, an approval, a seal:
      ``RuleSet.decide`` with ``"person"`` or a seal), which this middleware
      does not do.

    (``structured_content`` was removed: the engine leaves
    ``structuredContent`` out of a blocked result for tools whose catalog entry
    declares an ``outputSchema``.)"""
    if structured_content is not None:
        raise TypeError(
            "the structured_content option was removed: the engine leaves structuredContent out of a blocked "
            "result for tools whose catalog entry declares an outputSchema"
        )
    lowlevel = getattr(server, "_mcp_server", server)
    if not isinstance(lowlevel, Server):
        raise TypeError("protect() takes an mcp FastMCP or mcp.server.lowlevel.Server")
    for request in (types.ListToolsRequest, types.CallToolRequest):
        if request not in lowlevel.request_handlers:
            raise ValueError(f"register the server's {request.__name__} handler before protect()")
    return Guard(
        lowlevel,
        fastmcp=server if server is not lowlevel else None,
        rules=rules,
        policy=_text(policy),
        catalog=_text(catalog),
        context=context,
        unknown_tool=unknown_tool,
        confirmation=confirmation,
        on_decision=on_decision,
    )
