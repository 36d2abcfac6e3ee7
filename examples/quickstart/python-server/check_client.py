"""The server quick start's test client (run by check.sh, in a copy of this folder).

Spawns `python server.py` over stdio with the mcp SDK's client and checks what
toolgate lets through: both tools listed, the read runs, the unconfirmed refund
is refused with CONFIRMATION_REQUIRED before its handler runs, an unknown tool
is refused, and the confirmed refund runs.
"""

import json
import sys
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HERE = Path(__file__).resolve().parent
REFUNDS = HERE / "refunds.log"  # the refund handler appends here (server.py runs in this folder)


def text(result) -> str:
    return " ".join("".join(getattr(block, "text", "") for block in result.content).split())


FAILED: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILED.append(what)


async def main() -> None:
    REFUNDS.unlink(missing_ok=True)
    server = StdioServerParameters(command=sys.executable, args=["server.py"], cwd=str(HERE))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        tools = {t.name: t for t in (await session.list_tools()).tools}
        check(sorted(tools) == ["get_order", "refund_order"], f"tools/list shows both tools: {sorted(tools)}")
        check(tools["get_order"].annotations.read_only_hint is True, "get_order is read-only")
        check(tools["refund_order"].annotations.read_only_hint is False, "refund_order writes")

        got = await session.call_tool("get_order", {"order_id": "A-1"})
        check(not got.is_error and "DELIVERED" in text(got), f"get_order runs: {text(got)}")

        refused = await session.call_tool("refund_order", {"order_id": "A-1"})
        decision = json.loads(text(refused)) if refused.is_error else {}
        check(
            decision.get("error", {}).get("code") == "CONFIRMATION_REQUIRED",
            f"unconfirmed refund refused: {text(refused)}",
        )
        check(not REFUNDS.exists(), "the refund handler did not run")

        unknown = await session.call_tool("delete_everything", {})
        check(unknown.is_error and "Unknown tool" in text(unknown), f"unknown tool refused: {text(unknown)}")

        done = await session.call_tool("refund_order", {"order_id": "A-1", "confirmed": True})
        check(not done.is_error and "REFUNDED" in text(done), f"confirmed refund runs: {text(done)}")
        ran = REFUNDS.read_text() if REFUNDS.exists() else ""
        check(ran == "refunded A-1\n", "the refund handler ran once")


if __name__ == "__main__":
    anyio.run(main)
    if FAILED:
        sys.exit(f"quickstart python-server: FAIL ({len(FAILED)} checks)")
    print("quickstart python-server: ok")
