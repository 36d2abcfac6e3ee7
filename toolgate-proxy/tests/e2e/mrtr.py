"""MCP 2026-07-28 through `toolgate proxy --listen`, with the official Python
SDK (`mcp` 2.3) as the client and the real filesystem server behind: a
write confirmed through `input_required` with a sealed `requestState`,
retried on another replica, never twice, never with another key, another
call, a tampered or an expired state; the one-time ledger on a real Redis.

Usage: mrtr.py PROXY_BIN NODE_BIN SERVER_JS REDIS_SERVER_BIN
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from mcp import Client
from mcp.types import ElicitResult, InputRequiredResult

from e2e_support import blocked_code, check, failures, free_port, wait_port

warnings.simplefilter("ignore")
PROXY, NODE, SERVER, REDIS = sys.argv[1:5]
SECRET = "a-shared-state-secret-for-the-replicas-0123456789"
OTHER_SECRET = "another-deployment-state-secret-abcdefghijklmnop"


class Replica:
    def __init__(self, name, root, audit, *flags, secret=SECRET, store=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        env = dict(os.environ, TOOLGATE_STATE_SECRET=secret)
        args = [PROXY, "--listen", f"127.0.0.1:{self.port}", "--audit", str(audit), *flags]
        if store:
            args += ["--store", store]
        args += ["--", NODE, SERVER, str(root)]
        self.proc = subprocess.Popen(
            args, env=env, stdout=subprocess.DEVNULL, stderr=open(root.parent / f"{name}.log", "w")
        )
        wait_port(self.port)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def accept(_ctx, params):
    accept.asked.append(params.message)
    return ElicitResult(action="accept", content={})


async def decline(_ctx, params):
    decline.asked.append(params.message)
    return ElicitResult(action="decline")


accept.asked = []
decline.asked = []
ACCEPT = {"toolgate_confirm": ElicitResult(action="accept", content={})}


async def first_leg(url, args):
    async with Client(url, mode="2026-07-28", elicitation_callback=accept) as c:
        return await c.session.call_tool("write_file", args, allow_input_required=True)


async def retry(url, args, state, responses=ACCEPT):
    async with Client(url, mode="2026-07-28", elicitation_callback=accept) as c:
        return await c.session.call_tool(
            "write_file", args, input_responses=responses, request_state=state, allow_input_required=True
        )


async def main():
    tmp = Path(tempfile.mkdtemp(prefix="toolgate-mrtr-"))
    root = tmp / "root"
    root.mkdir()
    audit = tmp / "audit.jsonl"
    redis_port = free_port()
    redis = subprocess.Popen(
        [REDIS, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_port(redis_port)
    store = f"redis://127.0.0.1:{redis_port}"
    a = Replica("a", root, audit, store=store)
    b = Replica("b", root, audit, store=store)
    other = Replica("other", root, audit, secret=OTHER_SECRET, store=store)
    short = Replica("short", root, audit, "--confirm-ttl", "1", store=store)
    replicas = [a, b, other, short]
    try:
        # 1. A 2026-07-28 client: tools listed, a write confirmed by the person.
        async with Client(a.url, mode="2026-07-28", elicitation_callback=accept) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            check(
                "2026-07-28: tools/list through the gateway", "write_file" in names and "read_text_file" in names, names
            )
            target = root / "accepted.txt"
            r = await c.call_tool("write_file", {"path": str(target), "content": "exact\u202econtent\n"})
            check("2026-07-28: accept -> the write ran", not r.is_error, r)
            check(
                "...and the file has exactly the content",
                target.exists() and target.read_text() == "exact\u202econtent\n",
            )
            check(
                "...the person was shown the tool and the exact arguments, U+202E escaped",
                bool(accept.asked)
                and "write_file" in accept.asked[-1]
                and "\\u{202E}" in accept.asked[-1]
                and "\u202e" not in accept.asked[-1],
                accept.asked,
            )
        async with Client(a.url, mode="2026-07-28", elicitation_callback=decline) as c:
            target = root / "declined.txt"
            r = await c.call_tool("write_file", {"path": str(target), "content": "no\n"})
            check(
                "2026-07-28: decline -> CONFIRMATION_REQUIRED, nothing run",
                blocked_code(r) == "CONFIRMATION_REQUIRED" and decline.asked,
                r,
            )
            check("...no file", not target.exists())
        # 2. auto mode discovers 2026-07-28; handshake-era clients still work.
        async with Client(a.url, mode="auto", elicitation_callback=accept) as c:
            check(
                "auto: negotiates 2026-07-28 via server/discover",
                str(c.protocol_version) == "2026-07-28",
                c.protocol_version,
            )
            target = root / "auto.txt"
            r = await c.call_tool("write_file", {"path": str(target), "content": "auto\n"})
            check("auto: accepted write ran", not r.is_error and target.read_text() == "auto\n", r)
        async with Client(a.url, mode="legacy", elicitation_callback=accept) as c:
            check(
                "legacy client on the same endpoint: a 2025 handshake",
                str(c.protocol_version).startswith("2025"),
                c.protocol_version,
            )
            target = root / "legacy.txt"
            r = await c.call_tool("write_file", {"path": str(target), "content": "legacy\n"})
            check("legacy: elicited write ran", not r.is_error and target.read_text() == "legacy\n", r)

        # 3. The manual legs, across replicas.
        target = root / "sealed.txt"
        args = {"path": str(target), "content": "sealed\n", "confirmed": True}
        r1 = await first_leg(a.url, args)
        check("leg 1: input_required even with the model's confirmed: true", isinstance(r1, InputRequiredResult), r1)
        state = r1.request_state
        check("leg 1: a sealed, opaque requestState", state.startswith("tg1.") and "write_file" not in state, state)
        (req,) = r1.input_requests.values()
        check(
            "leg 1: one form elicitation naming the path",
            req.params.mode == "form" and json.dumps(str(target))[1:-1] in req.params.message,
            req,
        )
        check("leg 1: nothing written yet", not target.exists())
        plain = {"path": str(target), "content": "sealed\n"}
        for label, replica, call_args in [
            ("another key", other, plain),
            ("another path", a, {"path": str(root / "elsewhere.txt"), "content": "sealed\n"}),
            ("other content", a, {"path": str(target), "content": "sealed!\n"}),
        ]:
            r = await retry(replica.url, call_args, state)
            check(f"retry with {label}: CONFIRMATION_INVALID", blocked_code(r) == "CONFIRMATION_INVALID", r)
        r = await retry(a.url, plain, state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1])
        check("retry with a tampered state: CONFIRMATION_INVALID", blocked_code(r) == "CONFIRMATION_INVALID", r)
        r = await retry(a.url, plain, state, responses={})
        check("retry without the person's answer: CONFIRMATION_INVALID", blocked_code(r) == "CONFIRMATION_INVALID", r)
        check("...none of them wrote anything", not target.exists() and not (root / "elsewhere.txt").exists())
        r = await retry(b.url, plain, state)
        check(
            "retry on the second replica (same key): the write runs",
            not r.is_error and target.read_text() == "sealed\n",
            r,
        )
        target.unlink()
        for label, replica in [("the same replica", b), ("the first replica", a)]:
            r = await retry(replica.url, plain, state)
            check(f"replay on {label}: CONFIRMATION_INVALID", blocked_code(r) == "CONFIRMATION_INVALID", r)
        check("...the replays wrote nothing", not target.exists())

        # 3b. A decline is final: the same state sent again with an accept does not run.
        declined = {"path": str(root / "declined-sealed.txt"), "content": "no\n"}
        r1 = await first_leg(a.url, declined)
        r = await retry(
            a.url, declined, r1.request_state, responses={"toolgate_confirm": ElicitResult(action="decline")}
        )
        check("sealed decline: CONFIRMATION_REQUIRED", blocked_code(r) == "CONFIRMATION_REQUIRED", r)
        r = await retry(b.url, declined, r1.request_state)
        check(
            "...the same state then sent with accept: CONFIRMATION_INVALID",
            blocked_code(r) == "CONFIRMATION_INVALID",
            r,
        )
        check("...nothing written", not (root / "declined-sealed.txt").exists())

        # 3c. A shared secret without a shared store would let each process
        # run a confirmation once: under --store memory it is not used.
        m1 = Replica("memory-1", root, audit)
        m2 = Replica("memory-2", root, audit)
        replicas += [m1, m2]
        spread = {"path": str(root / "memory.txt"), "content": "once\n"}
        r1 = await first_leg(m1.url, spread)
        r = await retry(m2.url, spread, r1.request_state)
        check(
            "--store memory: another process with the same secret refuses the state",
            blocked_code(r) == "CONFIRMATION_INVALID",
            r,
        )
        check("...nothing written there", not (root / "memory.txt").exists())
        r = await retry(m1.url, spread, r1.request_state)
        check(
            "...the process that sealed it runs it", not r.is_error and (root / "memory.txt").read_text() == "once\n", r
        )
        warned = (root.parent / "memory-1.log").read_text()
        check("...and said at start that the secret is not used", "the secret is not used" in warned, warned[-400:])

        # 4. Expiry.
        expiring = {"path": str(root / "late.txt"), "content": "late\n"}
        r1 = await first_leg(short.url, expiring)
        await asyncio.sleep(1.3)
        r = await retry(short.url, expiring, r1.request_state)
        check("retry after --confirm-ttl: CONFIRMATION_INVALID", blocked_code(r) == "CONFIRMATION_INVALID", r)
        check("...no file", not (root / "late.txt").exists())

        # 5. The store down: nothing runs.
        later = {"path": str(root / "nostore.txt"), "content": "x\n"}
        r1 = await first_leg(a.url, later)
        redis.terminate()
        redis.wait(10)
        r = await retry(a.url, later, r1.request_state)
        check("store unreachable: STORE_UNAVAILABLE, not forwarded", blocked_code(r) == "STORE_UNAVAILABLE", r)
        check("...no file", not (root / "nostore.txt").exists())

        lines = [json.loads(x) for x in audit.read_text().splitlines()]
        mrtr = [x for x in lines if x.get("confirmation") == "mrtr"]
        check(
            "audit: every sealed first leg and forwarded retry names its seal id",
            mrtr and all(x.get("seal") for x in mrtr if x["outcome"] in ("input_required", "forwarded")),
            mrtr[:3],
        )
        check(
            "audit: exactly one sealed call was forwarded per accepted seal",
            sum(1 for x in mrtr if x["outcome"] == "forwarded")
            == len({x["seal"] for x in mrtr if x["outcome"] == "forwarded"}),
            mrtr,
        )
        check("audit: no argument values", not any("arguments" in x for x in lines))
    finally:
        for r in replicas:
            r.stop()
        if redis.poll() is None:
            redis.terminate()
    print(f"{'FAILED: ' + ', '.join(failures) if failures else 'all mrtr checks passed'}")
    return 1 if failures else 0


sys.exit(asyncio.run(main()))
