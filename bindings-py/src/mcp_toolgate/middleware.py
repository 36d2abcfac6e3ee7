"""Server side: toolgate in front of an official ``mcp`` SDK server, 1.x or 2.x.

    mcp = MCPServer("retail")          # mcp 2.x; FastMCP on 1.x; or a low-level mcp.server.lowlevel.Server
    ...                                # register tools as usual
    protect(mcp, policy_path="tool_policies.yaml")     # or policy_text="version: 1\n..."

mcp 1.x (``FastMCP``, the low-level ``Server`` with its decorators: handlers
keyed by request type) and mcp 2.x (``MCPServer``, the low-level ``Server``
with ``on_list_tools=`` / ``on_call_tool=``: handlers keyed by method, called
with the request context and the params) are told apart by the server object.
The rules are loaded on a worker thread (``anyio.to_thread.run_sync``), once,
on the first request (or :meth:`Guard.rules`), never on the event loop.

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
  the engine does, according to ``confirmation`` (see :func:`protect`;
  default ``"none"``: the model's own ``confirmed: true`` never counts);
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
  request's access token when the transport authenticated it (no scopes at
  all for a request the HTTP authentication middleware saw without a token);
- a ``tools/list`` or ``tools/call`` handler registered after :func:`protect`
  (1.x: ``@server.list_tools()`` / ``@server.call_tool()`` or
  ``server.request_handlers[...] = ...``; 2.x:
  ``server.add_request_handler(...)``) goes behind the guard too, never in
  its place;
- on mcp 2.x the filtered ``tools/list`` is marked ``cacheScope: "private"``
  (it is cut for one caller), and the SDK's pre-dispatch ``Mcp-Param-*``
  header check finds tools through that guarded list, never through
  ``MCPServer``'s own table (``get_tool_input_schema``, which sees hidden
  tools).

The catalog is the server's own ``tools/list`` unless one is given.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import Server

from ._calljson import _schema_name, call_json, engine_json
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
    #: The confirmation source it was decided with (see Guard._confirmation_for).
    confirmation: ConfirmationSource
    denied: Outcome | None = None
    #: Arguments decided again and allowed (the model's output differed from
    #: the forwarded ones): the function's own check finds them decided.
    rechecked: dict[str, Any] | None = None


_ALLOWED: contextvars.ContextVar[_Allowed | None] = contextvars.ContextVar("toolgate_allowed", default=None)
_CHECKED = "__toolgate_checked__"
#: Set on an MCPServer / FastMCP to the guard protect() installed on it.
_GUARDED = "__toolgate_guard__"


try:  # mcp 2.x: Tool.run and MCPServer pass an MCPError through untouched (and unlogged)
    from mcp.shared.exceptions import MCPError as _PassedThrough
except ImportError:  # mcp 1.x
    _PassedThrough = Exception  # type: ignore[misc,assignment]


class _Denied(_PassedThrough):  # type: ignore[misc,valid-type]
    """Raised in place of a FastMCP handler whose validated arguments the engine
    denied. The guard answers with the engine's denial whatever the SDK makes of
    it; on mcp 2.x it is an ``MCPError``, so MCPServer does not log every denial
    as a tool that crashed."""

    def __init__(self, decision_json: str) -> None:
        if _PassedThrough is Exception:
            super().__init__(decision_json)
        else:
            super().__init__(code=-32600, message=decision_json)


def _same_arguments(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether the engine would read the same arguments (top-level key order aside)."""
    return a.keys() == b.keys() and all(engine_json(a[k]) == engine_json(b[k]) for k in a)


def default_context(request_context: Any = None) -> Context:
    """The confirming surface; the access token's scopes when the request was
    authenticated. Where the HTTP authentication middleware ran (a ``user`` in
    the request's scope) but the request carried no access token (optional
    auth, a route mounted without ``RequireAuthMiddleware``), no scopes:
    scope-gated tools are hidden and refused. No authentication at all (stdio,
    an HTTP app without auth): no scope check.

    The token is the one this request carried: the user the HTTP
    authentication middleware put in the request's own scope. The SDK's
    ``get_access_token()`` is read only for a request without one (another
    transport): in a stateful Streamable HTTP session its context variable
    can still hold the token of the request that opened the session
    (python-sdk issue #2208), and a later request with a narrower token
    would be decided with the wider one's scopes (docs/spec.md §9)."""
    request = getattr(request_context, "request", None)
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict) and "user" in scope:
        token = getattr(scope["user"], "access_token", None)
        if token is None:
            return Context(scopes=[])  # authentication is installed and this caller has none
    else:
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


class _Source:
    """A policy or catalog given as a file path (read once, on the loading
    thread, and kept: a later reload of rules derived from the server's tools
    must not load an edit caught half written) or as text."""

    def __init__(self, what: str, path: str | os.PathLike[str] | None, text: str | None) -> None:
        if path is not None and text is not None:
            raise TypeError(f"give {what}_path= or {what}_text=, not both")
        if text is not None and not isinstance(text, str):
            raise TypeError(f"{what}_text= is the {what}'s text (str); a file goes in {what}_path=")
        if path is not None and not Path(path).is_file():
            raise FileNotFoundError(f"{what}_path={os.fspath(path)!r} is not a file")
        self.path = None if path is None else Path(path)
        self.text = text

    @property
    def given(self) -> bool:
        return self.path is not None or self.text is not None

    def read(self) -> str | None:
        if self.path is not None and self.text is None:
            self.text = self.path.read_text(encoding="utf-8")
        return self.text

    def forget(self) -> None:
        """Read the file again on the next load (:meth:`Guard.reload`)."""
        if self.path is not None:
            self.text = None


class _Sdk:
    """How one SDK major keeps its ``tools/list`` and ``tools/call`` handlers."""

    major: int

    def __init__(self, server: Any) -> None:
        self.server = server


class _Sdk1(_Sdk):
    """mcp 1.x: ``request_handlers[RequestType] = handler(request) -> ServerResult``."""

    major = 1

    def get(self, which: str) -> Any:
        return self.server.request_handlers.get(_V1_REQUESTS[which])

    def set(self, which: str, handler: Any) -> None:
        # Straight into the dict: a guard installed earlier must not take this
        # one for a handler registered after it.
        dict.__setitem__(self.server.request_handlers, _V1_REQUESTS[which], handler)

    def watch(self, replaced: _Replaced) -> None:
        handlers = self.server.request_handlers
        if not isinstance(handlers, _WatchedHandlers):
            watched = _WatchedHandlers(handlers)
            self.server.request_handlers = watched
            # The experimental (tasks) handlers keep a reference to the dict.
            experimental = getattr(self.server, "_experimental_handlers", None)
            if getattr(experimental, "_request_handlers", None) is handlers:
                experimental._request_handlers = watched
            handlers = watched
        handlers.watchers.append(replaced)


class _WatchedHandlers(dict):  # type: ignore[type-arg]
    """mcp 1.x ``request_handlers`` after :func:`protect`: a ``tools/list`` or
    ``tools/call`` handler set later goes behind the guard (each guard, in the
    order installed), never in its place."""

    def __init__(self, handlers: Mapping[Any, Any]) -> None:
        super().__init__(handlers)
        self.watchers: list[_Replaced] = []

    def _guarded(self, key: Any, handler: Any) -> Any:
        for which, request in _V1_REQUESTS.items():
            if request is not None and key is request:
                for replaced in self.watchers:
                    handler = replaced(which, handler)
        return handler

    def __setitem__(self, key: Any, handler: Any) -> None:
        super().__setitem__(key, self._guarded(key, handler))

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, handler in dict(*args, **kwargs).items():
            self[key] = handler

    def setdefault(self, key: Any, handler: Any = None) -> Any:
        if key not in self:
            self[key] = handler
        return self[key]

    def __ior__(self, other: Any) -> _WatchedHandlers:  # type: ignore[override,misc]
        self.update(other)
        return self


class _Sdk2(_Sdk):
    """mcp 2.x: ``add_request_handler(method, params_type, handler(ctx, params) -> result)``."""

    major = 2

    def get(self, which: str) -> Any:
        entry = self.server.get_request_handler(_V2_METHODS[which])
        return None if entry is None else entry.handler

    def set(self, which: str, handler: Any) -> None:
        entry = self.server.get_request_handler(_V2_METHODS[which])
        add = getattr(self.server, _V2_ADD, None) or self.server.add_request_handler
        add(_V2_METHODS[which], entry.params_type, handler)

    def watch(self, replaced: _Replaced) -> None:
        server = self.server
        watchers: list[_Replaced] | None = getattr(server, _V2_WATCHERS, None)
        if watchers is None:
            watchers = []
            add = server.add_request_handler  # the SDK's own (bound) method

            def add_request_handler(method: str, params_type: Any, handler: Any) -> None:
                """The SDK's ``add_request_handler``, with a ``tools/list`` or
                ``tools/call`` handler put behind the guard (toolgate)."""
                for which, guarded in _V2_METHODS.items():
                    if method == guarded:
                        for each in watchers:
                            handler = each(which, handler)
                add(method, params_type, handler)

            setattr(server, _V2_ADD, add)
            setattr(server, _V2_WATCHERS, watchers)
            server.add_request_handler = add_request_handler
        watchers.append(replaced)
        # MCPServer's tool table answers the SDK's pre-dispatch ``Mcp-Param-*``
        # check (2026-07-28 Streamable HTTP) for every tool, hidden ones too:
        # without it the SDK finds the schema through the guarded, per-caller
        # tools/list, and a hidden tool answers as a missing one.
        if getattr(server, "get_tool_input_schema", None) is not None:
            server.get_tool_input_schema = None


_V1_REQUESTS = {"list": getattr(types, "ListToolsRequest", None), "call": getattr(types, "CallToolRequest", None)}
_V2_METHODS = {"list": "tools/list", "call": "tools/call"}
#: Where a protected 2.x server keeps the SDK's own ``add_request_handler`` and the guards' hooks.
_V2_ADD = "_toolgate_add_request_handler"
_V2_WATCHERS = "_toolgate_watchers"
#: A guard's hook for a handler registered after it: (which, handler) -> the handler to store.
_Replaced = Callable[[str, Any], Any]


def _sdk_of(server: Any) -> tuple[_Sdk, Any]:
    """(the low-level server's SDK adapter, the FastMCP/MCPServer or None)."""
    lowlevel = getattr(server, "_lowlevel_server", None) or getattr(server, "_mcp_server", None) or server
    if not isinstance(lowlevel, Server):
        raise TypeError("protect() takes an mcp MCPServer / FastMCP or an mcp.server.lowlevel.Server")
    high = server if server is not lowlevel else None
    if hasattr(lowlevel, "request_handlers") and not hasattr(lowlevel, "get_request_handler"):
        sdk: _Sdk = _Sdk1(lowlevel)
    else:
        sdk = _Sdk2(lowlevel)
    if high is None and _owner_of(sdk.get("call"), lowlevel) is not None:
        # Guarding it would decide the arguments as sent, while the tool
        # function gets what the MCPServer's pydantic model makes of them
        # (coercions, validators, defaults), never decided (Node: OWNED_SERVER).
        raise TypeError(
            "protect() was given the low-level server of an MCPServer / FastMCP: pass the MCPServer / FastMCP "
            "itself, so that the arguments its model hands a tool function are decided too"
        )
    return sdk, high


def _owner_of(handler: Any, lowlevel: Any, depth: int = 0) -> Any:
    """The MCPServer / FastMCP whose low-level server ``lowlevel`` is, found
    through its ``tools/call`` handler: a bound method of it (mcp 2.x), or a
    closure or partial holding one (1.x's decorator, 2.x's extension
    interceptors); None for a server of the user's own."""
    if handler is None or depth > 6:
        return None
    owner = getattr(handler, "__self__", None)
    # The MCPServer's own guard in front (protect(mcp) came first): its
    # handler is the guard's bound method.
    if isinstance(owner, Guard) and owner.server is lowlevel and owner._fastmcp is not None:
        return owner._fastmcp
    owns = (getattr(owner, "_lowlevel_server", None), getattr(owner, "_mcp_server", None))
    if owner is not None and lowlevel in owns:
        return owner
    inner: list[Any] = [getattr(handler, "func", None), getattr(handler, "__wrapped__", None)]
    for cell in getattr(handler, "__closure__", None) or ():
        try:
            inner.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    for candidate in inner:
        if callable(candidate):
            found = _owner_of(candidate, lowlevel, depth + 1)
            if found is not None:
                return found
    return None


def _declares_form_elicitation(capabilities: Any) -> bool:
    """Whether a client's capabilities (the SDK's model, or their JSON)
    declare form elicitation (docs/spec.md §8; the table every host is tested
    on: tests/vectors/fixtures/form-elicitation.json). ``elicitation: {}``
    means form, as in MCP 2025-06-18; a member that is null is absent; a
    URL-only client cannot be asked a form; an ``elicitation`` that is not an
    object cannot be read, and counts as declared."""
    if hasattr(capabilities, "model_dump"):
        capabilities = capabilities.model_dump(by_alias=True, exclude_none=True)
    if not isinstance(capabilities, Mapping):
        return False
    elicitation = capabilities.get("elicitation")
    if elicitation is None:
        return False
    if not isinstance(elicitation, Mapping):
        return True
    return elicitation.get("form") is not None or elicitation.get("url") is None


#: Loads of derived rules one request may wait for while the server's tools keep changing.
_MAX_RELOADS = 8
#: Pages of the server's own ``tools/list`` read before giving up (a server that pages forever).
_MAX_LIST_PAGES = 1000
#: The context sent when a ``context=`` callback returned None: a JSON text
#: that is not an object, which the engine refuses (``INVALID_CONTEXT``).
_NO_CONTEXT = '"the context callback returned nothing"'


class Guard:
    """The installed middleware; ``rules`` is loaded on first use, off the event loop."""

    def __init__(
        self,
        sdk: _Sdk,
        *,
        fastmcp: Any = None,
        rules: RuleSet | None,
        policy: _Source | None,
        catalog: _Source,
        context: ContextFactory | ContextLike,
        unknown_tool: UnknownTool,
        confirmation: ConfirmationSource,
        on_decision: OnDecision | None,
    ) -> None:
        if confirmation not in CONFIRMATIONS:
            raise ValueError("confirmation must be 'argument' or 'none'")
        self.confirmation: ConfirmationSource = confirmation
        self._on_decision = on_decision
        self._sdk = sdk
        self.server = sdk.server
        self.sdk_major = sdk.major
        self._fastmcp = fastmcp
        self._given_rules = rules
        #: The MCPServer's tools (by name) when the rules were derived from its
        #: own list: a tool replaced, added or removed since reloads them.
        self._derived_from: dict[str, Any] | None = None
        self._rules = rules
        self._policy = policy
        self._catalog = catalog
        self._context = context
        self._unknown_tool = unknown_tool
        self._loading: anyio.Lock | None = None
        self._list: Callable[..., Awaitable[Any]] = sdk.get("list")
        self._call: Callable[..., Awaitable[Any]] = sdk.get("call")
        self._mine = (
            {"list": self._handle_list_v1, "call": self._handle_call_v1}
            if sdk.major == 1
            else {"list": self._handle_list_v2, "call": self._handle_call_v2}
        )
        sdk.set("list", self._mine["list"])
        sdk.set("call", self._mine["call"])
        sdk.watch(self._replaced)

    def _replaced(self, which: str, handler: Any) -> Any:
        """A ``tools/list`` or ``tools/call`` handler registered after
        :func:`protect`: the guard calls it from now on, and stays in front."""
        if which == "list":
            self._list = handler
            if self._given_rules is None and not self._catalog.given:
                self._rebuild()  # the catalog is the server's own tools/list
        else:
            self._call = handler
        return self._mine[which]

    async def rules(self, request_context: Any = None) -> RuleSet:
        """The rule set, loaded on first use on a worker thread (the policy and
        catalog files read there too; no catalog: the server's own
        ``tools/list``, asked with ``request_context`` on mcp 2.x)."""
        if self._rules is not None:
            return self._rules
        if self._loading is None:
            self._loading = anyio.Lock()
        async with self._loading:
            if self._rules is None:
                # Taken before the list: a tool replaced in between reloads
                # once more, never the other way round.
                derived_from = self._served_tools()
                own = None if self._catalog.given else await self._own_catalog(request_context)
                policy, catalog = self._policy, self._catalog

                def load() -> RuleSet:
                    text = catalog.read() if own is None else own
                    assert text is not None
                    return RuleSet.load(catalog=text, policy=None if policy is None else policy.read())

                self._rules = await anyio.to_thread.run_sync(load)
                self._derived_from = derived_from if own is not None else None
        return self._rules

    @property
    def _tool_manager(self) -> Any:
        """The MCPServer's / FastMCP's tool table (None on a low-level server)."""
        return getattr(self._fastmcp, "_tool_manager", None)

    def _served_tools(self) -> dict[str, Any] | None:
        """The MCPServer's / FastMCP's tools by name (None on a low-level server)."""
        manager = self._tool_manager
        return None if manager is None else {tool.name: tool for tool in manager.list_tools()}

    async def _current_rules(self, request_context: Any, name: str | None) -> RuleSet:
        """:meth:`rules`, loaded again first when they were derived from the
        MCPServer's own list and the tool ``name`` (None: any tool) is no longer
        the one they were derived from: a tool removed and added again under its
        name, or replaced, must not run under its predecessor's entry."""
        for _ in range(_MAX_RELOADS):
            rules = await self.rules(request_context)
            if rules is self._rules and not self._stale(name):
                return rules
            if rules is self._rules:
                self._rebuild()
        # Replaced again during every load (review 30 F3: one re-check let a
        # tool replaced during the second load run on the first one's entry).
        raise RuntimeError("toolgate: the server's tools kept changing while the rules loaded; the call was not run")

    def _stale(self, name: str | None) -> bool:
        """Whether the tool ``name`` (None: any tool) is no longer the one the
        rules in hand were derived from (False: not derived)."""
        derived = self._derived_from
        if derived is None:
            return False
        if name is not None:
            manager = self._tool_manager
            return manager is not None and manager.get_tool(name) is not derived.get(name)
        served = self._served_tools() or {}
        return served.keys() != derived.keys() or any(served[k] is not derived[k] for k in served)

    async def _own_catalog(self, request_context: Any) -> str:
        """The server's own ``tools/list``, every page of it (a tool on a
        later page must be in the rules to be callable)."""
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
            if self._sdk.major == 1:
                listed = (await self._list(types.ListToolsRequest(method="tools/list", params=params))).root
            else:
                listed = await self._list(request_context, params)
            tools.extend(listed.tools)
            # mcp 2.x: `next_cursor`; 1.x: `nextCursor`.
            cursor = getattr(listed, "next_cursor", None) or getattr(listed, "nextCursor", None)
            if not cursor:
                return catalog_from_tools(tools)
        raise RuntimeError(f"toolgate: the server's tools/list did not end within {_MAX_LIST_PAGES} pages")

    def reload(self) -> None:
        """Rebuild the rules on the next request, reading ``policy_path=`` and
        ``catalog_path=`` again (after tools were added, or the policy file
        was replaced); rules given to :func:`protect` (``rules=``) are kept."""
        for source in (self._policy, self._catalog):
            if source is not None:
                source.forget()
        self._rebuild()

    def _rebuild(self) -> None:
        """Rebuild the rules on the next request from the texts already read
        (a tool changed: an edit to a file caught half written never loads)."""
        self._rules = self._given_rules
        self._derived_from = None

    def context(self, request_context: Any = None) -> ContextLike:
        if not callable(self._context):
            return self._context
        if self._sdk.major == 1:
            try:
                request_context = self.server.request_context
            except LookupError:
                request_context = None
        context = self._context(request_context)
        # A callback that returned nothing (a forgotten `return`, `scopes and
        # Context(...)`, which is `[]` for a token without scopes) is a host
        # bug, not "no scope check": the engine refuses this text
        # (INVALID_CONTEXT). "No check" is `Context()`. Only a Context, a
        # mapping or a non-empty JSON text is a context.
        if isinstance(context, (Context, Mapping)) or (isinstance(context, str) and context != ""):
            return context
        return _NO_CONTEXT

    def _confirmation_for(self, request_context: Any) -> ConfirmationSource:
        """The confirmation source for one request: ``"argument"`` only when
        set up so and the client did not declare form elicitation. SPEC §8:
        a client that can be asked gets its person asked, never its model's
        word taken; this middleware does not ask, so such a call waits for a
        person confirming through the host (``CONFIRMATION_REQUIRED``), as
        with ``toolgate-rmcp``'s guard for a client it cannot ask."""
        if self.confirmation == "none":
            return "none"
        return "none" if _declares_form_elicitation(self._client_capabilities(request_context)) else "argument"

    def _client_capabilities(self, request_context: Any) -> Any:
        """What the client declared: in its handshake, or (mcp 2.x, MCP
        2026-07-28) in the request's own ``_meta``, which the SDK records on
        the request's connection."""
        if self._sdk.major == 1:
            try:
                session = self.server.request_context.session
            except LookupError:
                return None
            return getattr(getattr(session, "client_params", None), "capabilities", None)
        return getattr(getattr(request_context, "session", None), "client_capabilities", None)

    def _decide(
        self, rules: RuleSet, name: str, arguments: Any, context: ContextLike, confirmation: ConfirmationSource
    ) -> Outcome:
        """One call through the engine's pipeline; reports the decision."""
        # The exact values the handler gets (see _calljson): never json.dumps.
        outcome = rules.decide(call_json(name, arguments), context, confirmation)
        if self._on_decision is not None:
            self._on_decision(outcome.decision, name)
        return outcome

    def _denied(self, name: str, outcome: Outcome) -> types.CallToolResult:
        """The answer to a denied call: the engine's blocked result, or (none:
        ``NOT_FOUND``) the SDK's answer for a tool it does not have."""
        if outcome.blocked_result_json is None:
            return self._unknown_tool(name)
        return blocked_result(outcome)

    def _filter(self, rules: RuleSet, context: ContextLike, listed: Any) -> Any:
        """The server's ``ListToolsResult`` cut to the exposable tools, in the
        engine's order, with the engine's derived annotations laid over each
        tool's own; on mcp 2.x, ``cacheScope: "private"``."""
        exposed = rules.list_exposable(context)
        served = {t.name: t for t in listed.tools}
        tools = []
        for entry in exposed:
            tool = served.get(entry["name"])
            if tool is None:
                continue  # in the catalog, not on this server
            annotations = {
                **(tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}),
                **entry.get("annotations", {}),
            }
            tools.append(tool.model_copy(update={"annotations": types.ToolAnnotations.model_validate(annotations)}))
        update: dict[str, Any] = {"tools": tools}
        if "cache_scope" in type(listed).model_fields:
            # mcp 2.x cache hints (SEP-2549): this list is cut for one caller's
            # context, so it is never "public" (shareable across authorization
            # contexts), whatever the handler or a server-wide CacheHint says.
            update["cache_scope"] = "private"
        return listed.model_copy(update=update)

    async def _guarded_call(
        self,
        name: str,
        sent: Any,
        context: ContextLike,
        rules: RuleSet,
        invoke: Callable[[dict[str, Any]], Any],
        confirmation: ConfirmationSource,
    ) -> tuple[types.CallToolResult | None, Any]:
        """(a denial, None) or (None, the handler's own result)."""
        outcome = self._decide(rules, name, sent, context, confirmation)
        if not outcome.ok:
            return self._denied(name, outcome), None
        # Allowed: the handler gets exactly the arguments the engine forwards.
        forward = outcome.forward
        assert forward is not None  # RuleSet.decide: an allow always forwards
        if not self._check_tool(name):
            return None, await invoke(dict(forward))
        allowed = _Allowed(name, sent, forward, context, rules, confirmation)
        token = _ALLOWED.set(allowed)
        try:
            result = await invoke(dict(forward))
        except Exception:
            # The SDK may carry the check's refusal out as its own error: the
            # engine's denial is the answer either way.
            if allowed.denied is None:
                raise
            result = None
        finally:
            _ALLOWED.reset(token)
        if allowed.denied is not None:
            return self._denied(name, allowed.denied), None
        return None, result

    # -- mcp 1.x: handler(request) -> ServerResult ------------------------------

    async def _handle_list_v1(self, req: Any) -> Any:
        rules = await self._current_rules(None, None)
        context = self.context()
        result = await self._list(req)  # the SDK refreshes its tool cache
        return types.ServerResult(self._filter(rules, context, result.root))

    async def _handle_call_v1(self, req: Any) -> Any:
        rules = await self._current_rules(None, req.params.name)

        async def invoke(forward: dict[str, Any]) -> Any:
            params = req.params.model_copy(update={"arguments": forward})
            return await self._call(req.model_copy(update={"params": params}))

        denied, result = await self._guarded_call(
            req.params.name, req.params.arguments or {}, self.context(), rules, invoke, self._confirmation_for(None)
        )
        return types.ServerResult(denied) if denied is not None else result

    # -- mcp 2.x: handler(ctx, params) -> result ---------------------------------

    async def _handle_list_v2(self, ctx: Any, params: Any) -> Any:
        rules = await self._current_rules(ctx, None)
        context = self.context(ctx)
        return self._filter(rules, context, await self._list(ctx, params))

    async def _handle_call_v2(self, ctx: Any, params: Any) -> Any:
        rules = await self._current_rules(ctx, params.name)

        async def invoke(forward: dict[str, Any]) -> Any:
            # The SDK hands handlers the raw params in `ctx.params` too: they
            # carry the engine's arguments as well (as the SDK's own
            # request-state middleware replaces them), never the ones sent.
            inner = ctx
            if dataclasses.is_dataclass(ctx) and isinstance(getattr(ctx, "params", None), Mapping):
                inner = dataclasses.replace(ctx, params={**ctx.params, "arguments": forward})  # type: ignore[arg-type]
            return await self._call(inner, params.model_copy(update={"arguments": forward}))

        denied, result = await self._guarded_call(
            params.name, params.arguments or {}, self.context(ctx), rules, invoke, self._confirmation_for(ctx)
        )
        return denied if denied is not None else result

    def _check_tool(self, name: str) -> bool:
        """On FastMCP: makes the tool's handler check the arguments it gets
        (see the module doc); False when there is no such tool to check."""
        manager = self._tool_manager
        tool = manager.get_tool(name) if manager is not None else None
        if tool is None:
            return False
        if getattr(tool.fn, _CHECKED, None) is self:
            return True
        fn = tool.fn
        context_kwarg = tool.context_kwarg
        # Not arguments: the context and (mcp 2.x) the values resolvers pass in.
        passed = {context_kwarg, *(getattr(tool, "resolved_params", None) or ())}
        meta = getattr(tool, "fn_metadata", None)
        # The handler's keyword for each argument (the SDK's dump: the
        # field's alias or name) -> the key the tool's schema, and so the
        # engine, constrains (a validation alias names it there).
        fields = getattr(getattr(meta, "arg_model", None), "model_fields", None) or {}
        to_schema = {info.alias or field: _schema_name(field, info) for field, info in fields.items()}
        from_schema = {key: keyword for keyword, key in to_schema.items()}

        def check(kwargs: dict[str, Any]) -> dict[str, Any]:
            """The arguments the handler runs with (raises `_Denied`)."""
            allowed = _ALLOWED.get()
            if allowed is None or allowed.name != name:
                return kwargs  # not a tools/call request through this guard
            got = arguments_of(kwargs, allowed)
            if _same_arguments(got, allowed.forward) or (
                allowed.rechecked is not None and _same_arguments(got, allowed.rechecked)
            ):
                return kwargs
            # Decided again on what the handler is about to get, with the keys
            # the engine took off the call as the call carried them.
            decided = dict(got)
            if isinstance(allowed.sent, dict):
                for key, value in allowed.sent.items():
                    if key not in allowed.forward and key not in got:
                        decided[key] = value
            outcome = self._decide(allowed.rules, name, decided, allowed.context, allowed.confirmation)
            if not outcome.ok:
                allowed.denied = outcome
                raise _Denied(outcome.decision.json)
            # The keys the engine forwards this time: the validated values
            # where the handler has them (the engine decided on their JSON),
            # the engine's own where it added one; a key it took off is left
            # to the handler's default.
            forward = outcome.forward or {}
            run = {
                k: v
                for k, v in kwargs.items()
                if k in passed or to_schema.get(k, k) in forward or to_schema.get(k, k) not in got
            }
            for key, value in forward.items():
                if key not in got:
                    run[from_schema.get(key, key)] = value
            allowed.rechecked = arguments_of(run, allowed)
            return run

        def arguments_of(kwargs: dict[str, Any], allowed: _Allowed) -> dict[str, Any]:
            """The handler's arguments under the keys the schema names."""
            named = ((to_schema.get(k, k), v) for k, v in kwargs.items() if k not in passed)
            return {k: v for k, v in named if not (v is None and k not in allowed.forward)}

        # mcp 2.x's Tool.run validates the arguments, runs the tool's
        # resolvers (Resolve(...): code of the server's, which may act, ask
        # the person or sample the model) on that output, then the function:
        # the output is decided as validation returns it, before any resolver.
        validate = getattr(meta, "validate_arguments", None)
        if validate is not None and getattr(tool, "resolved_params", None) is not None:

            def validate_then_decide(arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
                return check(validate(arguments_to_validate))

            # An attribute of this tool's own metadata (a pydantic model, whose
            # __setattr__ takes fields only), found before the class's method.
            object.__setattr__(meta, "validate_arguments", validate_then_decide)

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
    policy_path: str | os.PathLike[str] | None = None,
    policy_text: str | None = None,
    legacy: bool = False,
    catalog_path: str | os.PathLike[str] | None = None,
    catalog_text: str | None = None,
    rules: RuleSet | None = None,
    context: ContextFactory | ContextLike = default_context,
    unknown_tool: UnknownTool = sdk_unknown_tool,
    confirmation: ConfirmationSource = "none",
    on_decision: OnDecision | None = None,
    **removed: Any,
) -> Guard:
    """Installs toolgate on an ``MCPServer`` (mcp 2.x), a ``FastMCP`` (1.x) or
    a low-level ``Server`` (either), after its tools and handlers are registered.
    Pass the ``MCPServer`` / ``FastMCP`` itself, not its low-level server
    (``mcp._mcp_server``): only then are the arguments its pydantic model hands
    a tool function decided again.

    A ``tools/list`` or ``tools/call`` handler registered after this (1.x:
    ``@server.list_tools()``, ``@server.call_tool()``, or an assignment into
    ``server.request_handlers``; 2.x: ``server.add_request_handler``) is put
    behind the guard, never in its place (1.x: rebinding
    ``server.request_handlers`` itself to a new mapping is not watched: do
    not); a new ``tools/list`` handler
    rebuilds rules made from the server's own list. On an ``MCPServer`` /
    ``FastMCP`` such rules follow its tools (a tool added, removed or
    replaced since they were read loads them again before it is decided);
    on a low-level server, call :meth:`Guard.reload` after changing them.
    The low-level server of an ``MCPServer`` / ``FastMCP`` is refused
    (``TypeError``), and so is a second guard on one ``MCPServer`` /
    ``FastMCP`` (its tool functions check what they get against one guard's
    decision; a low-level ``Server`` may take several).

    The rules: exactly one of ``policy_path`` (the policy file),
    ``policy_text`` (its YAML text), ``legacy=True`` (no policy: the catalog's
    own fields decide) or ``rules`` (a :class:`~mcp_toolgate.RuleSet` already
    loaded). The catalog: ``catalog_path`` or ``catalog_text``, at most one;
    neither: the server's own ``tools/list``. Files are read, and the engine
    loaded, on a worker thread on the first request.

    ``context`` is a :class:`~mcp_toolgate.Context` or a function of the SDK's
    request context returning one (default: :func:`default_context`).
    ``unknown_tool`` builds the answer for a hidden tool; keep the default
    unless your low-level server answers unknown tools another way.
    ``on_decision(decision, name)`` sees every decision (audit logs).

    ``confirmation`` is how a call that needs confirmation gets it (the
    engine's confirmation source; SPEC §8: the model's own ``confirmed: true``
    counts only where the host is configured to trust it):

    - ``"none"`` (default): the model's confirmation fields never count, so a
      write that needs confirmation is always denied here: it runs only after
      a person confirmed it through the host (an elicitation, an approval, a
      seal: ``RuleSet.decide`` with ``"person"`` or a seal), which this
      middleware does not do;
    - ``"argument"`` (opt-in): the model's literal ``confirmed: true`` counts,
      the seed runtime's path, for a server whose caller keeps turn state and
      sets it only after the person said yes (an agent-side router such as
      :class:`~mcp_toolgate.router.McpToolRouter`), or a client that cannot
      ask the person. A client that declared form elicitation (in its
      handshake, or on mcp 2.x in a 2026-07-28 request's ``_meta``) can be
      asked, so its model's word is never taken: its call is decided as with
      ``"none"`` (SPEC §8; this middleware does not ask).

    (``policy=`` / ``catalog=``, which took a path or a text and guessed which,
    are ``policy_path=`` / ``policy_text=`` and ``catalog_path=`` /
    ``catalog_text=``. ``structured_content`` was removed: the engine leaves
    ``structuredContent`` out of a blocked result for tools whose catalog
    entry declares an ``outputSchema``.)"""
    for key in removed:
        if key == "structured_content":
            raise TypeError(
                "the structured_content option was removed: the engine leaves structuredContent out of a blocked "
                "result for tools whose catalog entry declares an outputSchema"
            )
        if key in ("policy", "catalog"):
            raise TypeError(f"protect(): {key}= is now {key}_path= (a file) or {key}_text= (its text)")
        raise TypeError(f"protect() got an unexpected keyword argument {key!r}")
    given = [
        name
        for name, value in (
            ("policy_path", policy_path),
            ("policy_text", policy_text),
            ("legacy=True", legacy or None),
            ("rules", rules),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise TypeError(
            "protect() needs exactly one of policy_path= (the policy file), policy_text= (its YAML text), "
            "legacy=True (no policy: the catalog's own fields decide) or rules= (a loaded RuleSet); "
            + (f"got {', '.join(given)}" if given else "got none")
        )
    policy = None if legacy or rules is not None else _Source("policy", policy_path, policy_text)
    catalog = _Source("catalog", catalog_path, catalog_text)
    if rules is not None and catalog.given:
        raise TypeError("protect(): rules= already holds a catalog; drop catalog_path= / catalog_text=")
    sdk, high = _sdk_of(server)
    if high is not None and getattr(high, _GUARDED, None) is not None:
        # Its tool functions check the arguments they get against one guard's
        # decision: a second guard's rules would never see them (Node refuses
        # a second guard the same way).
        raise TypeError(
            "protect(): this MCPServer / FastMCP is already guarded; put every rule in one policy "
            "(a low-level Server may take more than one guard)"
        )
    for which in ("list", "call"):
        if sdk.get(which) is None:
            raise ValueError(f"register the server's tools/{which} handler before protect()")
    guard = Guard(
        sdk,
        fastmcp=high,
        rules=rules,
        policy=policy,
        catalog=catalog,
        context=context,
        unknown_tool=unknown_tool,
        confirmation=confirmation,
        on_decision=on_decision,
    )
    if high is not None:
        setattr(high, _GUARDED, guard)
    return guard
