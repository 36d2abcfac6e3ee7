"""Quick start: an MCP server (mcp 2.x SDK, stdio) with toolgate in front of its tools.

    pip install mcp-toolgate "mcp==2.3.0"
    python server.py

`get_order` reads; `refund_order` writes and, per policy.yaml, runs only when the
call carries `confirmed: true` (confirmation="argument" below: an explicit opt-in
that trusts the model's field). Anything else is refused before a handler runs.
"""

from pathlib import Path

from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from mcp_toolgate.middleware import protect

ORDERS = {"A-1": {"order_id": "A-1", "status": "DELIVERED", "total": 42.0}}

mcp = MCPServer("shop", log_level="WARNING")


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def get_order(order_id: str) -> dict:
    """Look up an order by id."""
    return ORDERS.get(order_id, {"order_id": order_id, "status": "NOT_FOUND"})


@mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def refund_order(order_id: str, confirmed: bool = False) -> dict:
    """Refund an order in full. Ask the person first, then call again with confirmed: true."""
    with open("refunds.log", "a", encoding="utf-8") as log:  # stands in for your payment provider
        log.write(f"refunded {order_id}\n")
    return {"order_id": order_id, "status": "REFUNDED"}


# After the tools are registered: tools/list and tools/call now go through toolgate,
# which checks `confirmed` before refund_order's handler can run.
# confirmation="argument" is an explicit opt-in (the default, "none", never lets
# the model's own `confirmed: true` count): this quick start takes the model's
# word that the person said yes. Keep it only where the caller keeps turn state
# and sets `confirmed` after asking the person, or the client cannot be asked;
# otherwise leave the default and confirm through the host (docs/confirmation.md).
protect(mcp, policy_path=Path(__file__).with_name("policy.yaml"), confirmation="argument")

if __name__ == "__main__":
    mcp.run("stdio")
