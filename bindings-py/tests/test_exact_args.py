"""Security review, issue 11 (3): the engine decides on exactly the arguments
the tool's handler gets.

A real ``ClientSession`` talks to a protected server through the SDK's real
``stdio_server`` transport (its JSON reader, fed lines in-process); the
client's lines are the SDK's own serialization with placeholders replaced by
raw JSON text (``1e400``, ``NaN``, ``Infinity``), which the SDK's reader turns
into ``inf`` / ``nan`` floats.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.server.fastmcp import FastMCP
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from mcp_toolgate import Context, RuleSet
from mcp_toolgate._calljson import MAX_DEPTH, REFUSED, call_json, engine_json
from mcp_toolgate.middleware import protect

CATALOG = json.dumps(
    {
        "formatVersion": 1,
        "tools": [
            {
                "name": "pay",
                "description": "pays",
                "effect": "read",
                "inputSchema": {
                    "type": "object",
                    "properties": {"amount": {"type": ["number", "null"], "maximum": 100}},
                },
            },
            {
                "name": "pay_text",
                "description": "pays",
                "effect": "read",
                "inputSchema": {
                    "type": "object",
                    "properties": {"amount": {"type": ["number", "string"], "maximum": 100}},
                },
            },
            {
                "name": "pay_default",
                "description": "pays",
                "effect": "read",
                "inputSchema": {"type": "object", "properties": {"amount": {"type": "number", "maximum": 100}}},
            },
            {
                "name": "pay_many",
                "description": "pays",
                "effect": "read",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "amounts": {"type": ["array", "string"], "items": {"type": "number", "maximum": 100}}
                    },
                },
            },
            {
                "name": "close_account",
                "description": "closes",
                "effect": "write",
                "inputSchema": {
                    "type": "object",
                    "properties": {"amount": {"type": ["number", "string"], "maximum": 100}},
                },
            },
        ],
    }
)
RULES = RuleSet.load(catalog=CATALOG)
RAW = {
    '"@1e400"': "1e400",
    '"@-1e400"': "-1e400",
    '"@NaN"': "NaN",
    '"@Infinity"': "Infinity",
    '"@-Infinity"': "-Infinity",
}


def engine(text: str) -> str:
    """The engine's decision bytes for the call text."""
    return RULES.evaluate(text).json


def raw(line: str) -> str:
    for placeholder, token in RAW.items():
        line = line.replace(placeholder, token)
    return line


class _Lines:
    """The text-file face stdio_server reads and writes, over in-process streams."""

    def __init__(self, receive: Any = None, send: Any = None) -> None:
        self._receive, self._send = receive, send

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async with self._receive:
            async for line in self._receive:
                yield line

    async def write(self, text: str) -> None:
        await self._send.send(text)

    async def flush(self) -> None:
        pass


async def _with_client(server: Server[Any, Any], steps: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    to_server, server_in = anyio.create_memory_object_stream[str](16)
    server_out, from_server = anyio.create_memory_object_stream[str](16)
    client_read_w, client_read = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    client_write, client_write_r = anyio.create_memory_object_stream[SessionMessage](16)

    async def pump_out() -> None:  # the client's lines, with raw JSON spliced in
        async with client_write_r:
            async for message in client_write_r:
                await to_server.send(raw(message.message.model_dump_json(by_alias=True, exclude_none=True)) + "\n")
        await to_server.aclose()

    async def pump_in() -> None:
        async with client_read_w, from_server:
            async for line in from_server:
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
    return out


def run(server: Any, steps: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    lowlevel = getattr(server, "_mcp_server", server)
    return anyio.run(_with_client, lowlevel, steps)


def _deny(result: types.CallToolResult, text: str) -> dict[str, Any]:
    assert result.isError, result
    assert result.content[0].text == engine(text)  # type: ignore[union-attr]
    decision = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert decision["ok"] is False and decision["error"]["code"] == "BAD_REQUEST"
    return decision  # type: ignore[no-any-return]


def lowlevel(ran: list[Any]) -> Server[Any, Any]:
    server: Server[Any, Any] = Server("raw")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [types.Tool(name=t["name"], inputSchema=t["inputSchema"]) for t in json.loads(CATALOG)["tools"]]

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        ran.append((name, arguments))
        return [types.TextContent(type="text", text="ran")]

    return server


TOKENS = ["@1e400", "@-1e400", "@Infinity", "@-Infinity", "@NaN"]


def test_lowlevel_non_finite_numbers_on_the_wire_reach_engine_and_handler_alike() -> None:
    """The SDK reads 1e400 / Infinity / NaN as floats, then re-validates each
    request from its JSON-mode dump, where they become null: the handler gets
    None, and the engine decided on null (allowed where the schema allows
    null, denied where it does not), never on a value the handler did not get."""
    ran: list[Any] = []
    decided: list[str] = []
    server = lowlevel(ran)
    protect(
        server, legacy=True, catalog_text=CATALOG, context=Context(), on_decision=lambda d, _: decided.append(d.json)
    )

    async def steps(client: ClientSession) -> list[types.CallToolResult]:
        out = [await client.call_tool("pay", {"amount": sent}) for sent in TOKENS]
        out += [await client.call_tool("pay_default", {"amount": sent}) for sent in TOKENS]
        out.append(await client.call_tool("pay", {"amount": 42}))
        return out

    results = run(server, steps)
    assert ran == [("pay", {"amount": None})] * len(TOKENS) + [("pay", {"amount": 42})]
    assert decided[: len(TOKENS)] == [engine('{"name":"pay","arguments":{"amount":null}}')] * len(TOKENS)
    for result in results[len(TOKENS) : 2 * len(TOKENS)]:
        assert result.content[0].text == engine('{"name":"pay_default","arguments":{"amount":null}}')  # type: ignore[union-attr]
    assert not results[-1].isError


STRINGS = [("Infinity", "1e400"), ("-Infinity", "-1e400"), ("1e400", "1e400"), ("NaN", "NaN"), ("inf", "1e400")]


def test_fastmcp_strings_the_handler_gets_as_non_finite_floats_are_denied_by_the_engine() -> None:
    """FastMCP parses a string argument of a float parameter as JSON (Python's
    json reads Infinity, NaN, 1e400) or lets pydantic coerce it ("inf"): the
    handler would get inf / nan. The engine decides on that, and refuses it."""
    ran: list[Any] = []
    mcp = FastMCP("raw", log_level="WARNING")

    @mcp.tool()
    def pay_text(amount: float) -> str:
        ran.append(amount)
        return "paid"

    protect(mcp, legacy=True, catalog_text=CATALOG, context=Context())

    async def steps(client: ClientSession) -> list[types.CallToolResult]:
        out = [await client.call_tool("pay_text", {"amount": sent}) for sent, _ in STRINGS]
        out.append(await client.call_tool("pay_text", {"amount": "7"}))
        return out

    results = run(mcp, steps)
    for result, (_, token) in zip(results, STRINGS, strict=False):
        decision = _deny(result, '{"name":"pay_text","arguments":{"amount":' + token + "}}")
        reason = "expected value" if token == "NaN" else "number out of range"
        assert decision["error"]["details"]["reason"].startswith(reason)
    assert not results[-1].isError
    assert ran == [7.0]


def test_fastmcp_decides_on_the_validated_arguments_the_handler_gets() -> None:
    ran: list[Any] = []
    decided: list[str] = []
    mcp = FastMCP("validated", log_level="WARNING")

    @mcp.tool()
    def pay_text(amount: float) -> str:
        ran.append(("pay_text", amount))
        return "paid"

    @mcp.tool()
    def pay_default(amount: float = 500) -> str:
        ran.append(("pay_default", amount))
        return "paid"

    @mcp.tool()
    def pay_many(amounts: list[float]) -> str:
        ran.append(("pay_many", amounts))
        return "paid"

    @mcp.tool()
    def close_account(amount: float) -> str:
        ran.append(("close_account", amount))
        return "closed"

    protect(
        mcp,
        legacy=True,
        catalog_text=CATALOG,
        context=Context(),
        confirmation="argument",  # close_account runs with the model's confirmed: true (opt-in)
        on_decision=lambda d, _: decided.append(d.code or "ok"),
    )

    async def steps(client: ClientSession) -> list[types.CallToolResult]:
        return [
            await client.call_tool("pay_text", {"amount": "1000"}),  # coerced to 1000.0
            await client.call_tool("pay_default", {}),  # the default, 500
            await client.call_tool("pay_many", {"amounts": "[1000]"}),  # FastMCP parses the string
            await client.call_tool("close_account", {"amount": "500", "confirmed": True}),
            # Controls: the handler gets what was decided on.
            await client.call_tool("pay_text", {"amount": 50}),
            await client.call_tool("pay_default", {"amount": 10}),
            await client.call_tool("pay_text", {"amount": "50"}),
            await client.call_tool("close_account", {"amount": "5", "confirmed": True}),
        ]

    results = run(mcp, steps)
    assert results[0].content[0].text == engine('{"name":"pay_text","arguments":{"amount":1000.0}}')  # type: ignore[union-attr]
    assert results[1].content[0].text == engine('{"name":"pay_default","arguments":{"amount":500}}')  # type: ignore[union-attr]
    assert results[2].content[0].text == engine('{"name":"pay_many","arguments":{"amounts":[1000.0]}}')  # type: ignore[union-attr]
    closing = engine('{"name":"close_account","arguments":{"amount":500.0,"confirmed":true}}')
    assert results[3].content[0].text == closing  # type: ignore[union-attr]
    for r in results[:4]:
        assert r.isError
        assert json.loads(r.content[0].text)["error"]["details"]["schema_errors"][0]["keyword"] == "maximum"  # type: ignore[union-attr]
    for r in results[4:]:
        assert not r.isError, r
    assert ran == [("pay_text", 50.0), ("pay_default", 10.0), ("pay_text", 50.0), ("close_account", 5.0)]
    # Controls: int 50 sent, float 50.0 handed over, so decided again (and allowed).
    assert decided == ["ok", "BAD_REQUEST"] * 4 + ["ok"] * 8


def test_engine_json_never_rewrites() -> None:
    data = json.loads(
        '{"a":[1,-2.5,1e21,"x\\u2028",true,null,{}],"b":{"c":[]},"n":-0.0,"big":123456789012345678901234567890}'
    )
    assert engine_json(data) == json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    assert call_json("t", {}) == '{"name":"t","arguments":{}}'
    cases: list[tuple[Any, str]] = [
        (math.inf, "1e400"),
        (-math.inf, "-1e400"),
        (math.nan, "NaN"),
        (-0.0, "-0.0"),
        ({1: "a"}, "{" + REFUSED),
        ({"a": b"x"}, '{"a":' + REFUSED + "}"),
        ({1, 2}, REFUSED),
        (object(), REFUSED),
        ((1, 2), "[1,2]"),
    ]
    for value, text in cases:
        assert engine_json(value) == text, value
    deep: Any = []
    for _ in range(10000):
        deep = [deep]
    assert engine_json(deep) == "[" * MAX_DEPTH + REFUSED + "]" * MAX_DEPTH
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    assert REFUSED in engine_json(cyclic)


@pytest.mark.parametrize("amount", [math.inf, -math.inf, math.nan])
def test_evaluate_with_a_dict_decides_on_the_values_given(amount: float) -> None:
    decision = RULES.evaluate("pay", {"amount": amount})
    assert decision.code == "BAD_REQUEST"
    assert decision.json == engine(call_json("pay", {"amount": amount}))
    assert RULES.evaluate({"name": "pay", "arguments": {"amount": amount}}).json == decision.json


def test_a_nested_model_is_written_under_the_keys_its_json_schema_constrains() -> None:
    """The re-decision writes a handler's model under the names the catalog's
    JSON Schema (validation mode, by alias) gives its fields: a field read from
    `amt` but written as `amount` would be decided on a key the schema does
    not constrain (review 8)."""
    from pydantic import AliasChoices, AliasPath, BaseModel, Field

    class ValidationAlias(BaseModel):
        amount: int = Field(validation_alias="amt")

    class SerializationAlias(BaseModel):
        amount: int = Field(alias="am", serialization_alias="out")

    class Choices(BaseModel):
        amount: int = Field(validation_alias=AliasChoices(AliasPath("a", 0), "y"))

    class Path(BaseModel):
        amount: int = Field(alias="al", validation_alias=AliasPath("a", 0))

    for model in (ValidationAlias(amt=1), SerializationAlias(am=2), Choices(y=3), Path(a=[4])):
        written = json.loads(engine_json(model))
        assert list(written) == list(type(model).model_json_schema(by_alias=True)["properties"]), model
        assert list(written.values()) == [model.amount]  # type: ignore[attr-defined]
