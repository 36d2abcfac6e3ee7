"""Server side: toolgate in front of an official ``mcp`` SDK server (1.x).

    mcp = FastMCP("retail")            # or a low-level mcp.server.lowlevel.Server
    ...                                # register tools as usual
    protect(mcp, policy="tool_policies.yaml")

The same rules as the Node middleware (bindings-js ``guardServer``):

- ``tools/list`` shows only the tools this context may see, in the engine's
  order (by name); each entry is the server's own tool object with the
  engine's derived annotations laid over its own;
- ``tools/call`` is decided before the handler runs. A blocked call gets a tool
  error result whose text is the decision's canonical JSON, with the decision
  as ``structuredContent`` too (``structured_content="auto"``: only for a tool
  that declares no ``outputSchema``, since some clients check an error result's
  structured content against it); a hidden or unknown tool answers exactly as
  the SDK answers an unknown tool; an allowed call reaches the handler with the
  engine fields (``confirmed``, ``confirmation``) removed where the tool's
  schema does not declare them (``strip-fields``);
- the engine decides on exactly the values the handler gets: the arguments are
  written for it by ``_calljson`` (``inf``/``nan`` from ``1e400``,
  ``Infinity``, ``NaN`` on the wire are refused by the engine, never rewritten),
  and on FastMCP, whose handlers get the arguments as its pydantic model
  validated them (coercions, defaults, JSON pre-parsing of strings), those
  validated arguments are decided again when they differ from the ones sent
  (with the engine fields the call carried; a parameter left out by the client
  whose value is ``None`` counts as absent), and a deny is the call's result;
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
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server

from ._calljson import call_json, engine_json
from ._faults import FAULTS
from ._rules import EngineFault, RuleSet
from ._types import Context, ContextLike, Decision
from .router import catalog_from_tools

ContextFactory = Callable[[Any], ContextLike]
UnknownTool = Callable[[str], types.CallToolResult]
OnDecision = Callable[[Decision, str], None]


@dataclass
class _Allowed:
    """What the engine allowed for the call in progress (FastMCP's handler check)."""

    name: str
    sent: dict[str, Any]
    engine_fields: dict[str, Any]
    context: ContextLike
    rules: RuleSet
    denied: Decision | None = None


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


def blocked_result(decision: Decision, structured: bool = True) -> types.CallToolResult:
    """A denied call as a tool error result: the decision as text (and as
    ``structuredContent`` when ``structured``)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=decision.json)],
        structuredContent=decision.to_dict() if structured else None,
        isError=True,
    )


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
        structured_content: str,
        on_decision: OnDecision | None,
    ) -> None:
        if structured_content not in ("auto", "always", "never"):
            raise ValueError("structured_content must be auto, always or never")
        self._structured = structured_content
        self._on_decision = on_decision
        self._output_schemas: dict[str, bool] = {}
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

    def _remember(self, tools: Any) -> None:
        for tool in tools:
            self._output_schemas[tool.name] = tool.outputSchema is not None

    async def _structured_for(self, name: str) -> bool:
        if self._structured != "auto":
            return self._structured == "always"
        if name not in self._output_schemas:
            try:
                self._remember((await self._list(types.ListToolsRequest(method="tools/list"))).root.tools)
            except Exception:  # unknown: be safe
                return False
        return self._output_schemas.get(name) is False

    async def _handle_list(self, req: Any) -> types.ServerResult:
        rules = await self.rules()
        exposed = rules.list_exposable(self.context())
        result = await self._list(req)  # the SDK refreshes its tool cache
        listed = result.root
        self._remember(listed.tools)
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
        arguments = req.params.arguments or {}
        rules = await self.rules()
        context = self.context()
        # The exact values the handler gets (see _calljson): never json.dumps.
        decision = rules.evaluate(call_json(name, arguments), context=context)
        if self._on_decision is not None:
            self._on_decision(decision, name)
        if decision.code == "NOT_FOUND":
            return types.ServerResult(self._unknown_tool(name))
        if not decision.ok:
            return types.ServerResult(blocked_result(decision, await self._structured_for(name)))
        try:
            strip = rules.strip_fields(name)
        except EngineFault:
            fault = Decision.from_json(FAULTS["ENGINE_TRAP"])
            return types.ServerResult(blocked_result(fault, await self._structured_for(name)))
        engine_fields = {f: arguments[f] for f in strip if f in arguments}
        if engine_fields:
            arguments = {k: v for k, v in arguments.items() if k not in strip}
            params = req.params.model_copy(update={"arguments": arguments})
            req = req.model_copy(update={"params": params})
        if not self._check_tool(name):
            return await self._call(req)  # type: ignore[no-any-return]
        allowed = _Allowed(name, arguments, engine_fields, context, rules)
        token = _ALLOWED.set(allowed)
        try:
            result = await self._call(req)
        finally:
            _ALLOWED.reset(token)
        if allowed.denied is not None:
            return types.ServerResult(blocked_result(allowed.denied, await self._structured_for(name)))
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

        def check(kwargs: dict[str, Any]) -> None:
            allowed = _ALLOWED.get()
            if allowed is None or allowed.name != name:
                return  # not a tools/call request through this guard
            got = {k: v for k, v in kwargs.items() if k != context_kwarg and not (v is None and k not in allowed.sent)}
            if _same_arguments(got, allowed.sent):
                return
            decided = {**got, **allowed.engine_fields}
            decision = allowed.rules.evaluate(call_json(name, decided), context=allowed.context)
            if self._on_decision is not None:
                self._on_decision(decision, name)
            if not decision.ok:
                allowed.denied = decision
                raise _Denied(decision.json)

        wrapper: Any
        if tool.is_async:

            @functools.wraps(fn)
            async def wrapper(**kwargs: Any) -> Any:
                check(kwargs)
                return await fn(**kwargs)

        else:

            @functools.wraps(fn)
            def wrapper(**kwargs: Any) -> Any:
                check(kwargs)
                return fn(**kwargs)

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
    structured_content: str = "auto",
    on_decision: OnDecision | None = None,
) -> Guard:
    """Installs toolgate on a FastMCP or low-level ``Server`` (after its tools
    and handlers are registered).

    ``policy``/``catalog`` are a path or the text (``policy=None``: legacy; no
    catalog: the server's own ``tools/list``). ``context`` is a
    :class:`~toolgate.Context` or a function of the SDK's request context
    returning one (default: :func:`default_context`). ``unknown_tool`` builds
    the answer for a hidden tool; keep the default unless your low-level server
    answers unknown tools another way. ``structured_content``: ``auto``,
    ``always`` or ``never`` (see the module doc). ``on_decision(decision, name)``
    sees every decision (audit logs)."""
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
        structured_content=structured_content,
        on_decision=on_decision,
    )
