"""Server-side middleware on the official mcp SDK (FastMCP and low-level Server),
over the SDK's in-memory transport."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcp import types
from mcp.server.fastmcp import FastMCP
from mcp.server.lowlevel import Server
from mcp.shared.memory import create_connected_server_and_client_session

from toolgate import Context
from toolgate.middleware import protect

POLICY = """version: 1
defaults:
  operation_type: read_only
tool_policies:
  reembolsar:
    operation_type: transactional
    require_confirmation: true
    requires: [order_id]
  apagar_tudo:
    operation_type: transactional
"""


def fastmcp(ran: list[tuple[str, dict[str, Any]]], with_hidden: bool = True) -> FastMCP:
    mcp = FastMCP("shop", log_level="WARNING")

    @mcp.tool()
    def consultar(order_id: str) -> dict[str, str]:
        """Order status."""
        ran.append(("consultar", {"order_id": order_id}))
        return {"order_id": order_id, "status": "ENTREGUE"}

    @mcp.tool()
    def reembolsar(order_id: str) -> dict[str, str]:
        """Refund an order (its schema does not declare `confirmed`)."""
        ran.append(("reembolsar", {"order_id": order_id}))
        return {"order_id": order_id, "status": "REEMBOLSADO"}

    if with_hidden:

        @mcp.tool()
        def apagar_tudo() -> str:
            """Not on this route."""
            ran.append(("apagar_tudo", {}))
            return "apagado"

    return mcp


async def _session_run(server: Any, steps: Any) -> Any:
    async with create_connected_server_and_client_session(server) as client:
        return await steps(client)


def run(server: Any, steps: Any) -> Any:
    return asyncio.run(_session_run(server, steps))


ROUTE = Context(allowed_tools=["consultar", "reembolsar"])


def test_tools_list_is_filtered_and_derived() -> None:
    ran: list[Any] = []
    server = fastmcp(ran)
    protect(server, policy=POLICY, context=ROUTE)
    listed = run(server, lambda c: c.list_tools())
    assert [t.name for t in listed.tools] == ["consultar", "reembolsar"]
    by_name = {t.name: t for t in listed.tools}
    assert by_name["consultar"].annotations.readOnlyHint is True
    assert by_name["reembolsar"].annotations.readOnlyHint is False
    assert by_name["consultar"].outputSchema is not None  # the server's own tool object, kept
    direct = fastmcp(ran)
    protect(direct, policy=POLICY, context=Context(surface="direct"))
    assert [t.name for t in run(direct, lambda c: c.list_tools()).tools] == ["consultar"]


def test_blocked_call_is_a_tool_error_with_the_decision_and_the_handler_never_runs() -> None:
    ran: list[Any] = []
    server = fastmcp(ran)
    guard = protect(server, policy=POLICY, context=ROUTE)
    result = run(server, lambda c: c.call_tool("reembolsar", {"order_id": "9"}))
    assert result.isError
    expected = asyncio.run(guard.rules()).evaluate("reembolsar", {"order_id": "9"}, context=ROUTE)
    assert expected.code == "CONFIRMATION_REQUIRED"
    assert result.content[0].text == expected.json
    # FastMCP declared an outputSchema for this tool: "auto" leaves the
    # decision out of structuredContent (clients may check it against the schema).
    assert result.structuredContent is None
    always = fastmcp(ran)
    protect(always, policy=POLICY, context=ROUTE, structured_content="always")
    result = run(always, lambda c: c.call_tool("reembolsar", {"order_id": "9"}))
    assert result.isError and json.loads(result.content[0].text) == result.structuredContent
    assert ran == []


def test_allowed_call_reaches_the_handler_without_engine_fields() -> None:
    ran: list[Any] = []
    server = fastmcp(ran)
    protect(server, policy=POLICY, context=ROUTE)
    result = run(server, lambda c: c.call_tool("reembolsar", {"order_id": "9", "confirmed": True}))
    assert not result.isError, result
    assert result.structuredContent == {"order_id": "9", "status": "REEMBOLSADO"}
    assert ran == [("reembolsar", {"order_id": "9"})]


def test_hidden_tool_answers_exactly_like_an_unknown_tool() -> None:
    ran: list[Any] = []
    protected = fastmcp(ran)
    protect(protected, policy=POLICY, context=ROUTE)
    hidden = run(protected, lambda c: c.call_tool("apagar_tudo", {}))
    plain = fastmcp(ran, with_hidden=False)  # the SDK without that tool at all
    unknown = run(plain, lambda c: c.call_tool("apagar_tudo", {}))
    assert hidden.model_dump() == unknown.model_dump()
    assert hidden.isError and ran == []
    never = run(protected, lambda c: c.call_tool("nao_existe", {}))
    assert never.model_dump() == run(plain, lambda c: c.call_tool("nao_existe", {})).model_dump()


def test_context_from_the_request() -> None:
    ran: list[Any] = []
    server = fastmcp(ran)
    seen: list[Any] = []

    def context(request_context: Any) -> Context:
        seen.append(request_context)
        return Context(surface="direct")

    protect(server, policy=POLICY, context=context)
    result = run(server, lambda c: c.call_tool("reembolsar", {"order_id": "9", "confirmed": True}))
    assert result.isError and result.content[0].text == "Unknown tool: reembolsar"
    assert seen and seen[-1] is not None


def test_lowlevel_server() -> None:
    server: Server[Any, Any] = Server("lowlevel")
    received: list[tuple[str, dict[str, Any]]] = []
    tools = [
        types.Tool(
            name="ler",
            inputSchema={"type": "object", "properties": {}},
            annotations=types.ToolAnnotations(readOnlyHint=True),
        ),
        types.Tool(
            name="gravar",
            inputSchema={"type": "object", "properties": {"valor": {"type": "string"}}, "required": ["valor"]},
        ),
    ]

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return tools

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        received.append((name, arguments))
        return [types.TextContent(type="text", text=f"ok {name}")]

    decisions: list[tuple[str, str | None]] = []
    protect(
        server, on_decision=lambda d, name: decisions.append((name, d.code))
    )  # legacy rules from the server's own catalog: `gravar` is transactional

    async def steps(c: Any) -> Any:
        listed = await c.list_tools()
        blocked = await c.call_tool("gravar", {"valor": "x"})
        allowed = await c.call_tool("gravar", {"valor": "x", "confirmed": True, "confirmation": True})
        read = await c.call_tool("ler", {})
        return listed, blocked, allowed, read

    listed, blocked, allowed, read = run(server, steps)
    assert [t.name for t in listed.tools] == ["gravar", "ler"]
    assert blocked.isError and blocked.structuredContent["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert json.loads(blocked.content[0].text) == blocked.structuredContent  # no outputSchema: both
    assert not allowed.isError and not read.isError
    assert received == [("gravar", {"valor": "x"}), ("ler", {})]
    assert decisions == [("gravar", "CONFIRMATION_REQUIRED"), ("gravar", None), ("ler", None)]
