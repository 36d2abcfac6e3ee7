"""The seed's retail MCP server (FastMCP, stdio): an order lookup and a return.

    python examples/retail/server.py [--protect]

``consultar_pedido``: order ``123`` (or ``PED-ENTREGUE``) is ``ENTREGUE``.
``solicitar_devolucao``: takes ``order_id`` and ``reason``; each run is appended
to ``$RETAIL_DEMO_LOG`` (JSON lines) so a test can count the handler's runs.
``--protect`` puts toolgate's middleware in front of the tools too (defense in
depth: the server itself refuses an unconfirmed return), with the policy in
``$TOOL_POLICIES_PATH`` when set, and ``confirmation="argument"``: its caller,
the router, sends ``confirmed: true`` only after the person confirmed.
"""

from __future__ import annotations

import json
import os
import sys

from mcp.server.fastmcp import FastMCP

ORDERS = {
    "123": "ENTREGUE",
    "PED-ENTREGUE": "ENTREGUE",
    "456": "EM_TRANSPORTE",
    "PED-TRANSPORTE": "EM_TRANSPORTE",
}

mcp = FastMCP("retail", log_level="WARNING")


@mcp.tool()
def consultar_pedido(order_id: str) -> dict[str, str]:
    """Consulta o status de um pedido (ex. 123 ou PED-ENTREGUE)."""
    return {"order_id": order_id, "status": ORDERS.get(order_id, "NAO_ENCONTRADO")}


@mcp.tool()
def solicitar_devolucao(order_id: str, reason: str, confirmed: bool = False) -> dict[str, str]:
    """Abre a devolução de um pedido entregue."""
    log = os.environ.get("RETAIL_DEMO_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"order_id": order_id, "reason": reason, "confirmed": confirmed}) + "\n")
    if ORDERS.get(order_id) != "ENTREGUE":
        return {"order_id": order_id, "status": "RECUSADA", "detail": "pedido ainda não entregue"}
    return {"order_id": order_id, "status": "DEVOLUCAO_ABERTA", "return_id": f"DEV-{order_id}", "reason": reason}


if __name__ == "__main__":
    if "--protect" in sys.argv[1:]:
        from mcp_toolgate.middleware import protect

        policy = os.environ.get("TOOL_POLICIES_PATH")
        # confirmation="argument" (an explicit opt-in; the default is "none"):
        # the caller here is the agent-side router (conversation.py), which
        # sends `confirmed: true` only on the turn the person confirmed.
        protect(mcp, **({"policy_path": policy} if policy else {"legacy": True}), confirmation="argument")
    mcp.run("stdio")
