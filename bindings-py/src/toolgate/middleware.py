"""Server side: toolgate in front of an official ``mcp`` SDK server (1.x).

    mcp = FastMCP("retail")            # or a low-level mcp.server.lowlevel.Server
    ...                                # register tools as usual
    protect(mcp, policy="tool_policies.yaml")

- ``tools/list`` shows only the tools this context may see, as the engine
  lists them (sorted, annotations derived from the classification);
- ``tools/call`` is decided before the handler runs. A blocked call gets a tool
  error result whose text is the decision's canonical JSON and whose
  ``structuredContent`` is the decision; a hidden or unknown tool answers exactly
  as the SDK answers an unknown tool; an allowed call reaches the handler with
  the engine fields (``confirmed``, ``confirmation``) removed where the tool's
  schema does not declare them (``strip-fields``).

The catalog is the server's own ``tools/list`` unless one is given.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server

from ._rules import RuleSet
from ._types import ContextLike, Decision
from .router import catalog_from_tools

ContextFactory = Callable[[Any], ContextLike]
UnknownTool = Callable[[str], types.CallToolResult]


def sdk_unknown_tool(name: str) -> types.CallToolResult:
    """What the SDK answers for a tool it does not have: FastMCP's ToolManager
    raises ``ToolError("Unknown tool: <name>")`` and the server turns it into
    an error result with that text."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"Unknown tool: {name}")], isError=True)


def blocked_result(decision: Decision) -> types.CallToolResult:
    """A denied call as a tool error result: the decision as text and as
    ``structuredContent``."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=decision.json)],
        structuredContent=decision.to_dict(),
        isError=True,
    )


def _text(value: str | os.PathLike[str] | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, os.PathLike) or (isinstance(value, str) and "\n" not in value and Path(value).is_file()):
        return Path(value).read_text(encoding="utf-8")
    return value


class Guard:
    """The installed middleware; ``rules`` is built on first use."""

    def __init__(
        self,
        server: Server[Any, Any],
        *,
        rules: RuleSet | None,
        policy: str | None,
        catalog: str | None,
        context: ContextFactory | ContextLike,
        unknown_tool: UnknownTool,
    ) -> None:
        self.server = server
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

    async def _handle_list(self, req: Any) -> types.ServerResult:
        await self._list(req)  # the SDK refreshes its tool cache
        rules = await self.rules()
        tools = [types.Tool.model_validate(t) for t in rules.list_exposable(self.context())]
        return types.ServerResult(types.ListToolsResult(tools=tools))

    async def _handle_call(self, req: types.CallToolRequest) -> types.ServerResult:
        name = req.params.name
        arguments = req.params.arguments or {}
        rules = await self.rules()
        decision = rules.evaluate({"name": name, "arguments": arguments}, context=self.context())
        if decision.code == "NOT_FOUND":
            return types.ServerResult(self._unknown_tool(name))
        if not decision.ok:
            return types.ServerResult(blocked_result(decision))
        strip = rules.strip_fields(name)
        if any(f in arguments for f in strip):
            arguments = {k: v for k, v in arguments.items() if k not in strip}
            params = req.params.model_copy(update={"arguments": arguments})
            req = req.model_copy(update={"params": params})
        return await self._call(req)  # type: ignore[no-any-return]


def protect(
    server: Any,
    *,
    policy: str | os.PathLike[str] | None = None,
    catalog: str | os.PathLike[str] | None = None,
    rules: RuleSet | None = None,
    context: ContextFactory | ContextLike = None,
    unknown_tool: UnknownTool = sdk_unknown_tool,
) -> Guard:
    """Installs toolgate on a FastMCP or low-level ``Server`` (after its tools
    and handlers are registered).

    ``policy``/``catalog`` are a path or the text (``policy=None``: legacy; no
    catalog: the server's own ``tools/list``). ``context`` is a
    :class:`~toolgate.Context` or a function of the SDK's request context
    returning one (scopes from auth, say). ``unknown_tool`` builds the answer
    for a hidden tool; keep the default unless your low-level server answers
    unknown tools another way."""
    lowlevel = getattr(server, "_mcp_server", server)
    if not isinstance(lowlevel, Server):
        raise TypeError("protect() takes an mcp FastMCP or mcp.server.lowlevel.Server")
    for request in (types.ListToolsRequest, types.CallToolRequest):
        if request not in lowlevel.request_handlers:
            raise ValueError(f"register the server's {request.__name__} handler before protect()")
    return Guard(
        lowlevel,
        rules=rules,
        policy=_text(policy),
        catalog=_text(catalog),
        context=context,
        unknown_tool=unknown_tool,
    )
