"""Server-side middleware on the official mcp SDK (FastMCP and low-level Server),
over the SDK's in-memory transport."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.server.fastmcp import FastMCP
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.memory import create_client_server_memory_streams, create_connected_server_and_client_session
from mcp.shared.message import SessionMessage
from pydantic import AfterValidator, Field

import vectorfile
from conftest import FIXTURES, VECTORS
from mcp_toolgate import Context
from mcp_toolgate.middleware import protect
from test_exact_args import _Lines

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


def _compact(result: types.CallToolResult) -> str:
    """A result as the SDK writes it on the wire, compact."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return json.dumps(dumped, ensure_ascii=False, separators=(",", ":"))


async def _wire(server: Server[Any, Any], steps: Callable[[ClientSession], Awaitable[Any]]) -> tuple[Any, list[str]]:
    """`steps` run by a real ClientSession against `server` over the SDK's own
    stdio transport (in-process lines); returns the server's lines too."""
    to_server, server_in = anyio.create_memory_object_stream[str](16)
    server_out, from_server = anyio.create_memory_object_stream[str](16)
    client_read_w, client_read = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    client_write, client_write_r = anyio.create_memory_object_stream[SessionMessage](16)
    lines: list[str] = []

    async def pump_out() -> None:
        async with client_write_r:
            async for message in client_write_r:
                await to_server.send(message.message.model_dump_json(by_alias=True, exclude_none=True) + "\n")
        await to_server.aclose()

    async def pump_in() -> None:
        async with client_read_w, from_server:
            async for line in from_server:
                lines.append(line)
                await client_read_w.send(SessionMessage(types.JSONRPCMessage.model_validate_json(line)))

    async with anyio.create_task_group() as tg:
        async with stdio_server(_Lines(receive=server_in), _Lines(send=server_out)) as (read, write):  # type: ignore[arg-type]
            tg.start_soon(lambda: server.run(read, write, server.create_initialization_options()))
            tg.start_soon(pump_out)
            tg.start_soon(pump_in)
            async with ClientSession(client_read, client_write) as client:
                await client.initialize()
                out = await steps(client)
            tg.cancel_scope.cancel()
    return out, lines


def test_tools_list_is_filtered_and_derived() -> None:
    ran: list[Any] = []
    server = fastmcp(ran)
    protect(server, policy_text=POLICY, context=ROUTE)
    listed = run(server, lambda c: c.list_tools())
    assert [t.name for t in listed.tools] == ["consultar", "reembolsar"]
    by_name = {t.name: t for t in listed.tools}
    assert by_name["consultar"].annotations.readOnlyHint is True
    assert by_name["reembolsar"].annotations.readOnlyHint is False
    assert by_name["consultar"].outputSchema is not None  # the server's own tool object, kept
    direct = fastmcp(ran)
    protect(direct, policy_text=POLICY, context=Context(surface="direct"))
    assert [t.name for t in run(direct, lambda c: c.list_tools()).tools] == ["consultar"]


def test_blocked_call_is_the_engines_blocked_result_and_the_handler_never_runs() -> None:
    ran: list[Any] = []
    server = fastmcp(ran)
    guard = protect(server, policy_text=POLICY, context=ROUTE)
    result = run(server, lambda c: c.call_tool("reembolsar", {"order_id": "9"}))
    assert result.isError
    call = {"name": "reembolsar", "arguments": {"order_id": "9"}}
    expected = asyncio.run(guard.rules()).decide(call, ROUTE, guard.confirmation)
    assert expected.decision.code == "CONFIRMATION_REQUIRED" and expected.blocked_result_json is not None
    assert result.content[0].text == expected.decision.json
    # FastMCP declared an outputSchema for this tool: the engine leaves the
    # decision out of structuredContent (clients check it against the schema).
    assert result.structuredContent is None
    assert _compact(result) == expected.blocked_result_json
    assert ran == []


def test_removed_and_unknown_options_are_refused() -> None:
    with pytest.raises(TypeError, match="structured_content option was removed"):
        protect(fastmcp([]), policy_text=POLICY, structured_content="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="confirmation must be"):
        protect(fastmcp([]), policy_text=POLICY, confirmation="person")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="policy= is now policy_path="):
        protect(fastmcp([]), policy=POLICY)
    with pytest.raises(TypeError, match=r"exactly one of policy_path=.*got none"):
        protect(fastmcp([]))
    with pytest.raises(TypeError, match="got policy_path, policy_text"):
        protect(fastmcp([]), policy_path=__file__, policy_text=POLICY)
    with pytest.raises(FileNotFoundError, match="policy_path="):
        protect(fastmcp([]), policy_path="/no/such/policy.yaml")
    with pytest.raises(TypeError, match="policy_text= is the policy's text"):
        protect(fastmcp([]), policy_text=Path(__file__))  # type: ignore[arg-type]


def test_confirmation_none_blocks_a_write_even_with_the_models_confirmed_true() -> None:
    ran: list[Any] = []
    server = fastmcp(ran)
    decisions: list[str | None] = []
    protect(
        server,
        policy_text=POLICY,
        context=ROUTE,
        confirmation="none",
        on_decision=lambda d, _: decisions.append(d.code),
    )

    async def steps(c: Any) -> Any:
        write = await c.call_tool("reembolsar", {"order_id": "9", "confirmed": True})
        both = await c.call_tool("reembolsar", {"order_id": "9", "confirmed": True, "confirmation": True})
        read = await c.call_tool("consultar", {"order_id": "9", "confirmed": True})
        return write, both, read

    write, both, read = run(server, steps)
    for blocked in (write, both):
        assert blocked.isError
        assert json.loads(blocked.content[0].text)["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert not read.isError
    # The read ran without the field the model wrote (the engine removed it).
    assert ran == [("consultar", {"order_id": "9"})]
    assert decisions == ["CONFIRMATION_REQUIRED", "CONFIRMATION_REQUIRED", None]


def test_the_default_confirmation_never_takes_the_models_word() -> None:
    """SPEC §8: the model's own ``confirmed: true`` counts only where the host
    is configured to trust it: ``confirmation="argument"`` is an opt-in."""
    ran: list[Any] = []
    server = fastmcp(ran)
    guard = protect(server, policy_text=POLICY, context=ROUTE)
    assert guard.confirmation == "none"
    result = run(server, lambda c: c.call_tool("reembolsar", {"order_id": "9", "confirmed": True}))
    assert result.isError and json.loads(result.content[0].text)["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert ran == []


def test_allowed_call_reaches_the_handler_without_engine_fields() -> None:
    ran: list[Any] = []
    server = fastmcp(ran)
    protect(server, policy_text=POLICY, context=ROUTE, confirmation="argument")  # opt-in: the model's field counts
    result = run(server, lambda c: c.call_tool("reembolsar", {"order_id": "9", "confirmed": True}))
    assert not result.isError, result
    assert result.structuredContent == {"order_id": "9", "status": "REEMBOLSADO"}
    assert ran == [("reembolsar", {"order_id": "9"})]


def test_argument_never_takes_the_models_word_from_a_client_that_can_be_asked() -> None:
    """SPEC §8: with ``confirmation="argument"``, a client that declared form
    elicitation (``elicitation: {}`` or ``{form: {}}``) gets its person asked,
    never its model's word taken: this middleware does not ask, so the write
    waits (CONFIRMATION_REQUIRED); a URL-only client cannot be asked a form."""
    asked: list[Any] = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={})

    class Declaring(ClientSession):
        """A client whose handshake declares ``declared`` as its elicitation
        (this SDK declares form and URL for any callback)."""

        declared: types.ElicitationCapability

        async def send_request(self, request: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(request.root, types.InitializeRequest):
                params = request.root.params
                capabilities = params.capabilities.model_copy(update={"elicitation": self.declared})
                params = params.model_copy(update={"capabilities": capabilities})
                request = types.ClientRequest(request.root.model_copy(update={"params": params}))
            return await super().send_request(request, *args, **kwargs)

    async def with_capabilities(server: Any, declared: types.ElicitationCapability) -> types.CallToolResult:
        async with create_client_server_memory_streams() as (client_streams, server_streams):
            lowlevel = server._mcp_server
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(lambda: lowlevel.run(*server_streams, lowlevel.create_initialization_options()))
                async with Declaring(*client_streams, elicitation_callback=answer) as client:
                    client.declared = declared
                    await client.initialize()
                    result = await client.call_tool("reembolsar", {"order_id": "9", "confirmed": True})
                tasks.cancel_scope.cancel()
        return result

    for declared, runs in (
        (types.ElicitationCapability(), False),
        (types.ElicitationCapability(form=types.FormElicitationCapability()), False),
        (types.ElicitationCapability(url=types.UrlElicitationCapability()), True),
    ):
        ran: list[Any] = []
        server = fastmcp(ran)
        protect(server, policy_text=POLICY, context=ROUTE, confirmation="argument")
        result = asyncio.run(with_capabilities(server, declared))
        if runs:
            assert not result.isError, result
            assert ran == [("reembolsar", {"order_id": "9"})]
        else:
            assert result.isError and json.loads(result.content[0].text)["error"]["code"] == "CONFIRMATION_REQUIRED"
            assert ran == []
    assert asked == []


def test_declared_form_elicitation_follows_the_shared_table() -> None:
    """One rule in every host (docs/spec.md §8): the capability shapes of
    tests/vectors/fixtures/form-elicitation.json, as JSON and, where the
    SDK's model takes them, as that model."""
    from mcp_toolgate.middleware import _declares_form_elicitation

    table = json.loads((FIXTURES / "form-elicitation.json").read_text(encoding="utf-8"))
    assert len(table["cases"]) > 10
    modelled = 0
    for case in table["cases"]:
        shape, expected = case["capabilities"], case["declares_form"]
        assert _declares_form_elicitation(shape) is expected, shape
        try:
            model = types.ClientCapabilities.model_validate(shape)
        except ValueError:
            continue  # the SDK refuses the shape in a handshake
        modelled += 1
        assert _declares_form_elicitation(model) is expected, shape
    assert modelled > 5


def test_hidden_tool_answers_exactly_like_an_unknown_tool() -> None:
    ran: list[Any] = []
    protected = fastmcp(ran)
    protect(protected, policy_text=POLICY, context=ROUTE)
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

    protect(server, policy_text=POLICY, context=context)
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
    # Legacy rules from the server's own catalog: `gravar` is transactional;
    # confirmation="argument" (opt-in): the model's confirmed: true counts.
    protect(server, legacy=True, confirmation="argument", on_decision=lambda d, name: decisions.append((name, d.code)))

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


PIPELINE = [VECTORS / "pipeline-output-schema.json", VECTORS / "pipeline-plans.json"]


def _vector_server(catalog: str, received: list[Any]) -> Server[Any, Any]:
    """A low-level server serving the vector's catalog; its handler records what it gets."""
    server: Server[Any, Any] = Server("vectors")
    tools = [types.Tool.model_validate({"inputSchema": {"type": "object"}, **t}) for t in json.loads(catalog)["tools"]]

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return tools

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        received.append((name, arguments))
        return {"rows": []}  # fits every outputSchema of these catalogs

    return server


@pytest.mark.parametrize("path", PIPELINE, ids=lambda p: p.name)
def test_the_pipeline_vectors_through_the_sdk_server_and_client(path: Any) -> None:
    """Every `decide` case the middleware can take (confirmation none or
    argument, object arguments): on the wire, a blocked call's result is
    exactly the vector's blocked_result; an allowed call's handler gets
    exactly its forward; NOT_FOUND is the SDK's unknown-tool answer."""
    vf = vectorfile.load(path)
    cases = [
        c
        for c in vf.cases
        if c["op"] == "decide"
        and vectorfile.confirmation(c) in ("none", "argument")
        and "call" in c
        and isinstance(c["call"].get("arguments", {}), dict)
    ]
    assert cases
    for confirmation in ("none", "argument"):
        mine = [c for c in cases if vectorfile.confirmation(c) == confirmation]
        received: list[Any] = []
        server = _vector_server(vf.catalog, received)
        current: dict[str, Any] = {}
        protect(
            server,
            catalog_text=vf.catalog,
            **({"policy_text": vf.policy} if vf.policy is not None else {"legacy": True}),
            confirmation=confirmation,
            context=lambda _, current=current: current["context"],
        )

        async def steps(client: ClientSession, mine: list[Any] = mine, current: dict[str, Any] = current) -> Any:
            results = []
            for case in mine:
                current["context"] = case.get("context") or {}
                call = case["call"]
                results.append(await client.call_tool(call["name"], call.get("arguments")))
            return results

        results, lines = anyio.run(_wire, server, steps)
        responses = {}
        for line in lines:
            message = json.loads(line)
            if "content" in message.get("result", {}):  # a tools/call answer
                responses[message["id"]] = line.rstrip("\n")
        call_ids = sorted(responses)
        assert len(call_ids) == len(mine)
        forwarded = iter(received)
        for case, result, call_id in zip(mine, results, call_ids, strict=True):
            expect = case["expect"]
            line = responses[call_id]
            if expect["blocked_result"] is not None:
                assert line == f'{{"jsonrpc":"2.0","id":{call_id},"result":{expect["blocked_result"]}}}', case["name"]
                assert _compact(result) == expect["blocked_result"], case["name"]
            elif expect["forward"] is not None:
                assert not result.isError, case["name"]
                assert next(forwarded) == (case["call"]["name"], json.loads(expect["forward"])), case["name"]
            else:
                unknown = f"Unknown tool: {case['call']['name']}"
                assert result.isError and result.content[0].text == unknown, case["name"]
        assert next(forwarded, None) is None


def test_each_http_request_is_decided_with_its_own_token() -> None:
    """Streamable HTTP with bearer tokens, one stateful session: a request
    carrying a narrower token of the same client than the one that opened the
    session is decided with its own scopes (the SDK's context variable keeps
    the first token's: python-sdk issue #2208)."""
    import socket
    import threading
    import time

    import httpx
    import uvicorn
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    granted = {"wide": ["a:read", "b:read"], "narrow": ["a:read"]}

    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            scopes = granted.get(token)
            # One client: the SDK serves a session only to the client that
            # opened it, and the same client may come back with fewer scopes.
            return None if scopes is None else AccessToken(token=token, client_id="agent", scopes=scopes)

    server = FastMCP(
        "tokens",
        token_verifier=Verifier(),
        auth=AuthSettings(
            issuer_url="https://auth.example",
            resource_server_url=f"http://127.0.0.1:{port}/mcp",
            validate_token_resource=False,
        ),
    )
    ran: list[str] = []

    @server.tool()
    def read_b() -> str:
        """Reads b."""
        ran.append("read_b")
        return "b"

    tool = {"name": "read_b", "effect": "read", "scopes": ["b:read"], "inputSchema": {"type": "object"}}
    protect(server, legacy=True, catalog_text=json.dumps({"formatVersion": 1, "tools": [tool]}))
    http = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=http.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not http.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert http.started

    current = ["wide"]

    class Bearer(httpx.Auth):
        def auth_flow(self, request: httpx.Request) -> Any:
            request.headers["Authorization"] = f"Bearer {current[0]}"
            yield request

    async def steps() -> tuple[Any, Any, Any]:
        async with (
            httpx.AsyncClient(auth=Bearer(), timeout=30) as http_client,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http_client) as (read, write, _),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            wide = await client.call_tool("read_b", {})
            current[0] = "narrow"
            narrow = await client.call_tool("read_b", {})
            listed = await client.list_tools()
            return wide, narrow, listed

    try:
        wide, narrow, listed = asyncio.run(steps())
    finally:
        http.should_exit = True
        thread.join(10)
    assert not wide.isError, wide
    assert narrow.isError and json.loads(narrow.content[0].text)["error"]["code"] == "SCOPE_DENIED", narrow
    assert ran == ["read_b"]
    assert [t.name for t in listed.tools] == []


# -- review 2 (bindings): later handlers, the default context, reload ----------


def test_handlers_registered_after_protect_stay_behind_the_guard() -> None:
    """mcp 1.x keeps handlers in ``request_handlers``: a tools/list or
    tools/call handler set after protect() (decorator, assignment, update)
    goes behind the guard, never in its place."""
    server: Server[Any, Any] = Server("lowlevel")
    received: list[Any] = []
    tools = [
        types.Tool(name="gravar", inputSchema={"type": "object"}),
        types.Tool(name="nova", inputSchema={"type": "object"}, annotations=types.ToolAnnotations(readOnlyHint=True)),
    ]

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return tools[:1]

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        received.append(("first", name))
        return []

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # mcp 1.x's tasks API
        experimental = server.experimental  # keeps a reference to the handler dict
    guard = protect(server, legacy=True)
    assert experimental._request_handlers is server.request_handlers
    assert [t.name for t in run(server, lambda c: c.list_tools()).tools] == ["gravar"]

    @server.list_tools()
    async def later_list() -> list[types.Tool]:
        return tools

    @server.call_tool()
    async def later_call(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        received.append(("later", name, arguments))
        return [types.TextContent(type="text", text="ran")]

    assert server.request_handlers[types.CallToolRequest] == guard._handle_call_v1
    assert server.request_handlers[types.ListToolsRequest] == guard._handle_list_v1

    async def steps(c: Any) -> Any:
        listed = await c.list_tools()
        blocked = await c.call_tool("gravar", {"confirmed": True})
        read = await c.call_tool("nova", {"confirmed": True})
        return listed, blocked, read

    listed, blocked, read = run(server, steps)
    assert [t.name for t in listed.tools] == ["gravar", "nova"]  # the rules rebuilt from the new list
    assert blocked.isError and json.loads(blocked.content[0].text)["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert not read.isError and read.content[0].text == "ran"
    assert received == [("later", "nova", {})]

    async def raw(req: Any) -> Any:
        received.append(("raw", req.params.name))
        return types.ServerResult(types.CallToolResult(content=[]))

    server.request_handlers[types.CallToolRequest] = raw
    server.request_handlers.update({types.CallToolRequest: raw})
    server.request_handlers.setdefault(types.CallToolRequest, raw)
    server.request_handlers |= {types.CallToolRequest: raw}
    assert server.request_handlers[types.CallToolRequest] == guard._handle_call_v1
    # A second guard: both stay in front of a later handler.
    second = protect(server, legacy=True, context=Context(allowed_tools=["gravar"]))
    server.request_handlers[types.CallToolRequest] = raw
    assert server.request_handlers[types.CallToolRequest] == second._handle_call_v1
    hidden = run(server, lambda c: c.call_tool("nova", {}))
    assert hidden.isError and hidden.content[0].text == "Unknown tool: nova"
    blocked = run(server, lambda c: c.call_tool("gravar", {}))
    assert json.loads(blocked.content[0].text)["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert received == [("later", "nova", {})]


def test_the_default_context_grants_no_scopes_to_an_unauthenticated_http_request() -> None:
    """Where the HTTP authentication middleware ran (``user`` in the scope) but
    the request has no token, the caller holds no scopes (not "no check")."""
    from types import SimpleNamespace

    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken
    from starlette.authentication import UnauthenticatedUser

    from mcp_toolgate.middleware import default_context

    def request(scope: dict[str, Any]) -> Any:
        return SimpleNamespace(request=SimpleNamespace(scope=scope))

    assert default_context(request({"type": "http", "user": UnauthenticatedUser()})) == Context(scopes=[])
    token = AccessToken(token="t", client_id="agent", scopes=["a:read"])
    assert default_context(request({"type": "http", "user": AuthenticatedUser(token)})) == Context(scopes=["a:read"])
    assert default_context(request({"type": "http"})) == Context()  # no authentication installed
    assert default_context(None) == Context()


def test_reload_keeps_the_rules_given(retail_rules: Any) -> None:
    """``rules=`` are the guard's rules for good: reload() never swaps them for
    legacy rules made from the server's own tools/list."""
    server = fastmcp([])
    guard = protect(server, rules=retail_rules)
    guard.reload()
    assert asyncio.run(guard.rules()) is retail_rules


def test_the_lowlevel_server_of_a_fastmcp_is_refused() -> None:
    """Guarding `_mcp_server` would decide the arguments as sent while the
    function gets what FastMCP's model makes of them: refused."""
    server = fastmcp([])
    with pytest.raises(TypeError, match="pass the MCPServer / FastMCP"):
        protect(server._mcp_server, policy_text=POLICY)


def test_a_tool_replaced_after_protect_is_decided_by_its_own_definition() -> None:
    """Rules derived from FastMCP's own list follow its tools: a read-only tool
    removed and added again as a destructive one is decided by its new entry."""
    ran: list[str] = []
    server = FastMCP("ops", log_level="WARNING")

    @server.tool(name="run", annotations=types.ToolAnnotations(readOnlyHint=True))
    def status() -> str:
        ran.append("status")
        return "ok"

    protect(server, legacy=True)

    async def steps(client: ClientSession) -> tuple[types.CallToolResult, types.CallToolResult]:
        before = await client.call_tool("run", {})
        server.remove_tool("run")

        @server.tool(name="run", annotations=types.ToolAnnotations(readOnlyHint=False, destructiveHint=True))
        def wipe() -> str:
            ran.append("wipe")
            return "wiped"

        return before, await client.call_tool("run", {})

    before, replaced = run(server, steps)
    assert not before.isError
    assert replaced.isError and json.loads(replaced.content[0].text)["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert ran == ["status"]


def test_a_fastmcp_takes_one_guard() -> None:
    """Its tool functions check their arguments against one guard's decision:
    a second guard's rules would never decide what they get."""
    server = fastmcp([])
    protect(server, policy_text=POLICY)
    with pytest.raises(TypeError, match="already guarded"):
        protect(server, legacy=True)


def test_a_validation_alias_is_decided_under_the_key_the_schema_constrains() -> None:
    """The wire and the schema say `amt`, the function's keyword is `amount`:
    the values the function gets are decided as `amt`, so a validator's output
    past the schema's maximum is denied, as for a parameter without an alias."""
    ran: list[dict[str, int]] = []
    server = FastMCP("pay", log_level="WARNING")

    @server.tool(annotations=types.ToolAnnotations(readOnlyHint=True))
    def pay(
        amount: Annotated[int, Field(validation_alias="amt", le=1000), AfterValidator(lambda v: v * 100)] = 1,
        plain: Annotated[int, Field(le=1000), AfterValidator(lambda v: v * 100)] = 1,
    ) -> str:
        ran.append({"amount": amount, "plain": plain})
        return "ok"

    protect(server, policy_text="version: 1\ndefaults:\n  operation_type: read_only\n")

    async def steps(client: ClientSession) -> list[types.CallToolResult]:
        return [
            await client.call_tool("pay", {"plain": 500}),
            await client.call_tool("pay", {"amt": 500}),
            await client.call_tool("pay", {"amt": 5}),
        ]

    plain, aliased, small = run(server, steps)
    assert plain.isError and json.loads(plain.content[0].text)["error"]["code"] == "BAD_REQUEST"
    assert aliased.isError and json.loads(aliased.content[0].text)["error"]["code"] == "BAD_REQUEST"
    assert not small.isError
    assert ran == [{"amount": 500, "plain": 1}]


def test_the_lowlevel_server_of_a_guarded_fastmcp_is_refused_too() -> None:
    """Review 30 F2: after protect(mcp), its low-level server's tools/call
    handler is the guard's; a guard put on it would decide the arguments as
    sent while the function gets pydantic's output (a default past a maximum)."""
    server = fastmcp([])
    protect(server, policy_text=POLICY)
    with pytest.raises(TypeError, match="pass the MCPServer / FastMCP"):
        protect(server._mcp_server, policy_text=POLICY)


def test_a_context_callback_that_returns_nothing_refuses_the_call() -> None:
    """Review 30 F4: `token and Context(...)`, or a forgotten return, is a host
    bug, never "no scope check": the engine refuses the call (INVALID_CONTEXT)
    and the list, and the tool does not run."""
    # Review 32 F1: `scopes and Context(...)` is `[]` for a token without scopes.
    for nothing in (None, [], (), ""):
        ran: list[Any] = []
        server = fastmcp(ran)
        protect(server, policy_text=POLICY, context=lambda request_context, nothing=nothing: nothing)

        async def steps(client: ClientSession) -> Any:
            called = await client.call_tool("consultar", {"order_id": "1"})
            try:
                await client.list_tools()
                listed = "listed"
            except Exception as e:  # the SDK carries the guard's error to the client
                listed = str(e)
            return called, listed

        called, listed = run(server, steps)
        code = json.loads(called.content[0].text)["error"]["code"]
        assert called.isError and code == "INVALID_CONTEXT", repr(nothing)
        assert listed != "listed", repr(nothing)
        assert ran == [], repr(nothing)


def test_the_policy_file_is_read_once(tmp_path: Path) -> None:
    """Review 30 F5: rules derived from the server's tools are loaded again
    when a tool changes; the policy file is not read again then (a half-written
    edit would load and drop a hold)."""
    ran: list[Any] = []
    server = fastmcp(ran)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY + "  consultar:\n    hold: not on this route\n", encoding="utf-8")
    protect(server, policy_path=policy)

    async def steps(client: ClientSession) -> Any:
        first = await client.call_tool("consultar", {"order_id": "1"})
        # An edit caught half written, then a tool change that reloads the rules.
        policy.write_text(POLICY, encoding="utf-8")  # the hold not written yet

        @server.tool()
        def novo() -> str:
            return "novo"

        await client.list_tools()  # sees the new tool: the rules are loaded again
        return first, await client.call_tool("consultar", {"order_id": "1"})

    first, again = run(server, steps)
    assert first.isError and again.isError
    assert ran == []


def test_reload_reads_the_policy_file_again(tmp_path: Path) -> None:
    """Review 32 F5: the explicit reload() is how a replaced policy file is
    taken (automatic reloads keep the text read first)."""
    ran: list[Any] = []
    server = fastmcp(ran)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    guard = protect(server, policy_path=policy)

    async def steps(client: ClientSession) -> Any:
        first = await client.call_tool("consultar", {"order_id": "1"})
        policy.write_text(POLICY + "  consultar:\n    hold: not on this route\n", encoding="utf-8")
        guard.reload()
        return first, await client.call_tool("consultar", {"order_id": "1"})

    first, held = run(server, steps)
    assert not first.isError and held.isError
    assert ran == [("consultar", {"order_id": "1"})]


def test_every_page_of_a_lowlevel_servers_list_is_in_the_rules() -> None:
    """Review 30 F7: rules derived from a paginated tools/list hold the tools
    of every page (a tool on page two answered `Unknown tool`)."""
    server: Server[Any, Any] = Server("paged")
    tools = [
        types.Tool(name=f"t{i}", inputSchema={"type": "object"}, annotations=types.ToolAnnotations(readOnlyHint=True))
        for i in range(4)
    ]

    async def list_tools(request: types.ListToolsRequest) -> types.ServerResult:
        params = request.params if request is not None else None  # the SDK asks with None for its cache
        start = int(params.cursor) if params and params.cursor else 0
        more = str(start + 2) if start + 2 < len(tools) else None
        return types.ServerResult(types.ListToolsResult(tools=tools[start : start + 2], nextCursor=more))

    server.request_handlers[types.ListToolsRequest] = list_tools

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        return [types.TextContent(type="text", text=f"{name} ran")]

    protect(server, legacy=True)
    result = run(server, lambda c: c.call_tool("t3", {}))
    assert not result.isError and result.content[0].text == "t3 ran"


def test_a_tool_replaced_during_every_load_is_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 30 F3: the called tool is checked against the rules after every
    load, not once: a tool replaced again while the second load ran is not
    run on the first one's entry; past the bound the call is refused."""
    import mcp_toolgate.middleware as middleware
    from mcp_toolgate import RuleSet

    ran: list[str] = []
    server = FastMCP("ops", log_level="WARNING")

    def register(read_only: bool) -> None:
        if "report" in {t.name for t in server._tool_manager.list_tools()}:
            server.remove_tool("report")

        @server.tool(name="report", annotations=types.ToolAnnotations(readOnlyHint=read_only))
        def report() -> str:
            ran.append("read" if read_only else "wipe")
            return "done"

    register(read_only=True)
    protect(server, legacy=True)
    loads = {"n": 0}
    real_load = RuleSet.load

    def load_while_replacing(*args: Any, **kwargs: Any) -> Any:
        loads["n"] += 1
        rules = real_load(*args, **kwargs)
        if loads["n"] in (1, 2):
            register(read_only=loads["n"] == 1)  # a read-only one, then a destructive one
        return rules

    monkeypatch.setattr(middleware.RuleSet, "load", staticmethod(load_while_replacing))
    result = run(server, lambda c: c.call_tool("report", {}))
    assert result.isError and json.loads(result.content[0].text)["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert ran == []
