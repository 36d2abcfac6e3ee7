"""Added latency per tools/call through toolgate proxy vs direct, same server
(@modelcontextprotocol/server-filesystem, read_text_file on a small file),
same client (the official Python SDK), over stdio.

Usage: bench.py PROXY_BIN NODE_BIN SERVER_JS [CALLS]
"""

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

PROXY, NODE, SERVER = sys.argv[1], sys.argv[2], sys.argv[3]
CALLS = int(sys.argv[4]) if len(sys.argv) > 4 else 300


async def measure(params, path):
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            await s.list_tools()
            for _ in range(20):  # warm-up
                await s.call_tool("read_text_file", {"path": str(path)})
            times = []
            for _ in range(CALLS):
                t = time.perf_counter()
                r = await s.call_tool("read_text_file", {"path": str(path)})
                times.append(time.perf_counter() - t)
                assert not r.isError, r
            return times


async def main():
    root = Path(tempfile.mkdtemp(prefix="toolgate-proxy-bench-"))
    path = root / "hello.txt"
    path.write_text("hello\n")
    direct = StdioServerParameters(command=NODE, args=[SERVER, str(root)])
    proxied = StdioServerParameters(command=PROXY, args=["--", NODE, SERVER, str(root)])
    d = await measure(direct, path)
    p = await measure(proxied, path)
    for name, t in (("direct", d), ("proxy", p)):
        print(
            f"{name:6} median {statistics.median(t) * 1e3:.3f} ms  mean {statistics.mean(t) * 1e3:.3f} ms  (n={len(t)})"
        )
    print(f"added per tools/call: median {(statistics.median(p) - statistics.median(d)) * 1e3:.3f} ms")


asyncio.run(main())
