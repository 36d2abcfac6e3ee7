"""Quick start: an agent's tool calls through toolgate's router, one turn at a time.

    pip install mcp-toolgate "mcp==2.3.0"
    python agent.py

Connects to the server quick start (../python-server/server.py) over stdio. In
the first turn the model proposes a read and a write: the read runs, the write
waits for the person. In the next turn the person says yes and the write runs.
(No LLM here: the proposed calls are written out.)
"""

import asyncio
import json
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_toolgate import RuleSet
from mcp_toolgate.router import McpToolRouter, TurnOutcome, catalog_from_tools

HERE = Path(__file__).resolve().parent
SERVER = StdioServerParameters(command=sys.executable, args=[str(HERE.parent / "python-server" / "server.py")])


def show(outcome: TurnOutcome) -> None:
    for run in outcome.executed:
        print(f"  ran {run.call.name} {json.dumps(dict(run.call.arguments))} -> {json.dumps(run.structured)}")
    state = outcome.state
    if state["transaction_status"] == "AWAITING_CONFIRMATION":
        pending, decision = state["pending_tool_call"], state["tool_policy_result"]["error"]
        print(f"  waiting: {pending['name']} {json.dumps(pending['arguments'])}")
        print(f"    {decision['code']}: {decision['message']}")
    print(f"  transaction_status: {state['transaction_status']}")


async def main() -> None:
    async with stdio_client(SERVER) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        catalog = catalog_from_tools((await session.list_tools()).tools)
        rules = RuleSet.load(catalog=catalog, policy=(HERE / "policy.yaml").read_text())
        router = McpToolRouter(rules, session, allowed_tools=["get_order", "refund_order"])

        print('person: "Please refund order A-1."')
        proposed = [
            {"name": "get_order", "arguments": {"order_id": "A-1"}},
            {"name": "refund_order", "arguments": {"order_id": "A-1"}},
        ]
        print(f"model proposes: {', '.join(call['name'] for call in proposed)}")
        outcome = await router.run_turn(None, proposed)
        show(outcome)
        state = outcome.state  # keep it server-side, never in the model's context

        print('\nperson: "Yes, refund it."')
        # The yes names the call the person was shown, so it runs no other.
        outcome = await router.run_turn(state, [], user_confirmed=state["pending_digest"])
        show(outcome)


if __name__ == "__main__":
    asyncio.run(main())
