"""The seed's two-turn retail conversation, through toolgate's router.

    python examples/retail/conversation.py

A tiny keyword "agent" (no LLM) turns each message into proposed calls or a
confirmation; the router runs the turn against the real retail MCP server
(``server.py``, spawned over stdio with the official ``mcp`` client) and the
state after each turn is printed. Catalog: ``examples/retail/tools.yaml``;
policy: ``$TOOL_POLICIES_PATH`` when set (this script defaults it to
``examples/retail/tool_policies.yaml``; set it empty for legacy rules).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mcp_toolgate import RuleSet
from mcp_toolgate.router import McpToolRouter, TurnOutcome

HERE = Path(__file__).resolve().parent
REPO_EXAMPLE = HERE.parent.parent.parent / "examples" / "retail"
ROUTE = {"name": "retail", "mcp_tools": ["consultar_pedido", "solicitar_devolucao"]}
MESSAGES = [
    "Quero devolver o pedido 123 porque me arrependi da compra.",
    "Sim, confirmo a devolução.",
]


def keyword_agent(message: str, state: dict[str, Any] | None) -> tuple[list[dict[str, Any]], bool | None]:
    """Maps a message to (proposed calls, user_confirmed). Deterministic."""
    text = message.lower()
    if state and state.get("transaction_status") == "AWAITING_CONFIRMATION":
        if re.search(r"\b(sim|confirmo|pode)\b", text):
            return [], True
        if re.search(r"\b(não|nao|cancela)\b", text):
            return [], False
    calls: list[dict[str, Any]] = []
    order = re.search(r"pedido\s+([A-Za-z0-9-]+)", message)
    if order:
        calls.append({"name": "consultar_pedido", "arguments": {"order_id": order.group(1)}})
        if "devolv" in text or "devolu" in text:
            reason = re.search(r"porque\s+(.+?)[.!]?$", message.strip())
            calls.append(
                {
                    "name": "solicitar_devolucao",
                    "arguments": {"order_id": order.group(1), "reason": reason.group(1) if reason else "não informado"},
                }
            )
    return calls, None


def server_params(protect: bool = False, env: dict[str, str] | None = None) -> StdioServerParameters:
    args = [str(HERE / "server.py")] + (["--protect"] if protect else [])
    return StdioServerParameters(command=sys.executable, args=args, env={**os.environ, **(env or {})})


async def converse(
    messages: list[str],
    *,
    catalog: Path = REPO_EXAMPLE / "tools.yaml",
    rules: RuleSet | None = None,
    params: StdioServerParameters | None = None,
    show: bool = True,
) -> list[TurnOutcome]:
    outcomes: list[TurnOutcome] = []
    async with stdio_client(params or server_params()) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        if rules is None:
            router = McpToolRouter.from_env(catalog, session, allowed_tools=ROUTE["mcp_tools"])
        else:
            router = McpToolRouter(rules, session, allowed_tools=ROUTE["mcp_tools"])
        state: dict[str, Any] | None = None  # what the app persists between turns
        for message in messages:
            calls, confirmed = keyword_agent(message, state)
            outcome = await router.run_turn(state, calls, user_confirmed=confirmed)
            state = outcome.state
            outcomes.append(outcome)
            if show:
                print(f"\n> {message}")
                print(f"  proposed: {json.dumps(calls, ensure_ascii=False)}  user_confirmed: {json.dumps(confirmed)}")
                for run in outcome.executed:
                    print(f"  ran {run.call.name} {json.dumps(dict(run.call.arguments), ensure_ascii=False)}")
                    print(f"    -> {json.dumps(run.structured, ensure_ascii=False)}")
                print("  state:")
                for key, value in state.items():
                    print(f"    {key}: {json.dumps(value, ensure_ascii=False)}")
    return outcomes


def main() -> None:
    os.environ.setdefault("TOOL_POLICIES_PATH", str(REPO_EXAMPLE / "tool_policies.yaml"))
    print(f"catalog: {REPO_EXAMPLE / 'tools.yaml'}")
    print(f"TOOL_POLICIES_PATH: {os.environ['TOOL_POLICIES_PATH'] or '(unset: legacy rules)'}")
    asyncio.run(converse(MESSAGES))


if __name__ == "__main__":
    main()
