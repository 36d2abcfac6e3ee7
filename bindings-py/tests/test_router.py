"""SPEC §6 through the agent-side router, against the real retail demo server
over stdio (the official mcp client): the return's handler runs exactly once,
only after confirmation, with the same arguments."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from conftest import BINDINGS, EXAMPLES

sys.path.insert(0, str(BINDINGS / "examples" / "retail"))
import conversation
from mcp import ClientSession, types
from mcp.client.stdio import stdio_client
from mcp.server.lowlevel import Server
from mcp.shared.memory import create_connected_server_and_client_session

from mcp_toolgate import RuleSet
from mcp_toolgate.router import McpToolRouter

CATALOG = EXAMPLES / "retail" / "tools.yaml"
POLICY = EXAMPLES / "retail" / "tool_policies.yaml"
TURN1, TURN2 = conversation.MESSAGES


def _runs(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


async def _two_turns(log: Path, *, env: dict[str, str], protect: bool, second: str = TURN2) -> dict[str, Any]:
    params = conversation.server_params(protect=protect, env={"RETAIL_DEMO_LOG": str(log), **env})
    seen: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        router = McpToolRouter.from_env(CATALOG, session, env=env, allowed_tools=conversation.ROUTE["mcp_tools"])
        calls, confirmed = conversation.keyword_agent(TURN1, None)
        first = await router.run_turn(None, calls, user_confirmed=confirmed)
        seen["first"] = first
        seen["runs_after_first"] = _runs(log)
        stored = json.loads(json.dumps(first.state))  # the app persists a plain dict
        calls, confirmed = conversation.keyword_agent(second, stored)
        seen["second_input"] = (calls, confirmed)
        seen["second"] = await router.run_turn(stored, calls, user_confirmed=confirmed)
        seen["runs_after_second"] = _runs(log)
        if protect:
            # The protected server refuses an unconfirmed return on its own.
            direct = await session.call_tool(
                "solicitar_devolucao", {"order_id": "123", "reason": "me arrependi da compra"}
            )
            seen["direct"] = direct
            seen["runs_after_direct"] = _runs(log)
    return seen


def _check_confirmed_flow(seen: dict[str, Any], policy_source: str) -> None:
    first, second = seen["first"], seen["second"]
    assert first.transaction_status == "AWAITING_CONFIRMATION"
    assert first.state["pending_tool_call"] == {
        "name": "solicitar_devolucao",
        "arguments": {"order_id": "123", "reason": "me arrependi da compra"},
    }
    assert first.state["confirmation_required"] is True and first.state["confirmation_received"] is False
    assert first.state["available_mcp_tools"] == ["consultar_pedido", "solicitar_devolucao"]
    assert first.state["tool_policy_result"]["metadata"]["policy_source"] == policy_source
    # The read-only lookup ran at once; the return did not.
    assert [(r.call.name, r.ok) for r in first.executed] == [("consultar_pedido", True)]
    assert first.executed[0].structured == {"order_id": "123", "status": "ENTREGUE"}
    assert seen["runs_after_first"] == []

    assert seen["second_input"] == ([], True)
    assert second.transaction_status == "EXECUTING"
    assert second.state["pending_tool_call"] is None
    assert second.state["confirmation_received"] is True
    assert second.state["selected_tool_call"] == first.state["pending_tool_call"]
    assert [r.call.name for r in second.executed] == ["solicitar_devolucao"]
    assert second.executed[0].ok, second.executed[0]
    assert second.executed[0].structured["status"] == "DEVOLUCAO_ABERTA"
    # Exactly one run of the handler, with the pending call's arguments + confirmed.
    assert seen["runs_after_second"] == [{"order_id": "123", "reason": "me arrependi da compra", "confirmed": True}]


def test_return_runs_once_and_only_after_confirmation(tmp_path: Path) -> None:
    seen = asyncio.run(_two_turns(tmp_path / "runs.jsonl", env={"TOOL_POLICIES_PATH": str(POLICY)}, protect=False))
    _check_confirmed_flow(seen, "tool_policies")


def test_legacy_rules_without_tool_policies_path(tmp_path: Path) -> None:
    seen = asyncio.run(_two_turns(tmp_path / "runs.jsonl", env={"TOOL_POLICIES_PATH": ""}, protect=False))
    _check_confirmed_flow(seen, "tools_yaml")


def test_protected_server_agrees_and_refuses_unconfirmed_calls(tmp_path: Path) -> None:
    seen = asyncio.run(_two_turns(tmp_path / "runs.jsonl", env={"TOOL_POLICIES_PATH": str(POLICY)}, protect=True))
    _check_confirmed_flow(seen, "tool_policies")
    direct = seen["direct"]
    assert direct.isError and json.loads(direct.content[0].text)["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert len(seen["runs_after_direct"]) == 1


def test_refusal_cancels_and_nothing_runs(tmp_path: Path) -> None:
    seen = asyncio.run(
        _two_turns(
            tmp_path / "runs.jsonl", env={"TOOL_POLICIES_PATH": str(POLICY)}, protect=False, second="Não, cancela."
        )
    )
    assert seen["second"].transaction_status == "CANCELLED"
    assert seen["second"].executed == ()
    assert seen["runs_after_second"] == []


class FakeSession:
    """A stand-in session for routing checks that need no server."""

    def __init__(self, tools: list[str], fail: bool = False) -> None:
        self.tools = tools
        self.fail = fail
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def list_tools(self) -> list[dict[str, str]]:
        return [{"name": t} for t in self.tools]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        self.calls.append((name, dict(arguments or {})))
        if self.fail:
            raise ConnectionError("server down")
        return {"ran": name}


def test_router_routes_by_tool_and_survives_a_down_server() -> None:
    rules = RuleSet.from_files(CATALOG, POLICY)
    down = FakeSession(["consultar_pedido"], fail=True)
    other = FakeSession(["solicitar_devolucao"])
    router = McpToolRouter(rules, [down, other])
    calls = [{"name": "consultar_pedido", "arguments": {"order_id": "1"}}]
    outcome = asyncio.run(router.run_turn(None, calls))
    assert outcome.transaction_status == "NONE"
    assert [(r.call.name, r.ok, type(r.error).__name__) for r in outcome.executed] == [
        ("consultar_pedido", False, "ConnectionError")
    ]
    assert other.calls == []


def test_allowlist_is_not_a_list_of_calls() -> None:
    rules = RuleSet.from_files(CATALOG, POLICY)
    session = FakeSession(["consultar_pedido", "solicitar_devolucao"])
    router = McpToolRouter(rules, session, allowed_tools=["consultar_pedido"])
    outcome = asyncio.run(router.run_turn(None, []))
    assert outcome.executed == () and session.calls == []
    assert outcome.state["available_mcp_tools"] == ["consultar_pedido"]
    blocked = asyncio.run(
        router.run_turn(None, [{"name": "solicitar_devolucao", "arguments": {"order_id": "1", "reason": "r"}}])
    )
    assert blocked.state["results"][0]["decision"]["error"]["code"] == "NOT_FOUND"
    assert session.calls == []


class ListingFails(FakeSession):
    async def list_tools(self) -> list[dict[str, str]]:
        raise ConnectionError("server down")


def test_a_tool_two_servers_offer_runs_on_neither_unless_mapped() -> None:
    rules = RuleSet.from_files(CATALOG, POLICY)
    calls = [{"name": "consultar_pedido", "arguments": {"order_id": "1"}}]
    reviewed, shadow = FakeSession(["consultar_pedido"]), FakeSession(["consultar_pedido"])
    outcome = asyncio.run(McpToolRouter(rules, [shadow, reviewed]).run_turn(None, calls))
    assert [(r.call.name, r.ok, type(r.error).__name__) for r in outcome.executed] == [
        ("consultar_pedido", False, "LookupError")
    ]
    assert "more than one" in str(outcome.executed[0].error)
    assert shadow.calls == [] and reviewed.calls == []
    mapped = asyncio.run(McpToolRouter(rules, {"consultar_pedido": reviewed}).run_turn(None, calls))
    assert [r.ok for r in mapped.executed] == [True]
    assert reviewed.calls == [("consultar_pedido", {"order_id": "1"})] and shadow.calls == []


def test_servers_are_listed_again_for_each_turn_that_runs_calls() -> None:
    # A name a second server starts to offer later runs on neither; a tool a
    # server adds later is found.
    rules = RuleSet.from_files(CATALOG, POLICY)
    calls = [{"name": "consultar_pedido", "arguments": {"order_id": "1"}}]
    reviewed, later = FakeSession(["consultar_pedido"]), FakeSession([])
    router = McpToolRouter(rules, [reviewed, later])
    assert [r.ok for r in asyncio.run(router.run_turn(None, calls)).executed] == [True]
    later.tools.append("consultar_pedido")
    outcome = asyncio.run(router.run_turn(None, calls))
    assert [(r.ok, type(r.error).__name__) for r in outcome.executed] == [(False, "LookupError")]
    assert "more than one" in str(outcome.executed[0].error) and later.calls == []
    added = FakeSession([])
    router = McpToolRouter(rules, [added])
    assert [r.ok for r in asyncio.run(router.run_turn(None, calls)).executed] == [False]
    added.tools.append("consultar_pedido")
    assert [r.ok for r in asyncio.run(router.run_turn(None, calls)).executed] == [True]


def test_a_server_that_cannot_list_runs_nothing_on_a_guess_but_a_map_still_routes() -> None:
    rules = RuleSet.from_files(CATALOG, POLICY)
    up, down = FakeSession(["consultar_pedido"]), ListingFails(["consultar_pedido"])
    calls = [{"name": "consultar_pedido", "arguments": {"order_id": "1"}}]
    # The server that is down might offer the same name: not run on the other.
    outcome = asyncio.run(McpToolRouter(rules, [down, up]).run_turn(None, calls))
    assert [(r.ok, type(r.error).__name__) for r in outcome.executed] == [(False, "LookupError")]
    assert "could not list" in str(outcome.executed[0].error) and up.calls == []
    mapped = asyncio.run(
        McpToolRouter(rules, {"consultar_pedido": up, "solicitar_devolucao": down}).run_turn(None, calls)
    )
    assert [r.ok for r in mapped.executed] == [True] and up.calls == [("consultar_pedido", {"order_id": "1"})]


def test_every_page_of_a_server_s_tools_is_read() -> None:
    """A real SDK server that lists one tool per page (its cursor): the
    router finds the tool on the last page and runs it there."""
    names = ["solicitar_devolucao", "cancelar_tudo", "consultar_pedido"]
    server: Server[Any, Any] = Server("paged")
    ran: list[tuple[str, dict[str, Any]]] = []

    @server.list_tools()
    async def list_tools(request: types.ListToolsRequest) -> types.ListToolsResult:
        page = int(request.params.cursor) if request.params and request.params.cursor else 0
        tool = types.Tool(name=names[page], inputSchema={"type": "object"})
        more = str(page + 1) if page + 1 < len(names) else None
        return types.ListToolsResult(tools=[tool], nextCursor=more)

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        ran.append((name, arguments))
        return [types.TextContent(type="text", text="ok")]

    async def turn() -> Any:
        async with create_connected_server_and_client_session(server) as session:
            calls = [{"name": "consultar_pedido", "arguments": {"order_id": "1"}}]
            return await McpToolRouter(RuleSet.from_files(CATALOG, POLICY), [session]).run_turn(None, calls)

    outcome = asyncio.run(turn())
    assert [r.ok for r in outcome.executed] == [True], outcome.executed
    assert ran == [("consultar_pedido", {"order_id": "1"})]


def test_a_planned_turn_is_saved_before_its_calls_run() -> None:
    rules = RuleSet.from_files(CATALOG, POLICY)
    session = FakeSession(["consultar_pedido"])
    router = McpToolRouter(rules, session)
    turn = router.plan(None, [{"name": "consultar_pedido", "arguments": {"order_id": "1"}}])
    assert session.calls == [] and [c.name for c in turn.execute] == ["consultar_pedido"]
    outcome = asyncio.run(router.execute(turn))
    assert outcome.turn is turn and session.calls == [("consultar_pedido", {"order_id": "1"})]
