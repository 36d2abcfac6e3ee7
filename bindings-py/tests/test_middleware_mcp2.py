"""The middleware on mcp 2.x: ``MCPServer`` and the low-level ``Server``
(``on_list_tools=`` / ``on_call_tool=``), driven by the SDK's own ``Client``
in process, in both connection modes (2026-07-28 and the initialize
handshake). Runs in the mcp 2.x environment scripts/test.sh makes
(requirements-mcp2.lock); skipped where mcp 1.x is installed."""

from __future__ import annotations

import json
import threading
from typing import Annotated, Any

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver", reason="mcp 2.x only (requirements-mcp2.lock)")

from mcp import Client, types
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer, Resolve
from pydantic import AfterValidator, BeforeValidator, Field

from mcp_toolgate import Context, RuleSet
from mcp_toolgate import middleware as middleware_module
from mcp_toolgate.middleware import protect

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
ROUTE = Context(allowed_tools=["consultar", "reembolsar"])
MODES = ["auto", "legacy"]


def mcpserver(ran: list[tuple[str, dict[str, Any]]], with_hidden: bool = True) -> MCPServer:
    mcp = MCPServer("shop")

    @mcp.tool()
    def consultar(order_id: str) -> dict[str, str]:
        """Order status."""
        ran.append(("consultar", {"order_id": order_id}))
        return {"order_id": order_id, "status": "ENTREGUE"}

    @mcp.tool()
    async def reembolsar(order_id: str) -> dict[str, str]:
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


def run(server: Any, steps: Any, mode: str = "auto") -> Any:
    async def go() -> Any:
        async with Client(server, mode=mode) as client:  # type: ignore[arg-type]
            return await steps(client)

    return anyio.run(go)


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.parametrize("mode", MODES)
def test_mcpserver_list_is_filtered_and_derived(mode: str) -> None:
    server = mcpserver([])
    guard = protect(server, policy_text=POLICY, context=ROUTE)
    assert guard.sdk_major == 2
    listed = run(server, lambda c: c.list_tools(), mode)
    assert [t.name for t in listed.tools] == ["consultar", "reembolsar"]
    by_name = {t.name: t for t in listed.tools}
    assert by_name["consultar"].annotations.read_only_hint is True
    assert by_name["reembolsar"].annotations.read_only_hint is False
    assert by_name["consultar"].output_schema is not None  # the server's own tool object, kept
    direct = mcpserver([])
    protect(direct, policy_text=POLICY, context=Context(surface="direct"))
    assert [t.name for t in run(direct, lambda c: c.list_tools(), mode).tools] == ["consultar"]


@pytest.mark.parametrize("mode", MODES)
def test_mcpserver_calls(mode: str, tmp_path: Any) -> None:
    ran: list[Any] = []
    server = mcpserver(ran)
    policy = tmp_path / "tool_policies.yaml"
    policy.write_text(POLICY)
    decisions: list[str | None] = []
    guard = protect(
        server,
        policy_path=policy,
        context=ROUTE,
        confirmation="none",
        on_decision=lambda d, _: decisions.append(d.code),
    )

    async def steps(c: Any) -> Any:
        write = await c.call_tool("reembolsar", {"order_id": "9", "confirmed": True})
        read = await c.call_tool("consultar", {"order_id": "9", "confirmed": True})
        hidden = await c.call_tool("apagar_tudo", {})
        never = await c.call_tool("nao_existe", {})
        return write, read, hidden, never

    write, read, hidden, never = run(server, steps, mode)
    # Blocked: exactly the engine's blocked result; the handler never ran.
    expected = anyio.run(guard.rules).decide(
        {"name": "reembolsar", "arguments": {"order_id": "9", "confirmed": True}}, ROUTE, "none"
    )
    assert expected.decision.code == "CONFIRMATION_REQUIRED"
    assert write.is_error and _text(write) == expected.decision.json
    assert write.structured_content is None  # MCPServer declared an outputSchema: left out
    assert json.loads(expected.blocked_result_json or "")["isError"] is True
    # Allowed: the handler got the engine's arguments (the model's field dropped).
    assert not read.is_error and read.structured_content == {"order_id": "9", "status": "ENTREGUE"}
    assert ran == [("consultar", {"order_id": "9"})]
    # Hidden == unknown, as the SDK answers a server without the tool.
    plain = mcpserver([], with_hidden=False)
    unknown = run(plain, lambda c: c.call_tool("apagar_tudo", {}), mode)
    assert hidden.model_dump() == unknown.model_dump() and hidden.is_error
    assert never.model_dump() == run(plain, lambda c: c.call_tool("nao_existe", {}), mode).model_dump()
    assert decisions == ["CONFIRMATION_REQUIRED", None, "NOT_FOUND", "NOT_FOUND"]


def test_mcpserver_confirmation_argument_runs_the_write_once() -> None:
    ran: list[Any] = []
    server = mcpserver(ran)
    protect(server, policy_text=POLICY, context=ROUTE, confirmation="argument")  # opt-in: trust the model's field
    result = run(server, lambda c: c.call_tool("reembolsar", {"order_id": "9", "confirmed": True}))
    assert not result.is_error, result
    assert result.structured_content == {"order_id": "9", "status": "REEMBOLSADO"}
    assert ran == [("reembolsar", {"order_id": "9"})]


@pytest.mark.parametrize("mode", MODES)
def test_argument_never_takes_the_models_word_from_a_client_that_can_be_asked(mode: str) -> None:
    """SPEC §8: a client that declared form elicitation (in the handshake, or
    in a 2026-07-28 request's ``_meta``) can be asked, so with
    ``confirmation="argument"`` its model's ``confirmed: true`` is not taken;
    this middleware does not ask, so the write waits for a person."""
    asked: list[Any] = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={})

    async def go(server: MCPServer) -> types.CallToolResult:
        async with Client(server, mode=mode, elicitation_callback=answer) as client:  # type: ignore[arg-type]
            return await client.call_tool("reembolsar", {"order_id": "9", "confirmed": True})

    ran: list[Any] = []
    server = mcpserver(ran)
    protect(server, policy_text=POLICY, context=ROUTE, confirmation="argument")
    result = anyio.run(go, server)
    assert result.is_error and json.loads(_text(result))["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert ran == [] and asked == []


def test_the_engine_checks_the_arguments_as_sent() -> None:
    """9 for a string parameter: MCPServer would coerce it; the engine refuses it first."""
    ran: list[Any] = []
    server = mcpserver(ran)
    codes: list[str | None] = []
    protect(server, policy_text=POLICY, context=ROUTE, on_decision=lambda d, _: codes.append(d.code))
    result = run(server, lambda c: c.call_tool("consultar", {"order_id": 9}))
    assert result.is_error and json.loads(_text(result))["error"]["code"] == "BAD_REQUEST"
    assert ran == [] and codes == ["BAD_REQUEST"]


def test_context_from_the_request() -> None:
    seen: list[Any] = []

    def context(request_context: Any) -> Context:
        seen.append(request_context)
        return Context(surface="direct")

    server = mcpserver([])
    protect(server, policy_text=POLICY, context=context)
    result = run(server, lambda c: c.call_tool("reembolsar", {"order_id": "9", "confirmed": True}))
    assert result.is_error and _text(result) == "Unknown tool: reembolsar"
    assert seen and seen[-1] is not None and seen[-1].method == "tools/call"


@pytest.mark.parametrize("mode", MODES)
def test_lowlevel_server(mode: str) -> None:
    received: list[tuple[str, dict[str, Any]]] = []
    tools = [
        types.Tool(
            name="ler",
            input_schema={"type": "object", "properties": {}},
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="gravar",
            input_schema={"type": "object", "properties": {"valor": {"type": "string"}}, "required": ["valor"]},
        ),
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        received.append((params.name, dict(params.arguments or {})))
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"ok {params.name}")])

    server = Server("lowlevel", on_list_tools=list_tools, on_call_tool=call_tool)
    decisions: list[tuple[str, str | None]] = []
    # Legacy rules from the server's own catalog: `gravar` is transactional;
    # confirmation="argument" (opt-in): the model's confirmed: true counts.
    protect(server, legacy=True, confirmation="argument", on_decision=lambda d, name: decisions.append((name, d.code)))

    async def steps(c: Any) -> Any:
        listed = await c.list_tools()
        blocked = await c.call_tool("gravar", {"valor": "x"})
        allowed = await c.call_tool("gravar", {"valor": "x", "confirmed": True, "confirmation": True})
        read = await c.call_tool("ler", {})
        return listed, blocked, allowed, read

    listed, blocked, allowed, read = run(server, steps, mode)
    assert [t.name for t in listed.tools] == ["gravar", "ler"]
    assert blocked.is_error and blocked.structured_content["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert json.loads(_text(blocked)) == blocked.structured_content  # no outputSchema: both
    assert not allowed.is_error and not read.is_error
    assert received == [("gravar", {"valor": "x"}), ("ler", {})]
    assert decisions == [("gravar", "CONFIRMATION_REQUIRED"), ("gravar", None), ("ler", None)]


def test_the_engine_loads_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """RuleSet.load runs on a worker thread, once, however many requests race."""
    threads: list[int] = []
    real = RuleSet.load

    def load(*args: Any, **kwargs: Any) -> RuleSet:
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(middleware_module.RuleSet, "load", staticmethod(load))
    server = mcpserver([])
    protect(server, policy_text=POLICY, context=ROUTE)
    loop_thread: list[int] = []

    async def steps(c: Any) -> Any:
        loop_thread.append(threading.get_ident())
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(c.list_tools)

    run(server, steps)
    assert len(threads) == 1 and threads[0] != loop_thread[0]


# -- review 2 (bindings): cache hints, the pre-dispatch lookup, later handlers ---


@pytest.mark.parametrize("mode", MODES)
def test_the_filtered_list_is_never_marked_public(mode: str) -> None:
    """SEP-2549: a server-wide ``CacheHint(scope="public")`` says a tools/list
    may be shared across authorization contexts; the guard's list is cut for
    one caller, so it goes out private (a handler's own "public" too)."""
    from mcp.server.caching import CacheHint

    server = MCPServer("shop", cache_hints={"tools/list": CacheHint(ttl_ms=600_000, scope="public")})

    @server.tool()
    def consultar(order_id: str) -> str:
        """Order status."""
        return order_id

    @server.tool()
    def apagar_tudo() -> str:
        """Not on this route."""
        return "apagado"

    plain = run(server, lambda c: c.list_tools(), mode)
    protect(server, policy_text=POLICY, context=ROUTE)
    listed = run(server, lambda c: c.list_tools(), mode)
    assert [t.name for t in listed.tools] == ["consultar"]
    assert listed.cache_scope != "public"
    if mode == "auto":  # 2026-07-28: the hints reach the client (the handshake era has none)
        assert plain.cache_scope == "public"
        assert listed.cache_scope == "private" and listed.ttl_ms == plain.ttl_ms == 600_000

    async def public_list(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name="ler", input_schema={"type": "object"})], cache_scope="public"
        )

    async def call(ctx: Any, params: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[])

    lowlevel = Server("lowlevel", on_list_tools=public_list, on_call_tool=call)
    guard = protect(lowlevel, legacy=True)
    result = anyio.run(guard._handle_list_v2, None, None)
    assert [t.name for t in result.tools] == ["ler"] and result.cache_scope == "private"


#: An argument also sent as the ``Mcp-Param-Region`` header on 2026-07-28 HTTP.
Region = Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]


def _http_shop(hidden: bool) -> MCPServer:
    """A shop whose tools take an ``x-mcp-header`` argument."""
    mcp = MCPServer("shop")

    @mcp.tool()
    def consultar(order_id: str, region: Region = "eu") -> str:
        """Order status."""
        return f"{order_id} {region}"

    if hidden:

        @mcp.tool()
        def apagar_tudo(region: Region) -> str:
            """Not on this route."""
            return "apagado " + region

    return mcp


def _over_http(server: MCPServer, steps: Any) -> Any:
    """`steps(client)` against `server`'s Streamable HTTP app in process (2026-07-28)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.transport_security import TransportSecuritySettings

    app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)
    )

    async def go() -> Any:
        async with app.router.lifespan_context(app):
            http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://testserver")
            async with http, Client(streamable_http_client("http://testserver/mcp", http_client=http)) as client:
                return await steps(client)

    return anyio.run(go)


async def _answers(client: Any) -> list[Any]:
    out: list[Any] = []
    for name, arguments in (
        ("consultar", {"order_id": "9", "region": "eu"}),
        ("apagar_tudo", {"region": "eu"}),
        ("nao_existe", {"region": "eu"}),
    ):
        try:
            result = await client.call_tool(name, arguments)
            out.append(("result", result.is_error, [getattr(b, "text", None) for b in result.content]))
        except Exception as e:  # the SDK's 400 for a header it checked
            out.append(("raised", type(e).__name__, str(e)))
    return out


def test_a_hidden_tool_answers_as_a_missing_one_on_2026_07_28_http() -> None:
    """MCPServer answers the SDK's pre-dispatch Mcp-Param-* check from its own
    tool table (``get_tool_input_schema``), hidden tools included: a hidden tool
    got a 400 naming its argument, a missing one "Unknown tool". After
    protect() the check reads the guarded, per-caller tools/list."""
    server = _http_shop(hidden=True)
    protect(server, policy_text=POLICY, context=Context(allowed_tools=["consultar"]))
    protected = _over_http(server, _answers)
    missing = _over_http(_http_shop(hidden=False), _answers)
    assert protected == missing
    assert server._lowlevel_server.get_tool_input_schema is None
    assert protected[0] == ("result", False, ["9 eu"])  # a listed tool's header is still checked and served
    assert protected[1] == ("result", True, ["Unknown tool: apagar_tudo"])


def test_the_default_confirmation_never_takes_the_models_word() -> None:
    """SPEC §8: ``confirmed: true`` from the model counts only where the host
    opted in (``confirmation="argument"``)."""
    ran: list[Any] = []
    server = mcpserver(ran)
    guard = protect(server, policy_text=POLICY, context=ROUTE)
    assert guard.confirmation == "none"
    result = run(server, lambda c: c.call_tool("reembolsar", {"order_id": "9", "confirmed": True}))
    assert result.is_error and json.loads(_text(result))["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert ran == []


def test_handlers_registered_after_protect_stay_behind_the_guard() -> None:
    """``add_request_handler`` replaces a handler; for tools/list and
    tools/call after protect() it replaces the one behind the guard."""
    received: list[Any] = []
    tools = [
        types.Tool(name="gravar", input_schema={"type": "object"}),
        types.Tool(
            name="nova", input_schema={"type": "object"}, annotations=types.ToolAnnotations(read_only_hint=True)
        ),
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools[:1])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        received.append(("first", params.name))
        return types.CallToolResult(content=[])

    server = Server("lowlevel", on_list_tools=list_tools, on_call_tool=call_tool)
    guard = protect(server, legacy=True)
    assert [t.name for t in run(server, lambda c: c.list_tools()).tools] == ["gravar"]

    async def later_list(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def later_call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        received.append(("later", params.name, dict(params.arguments or {})))
        return types.CallToolResult(content=[types.TextContent(type="text", text="ran")])

    server.add_request_handler("tools/call", types.CallToolRequestParams, later_call)
    server.add_request_handler("tools/list", types.PaginatedRequestParams, later_list)
    assert server.get_request_handler("tools/call").handler == guard._handle_call_v2  # type: ignore[union-attr]
    assert server.get_request_handler("tools/list").handler == guard._handle_list_v2  # type: ignore[union-attr]

    async def steps(c: Any) -> Any:
        listed = await c.list_tools()
        blocked = await c.call_tool("gravar", {"confirmed": True})
        read = await c.call_tool("nova", {"confirmed": True})
        return listed, blocked, read

    listed, blocked, read = run(server, steps)
    # The new list handler's tools are the catalog now (the rules rebuilt from it).
    assert [t.name for t in listed.tools] == ["gravar", "nova"]
    assert blocked.is_error and json.loads(_text(blocked))["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert not read.is_error and _text(read) == "ran"
    assert received == [("later", "nova", {})]  # decided, and the engine's arguments

    # A second guard on the same server: both stay in front of a later handler.
    second = protect(server, legacy=True, context=Context(allowed_tools=["gravar"]))
    server.add_request_handler("tools/call", types.CallToolRequestParams, later_call)
    assert server.get_request_handler("tools/call").handler == second._handle_call_v2  # type: ignore[union-attr]
    hidden = run(server, lambda c: c.call_tool("nova", {}))
    assert hidden.is_error and _text(hidden) == "Unknown tool: nova"
    assert received == [("later", "nova", {})]


def test_the_handler_context_carries_the_forwarded_arguments() -> None:
    """The SDK gives handlers the raw params in ``ctx.params`` too; after the
    guard they hold the engine's forward, never the model's confirmation fields."""
    seen: list[Any] = []

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="gravar", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        seen.append((dict(params.arguments or {}), dict((ctx.params or {}).get("arguments") or {})))
        return types.CallToolResult(content=[])

    server = Server("lowlevel", on_list_tools=list_tools, on_call_tool=call_tool)
    protect(server, legacy=True, confirmation="argument")
    result = run(server, lambda c: c.call_tool("gravar", {"valor": 5, "confirmed": True, "confirmation": True}))
    assert not result.is_error
    assert seen == [({"valor": 5}, {"valor": 5})]


#: What the engine is sent, times 1 000: what the function gets.
_Thousandfold = Annotated[int, BeforeValidator(lambda v: int(v) * 1000)]


def _pay_server(effects: list[tuple[str, int]], resolver: bool) -> MCPServer:
    """`pay`, whose model multiplies the amount by 1 000 (a pydantic validator:
    the function gets what the engine never saw) and, with `resolver`, a
    Resolve(...) dependency that acts on the amount before the function runs."""
    mcp = MCPServer("pay")

    def reserve_funds(amount: int) -> str:
        effects.append(("reserved", amount))
        return f"hold-{amount}"

    if resolver:

        def pay_holding(amount: int, hold: str) -> str:
            effects.append(("paid", amount))
            return hold

        # Real objects, not this module's postponed (string) annotations: the
        # resolver is local to the test.
        pay_holding.__annotations__ = {
            "amount": _Thousandfold,
            "hold": Annotated[str, Resolve(reserve_funds)],
            "return": str,
        }
        mcp.tool(name="pay", annotations={"readOnlyHint": True})(pay_holding)

    else:

        @mcp.tool(annotations={"readOnlyHint": True})
        def pay(amount: _Thousandfold) -> str:
            effects.append(("paid", amount))
            return str(amount)

    return mcp


PAY_CATALOG = json.dumps(
    {
        "formatVersion": 1,
        "tools": [
            {
                "name": "pay",
                "effect": "read",
                "inputSchema": {"type": "object", "properties": {"amount": {"type": "integer", "maximum": 100}}},
            }
        ],
    }
)


def test_resolvers_run_only_on_arguments_the_engine_allowed() -> None:
    """Tool.run hands the model's output to the resolvers before the function:
    a resolver must never act on an amount the engine denies (5 -> 5000 > 100)."""
    effects: list[tuple[str, int]] = []
    server = _pay_server(effects, resolver=True)
    codes: list[str | None] = []
    protect(server, rules=RuleSet.load(catalog=PAY_CATALOG), on_decision=lambda d, _: codes.append(d.code or "ALLOWED"))
    denied = run(server, lambda c: c.call_tool("pay", {"amount": 5}))
    assert denied.is_error and json.loads(_text(denied))["error"]["code"] == "BAD_REQUEST"
    assert effects == [] and codes == ["ALLOWED", "BAD_REQUEST"]
    # 0 stays 0 through the model: allowed twice, the resolver and the function run once.
    codes.clear()
    allowed = run(server, lambda c: c.call_tool("pay", {"amount": 0}))
    assert not allowed.is_error, allowed
    assert effects == [("reserved", 0), ("paid", 0)] and codes == ["ALLOWED"]


def test_a_denied_model_output_is_not_logged_as_a_crashed_tool(caplog: pytest.LogCaptureFixture) -> None:
    server = _pay_server([], resolver=False)
    protect(server, rules=RuleSet.load(catalog=PAY_CATALOG))
    with caplog.at_level("INFO"):
        denied = run(server, lambda c: c.call_tool("pay", {"amount": 5}))
    assert json.loads(_text(denied))["error"]["code"] == "BAD_REQUEST"
    assert not [r for r in caplog.records if r.exc_info or "unexpected exception" in r.getMessage()]


def test_a_transformed_amount_is_decided_once_before_the_function() -> None:
    """The model's output is decided where it is made, once: the function's
    own check finds it decided (5 -> 5000, allowed up to 10 000)."""
    effects: list[tuple[str, int]] = []
    server = _pay_server(effects, resolver=False)
    codes: list[str | None] = []
    catalog = PAY_CATALOG.replace('"maximum": 100}', '"maximum": 10000}')
    protect(server, rules=RuleSet.load(catalog=catalog), on_decision=lambda d, _: codes.append(d.code or "ALLOWED"))
    allowed = run(server, lambda c: c.call_tool("pay", {"amount": 5}))
    assert not allowed.is_error, allowed
    assert effects == [("paid", 5000)] and codes == ["ALLOWED", "ALLOWED"]


def test_the_lowlevel_server_of_an_mcpserver_is_refused() -> None:
    """Guarding `_lowlevel_server` would decide the arguments as sent while the
    function gets the model's output: refused, as Node refuses McpServer.server."""
    server = _pay_server([], resolver=False)
    with pytest.raises(TypeError, match="pass the MCPServer"):
        protect(server._lowlevel_server, rules=RuleSet.load(catalog=PAY_CATALOG))
    # A low-level server of the user's own is guarded as before (test_lowlevel_server).


def test_a_tool_replaced_after_protect_is_decided_by_its_own_definition() -> None:
    """The rules derived from the server's own list follow its tools: a
    read-only tool removed and added again as a destructive one must not run
    under the read-only entry; a tool added later is known without reload()."""
    ran: list[str] = []
    server = MCPServer("ops")

    @server.tool(name="run", annotations={"readOnlyHint": True})
    def status() -> str:
        ran.append("status")
        return "ok"

    protect(server, legacy=True)

    async def steps(client: Client) -> list[types.CallToolResult]:
        results = [await client.call_tool("run", {})]
        server.remove_tool("run")

        @server.tool(name="run", annotations={"readOnlyHint": False, "destructiveHint": True})
        def wipe() -> str:
            ran.append("wipe")
            return "wiped"

        @server.tool(name="later", annotations={"readOnlyHint": True})
        def later() -> str:
            ran.append("later")
            return "later"

        results.append(await client.call_tool("run", {}))
        results.append(await client.call_tool("later", {}))
        listed = await client.list_tools()
        assert sorted(t.name for t in listed.tools) == ["later", "run"]
        return results

    before, replaced, added = run(server, steps)
    assert not before.is_error and not added.is_error
    assert replaced.is_error and json.loads(_text(replaced))["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert ran == ["status", "later"]


def test_an_mcpserver_takes_one_guard() -> None:
    """Its tool functions check their arguments against one guard's decision:
    a second guard's rules would never decide what they get."""
    server = mcpserver([])
    protect(server, legacy=True)
    with pytest.raises(TypeError, match="already guarded"):
        protect(server, legacy=True)


def test_a_validation_alias_is_decided_under_the_key_the_schema_constrains() -> None:
    """The wire and the schema say `amt`, the function's keyword is `amount`:
    what the function gets is decided as `amt`, in both connection modes."""
    ran: list[int] = []
    server = MCPServer("pay")

    def pay(amount: int = 1) -> str:
        ran.append(amount)
        return "ok"

    # Real objects, not this module's postponed (string) annotations.
    pay.__annotations__ = {
        "amount": Annotated[int, Field(validation_alias="amt", le=1000), AfterValidator(lambda v: v * 100)],
        "return": str,
    }
    server.tool(annotations={"readOnlyHint": True})(pay)
    protect(server, policy_text="version: 1\ndefaults:\n  operation_type: read_only\n")

    for mode in ("auto", "legacy"):
        aliased = run(server, lambda c: c.call_tool("pay", {"amt": 500}), mode)
        assert aliased.is_error and json.loads(_text(aliased))["error"]["code"] == "BAD_REQUEST", mode
        small = run(server, lambda c: c.call_tool("pay", {"amt": 5}), mode)
        assert not small.is_error, mode
    assert ran == [500, 500]


def test_the_lowlevel_server_of_a_guarded_mcpserver_is_refused_too() -> None:
    """Review 30 F2: protect(mcp) first, then its low-level server: refused as
    well (its tools/call handler is the guard's own)."""
    server = _pay_server([], resolver=False)
    protect(server, rules=RuleSet.load(catalog=PAY_CATALOG))
    with pytest.raises(TypeError, match="pass the MCPServer"):
        protect(server._lowlevel_server, rules=RuleSet.load(catalog=PAY_CATALOG))


@pytest.mark.parametrize("mode", MODES)
def test_every_page_of_a_lowlevel_servers_list_is_in_the_rules(mode: str) -> None:
    """Review 30 F7: rules derived from a paginated tools/list hold the tools
    of every page."""
    tools = [
        types.Tool(
            name=f"t{i}", input_schema={"type": "object"}, annotations=types.ToolAnnotations(read_only_hint=True)
        )
        for i in range(4)
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        more = str(start + 2) if start + 2 < len(tools) else None
        return types.ListToolsResult(tools=tools[start : start + 2], next_cursor=more)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} ran")])

    server = Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)
    protect(server, legacy=True)
    result = run(server, lambda c: c.call_tool("t3", {}), mode)
    assert not result.is_error and _text(result) == "t3 ran"


def test_a_context_callback_that_returns_nothing_refuses_the_call() -> None:
    """Review 30 F4: a callback returning None is refused (INVALID_CONTEXT),
    never read as "no scope check"."""
    ran: list[Any] = []
    server = mcpserver(ran)
    protect(server, policy_text=POLICY, context=lambda request_context: None)
    result = run(server, lambda c: c.call_tool("consultar", {"order_id": "1"}))
    assert result.is_error and json.loads(_text(result))["error"]["code"] == "INVALID_CONTEXT"
    assert ran == []
