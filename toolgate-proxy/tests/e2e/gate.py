"""The gateway's trust boundary, tried as an attacker would: raw JSON-RPC
messages (over stdio and Streamable HTTP) sent to `toolgate proxy` in front
of the real @modelcontextprotocol/server-filesystem. Nothing that was not
parsed into a type the gateway understands and decided may reach the server
(checked on disk and in the audit log); every request gets an answer.

Usage: gate.py PROXY_BIN NODE_BIN SERVER_JS EVERYTHING_JS
"""

import asyncio
import http.client
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

PROXY, NODE, SERVER, EVERYTHING = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
RESULTS = []
PROTOCOL = "2025-06-18"


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {str(detail)[:400]}"), flush=True)


def init_message(i=0, capabilities=None):
    return {
        "jsonrpc": "2.0",
        "id": i,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "gate-e2e", "version": "1"},
        },
    }


class Stdio:
    """A raw line-oriented client of `toolgate proxy` over stdio."""

    def __init__(self, proc):
        self.proc = proc
        self.seen = []

    @classmethod
    async def start(cls, root, *flags, server=None, capabilities=None):
        proc = await asyncio.create_subprocess_exec(
            PROXY,
            *flags,
            "--",
            NODE,
            *(server or [SERVER, str(root)]),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=64 * 1024 * 1024,
        )
        s = cls(proc)
        await s.send_json(init_message(capabilities=capabilities))
        await s.answer(0)
        await s.send_json({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return s

    async def send_raw(self, data: bytes):
        self.proc.stdin.write(data + b"\n")
        await self.proc.stdin.drain()

    async def send_json(self, message):
        await self.send_raw(json.dumps(message).encode())

    async def next(self, timeout=20):
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            raise EOFError("the proxy closed its output")
        message = json.loads(line)
        self.seen.append(message)
        return message

    async def answer(self, id_, timeout=20):
        """The next response or error with this id (notifications kept in self.seen)."""
        while True:
            m = await self.next(timeout)
            if "method" not in m and m.get("id") == id_:
                return m

    async def answer_declining(self, id_, timeout=20):
        """As `answer`, declining every elicitation the gateway sends meanwhile."""
        while True:
            m = await self.next(timeout)
            if m.get("method") == "elicitation/create":
                await self.send_json({"jsonrpc": "2.0", "id": m["id"], "result": {"action": "decline"}})
            elif "method" not in m and m.get("id") == id_:
                return m

    async def close(self):
        if self.proc.returncode is None:
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()


def call(id_, name, arguments, **extra):
    params = {"name": name, "arguments": arguments, **extra}
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


def raw_call(id_, params_text):
    return ('{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":%s}' % (json.dumps(id_), params_text)).encode()


def write_args(path, content="pwned\n"):
    return json.dumps({"path": str(path), "content": content})


def bad_calls(root):
    """tools/call messages whose params do not fit the MCP type (each must be
    refused with its id, and write nothing)."""
    p = root / "bad.txt"
    a = write_args(p)
    return [
        ("requestState not a string", raw_call(101, '{"name":"write_file","arguments":%s,"requestState":5}' % a)),
        ("inputResponses wrong type", raw_call(102, '{"name":"write_file","arguments":%s,"inputResponses":"x"}' % a)),
        ("duplicate name", raw_call(103, '{"name":"read_text_file","name":"write_file","arguments":%s}' % a)),
        ("duplicate arguments", raw_call(104, '{"name":"write_file","arguments":{},"arguments":%s}' % a)),
        ("non-string name", raw_call(105, '{"name":["write_file"],"arguments":%s}' % a)),
        ("duplicate _meta", raw_call(106, '{"name":"write_file","arguments":%s,"_meta":{},"_meta":{}}' % a)),
        (
            "duplicate key inside arguments",
            raw_call(
                107,
                '{"name":"write_file","arguments":{"path":"%s","path":"%s","content":"x","confirmed":true}}'
                % (root / "nope.txt", p),
            ),
        ),
    ], p


def unparseable(root):
    p = root / "unparseable.txt"
    deep = "[" * 200 + "1" + "]" * 200
    return [
        (
            "nesting over 128",
            raw_call(201, '{"name":"write_file","arguments":{"path":"%s","content":"x","n":%s}}' % (p, deep)),
            -32700,
        ),
        (
            "invalid UTF-8",
            raw_call(202, '{"name":"write_file","arguments":{"path":"%s","content":"x' % p).replace(b'"x', b'"\xff\xfe')
            + b'"}}',
            -32700,
        ),
        (
            "a 20 MB line",
            raw_call(203, '{"name":"write_file","arguments":{"path":"%s","content":"%s"}}' % (p, "x" * (20 << 20))),
            -32600,
        ),
        ("trailing garbage", raw_call(204, '{"name":"read_text_file","arguments":{"path":"%s"}}' % p) + b" }", -32700),
        ("id of the wrong type", b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', -32600),
    ], p


LOOKALIKES = ["tools/call ", "Tools/call", "tools/call\u200b", "tools//call", "tools/call/", "x-vendor/call"]


async def stdio_checks(root, audit):
    # Default surface: write_file needs confirmation; direct: it is hidden.
    for surface in ("confirming", "direct"):
        s = await Stdio.start(root, "--surface", surface, "--audit", str(audit))
        try:
            cases, target = bad_calls(root)
            for name, line in cases:
                await s.send_raw(line)
                id_ = json.loads(line.split(b'"method"')[0].rstrip(b",") + b"}")["id"]
                m = await s.answer(id_)
                code = m.get("error", {}).get("code")
                check(f"stdio {surface}: {name}: refused with its id ({code})", code in (-32602, -32600), m)
            for name, line, want in unparseable(root)[0]:
                await s.send_raw(line)
                m = await s.next()
                id_ = m.get("id")
                readable = name != "id of the wrong type"
                check(
                    f"stdio {surface}: {name}: answered {want} with its id",
                    m.get("error", {}).get("code") == want and (id_ is not None) == readable,
                    m,
                )
            for method in LOOKALIKES:
                await s.send_json(
                    {
                        "jsonrpc": "2.0",
                        "id": 300,
                        "method": method,
                        "params": {"name": "write_file", "arguments": json.loads(write_args(target))},
                    }
                )
                m = await s.answer(300)
                check(
                    f"stdio {surface}: look-alike {method!r} is method-not-found",
                    m.get("error", {}).get("code") == -32601,
                    m,
                )
            # A tools/call sent as a notification: never relayed; the
            # session still answers the next request.
            await s.send_json(
                {
                    "jsonrpc": "2.0",
                    "method": "tools/call",
                    "params": {"name": "write_file", "arguments": json.loads(write_args(target))},
                }
            )
            await s.send_json({"jsonrpc": "2.0", "id": 400, "method": "ping"})
            m = await s.answer(400)
            check(f"stdio {surface}: tools/call as a notification is dropped, the session goes on", "result" in m, m)
            check(
                f"stdio {surface}: nothing written by any refused message",
                not target.exists() and not (root / "unparseable.txt").exists(),
            )
        finally:
            await s.close()

    # Two requests with one id: the second is refused while the first runs.
    fifo = root / "wait.fifo"
    os.mkfifo(fifo)
    # (The model's word trusted, so the duplicate would run if admitted.)
    s = await Stdio.start(root, "--trust-model-confirmation")
    try:
        await s.send_json(call(500, "read_text_file", {"path": str(fifo)}))
        await asyncio.sleep(0.5)
        await s.send_json(call(500, "write_file", {"path": str(root / "dup.txt"), "content": "x", "confirmed": True}))
        m = await s.answer(500)
        check("stdio: a second request with an id in flight is refused", m.get("error", {}).get("code") == -32600, m)
        fd = os.open(fifo, os.O_WRONLY)
        os.write(fd, b"released\n")
        os.close(fd)
        m = await s.answer(500)
        check("stdio: ...and the first still gets its own answer", "result" in m and "released" in json.dumps(m), m)
        check("stdio: the refused duplicate wrote nothing", not (root / "dup.txt").exists())
    finally:
        await s.close()

    # A client that declared form elicitation in its handshake is asked on its
    # connection, whatever a later request's MCP 2026-07-28 `_meta` says: the
    # model's `confirmed: true` does not count there even with the flag.
    s = await Stdio.start(root, "--trust-model-confirmation", capabilities={"elicitation": {"form": {}}})
    try:
        target = root / "declared.txt"
        modern = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        args = {**json.loads(write_args(target)), "confirmed": True}
        await s.send_json(call(600, "write_file", args))
        m = await s.answer_declining(600)
        check("stdio: a declared client's person declines: blocked", not target.exists(), m)
        await s.send_json(call(601, "write_file", args, _meta=modern))
        m = await s.answer_declining(601)
        check(
            "stdio: ...and a 2026-07-28 `_meta` on the same connection does not turn the model's word into a yes",
            not target.exists() and "pwned" not in json.dumps(m),
            m,
        )
    finally:
        await s.close()

    # A call the client cancels while its person is asked is withdrawn: the
    # question is cancelled too, and an accept that comes after it runs
    # nothing (review 25: the write ran). A call too large for a person to
    # check (over 64 KiB of arguments) is not asked about at all.
    s = await Stdio.start(root, "--audit", str(audit), capabilities={"elicitation": {"form": {}}})
    try:
        target = root / "withdrawn.txt"
        await s.send_json(call(650, "write_file", json.loads(write_args(target))))
        asked = await s.next()
        while asked.get("method") != "elicitation/create":
            asked = await s.next()
        await s.send_json(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 650, "reason": "stop"}}
        )
        withdrawn = await s.next()
        while withdrawn.get("method") != "notifications/cancelled":
            withdrawn = await s.next()
        check(
            "stdio: a call cancelled while its person is asked withdraws the question",
            withdrawn["params"].get("requestId") == asked["id"],
            withdrawn,
        )
        await s.send_json({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {}}})
        await s.send_json(call(651, "list_allowed_directories", {}))
        await s.answer(651)
        check("stdio: ...and the accept that comes after it runs nothing", not target.exists())
        lines = [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]
        mine = [e for e in lines if e.get("tool") == "write_file" and e.get("confirmation") == "cancelled"]
        check("stdio: ...its audit line says blocked, cancelled", [e.get("outcome") for e in mine] == ["blocked"], mine)

        huge = root / "huge.txt"
        await s.send_json(call(652, "write_file", json.loads(write_args(huge, "x" * (64 * 1024)))))
        m = await s.answer(652)
        asked_about_it = any(x.get("method") == "elicitation/create" and len(json.dumps(x)) > 64 * 1024 for x in s.seen)
        check(
            "stdio: a call with over 64 KiB of arguments is not shown to a person to approve, and does not run",
            not asked_about_it and not huge.exists() and "CONFIRMATION_REQUIRED" in json.dumps(m),
            m,
        )
    finally:
        await s.close()

    # Only what was decided goes upstream: a client's requestState and
    # inputResponses never do, and an upstream's own input request is not
    # relayed (its retry would carry state and answers no decision covers).
    s = await Stdio.start(root, server=[str(Path(__file__).parent / "echo_upstream.mjs")])
    try:
        modern = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        extra = {"requestState": "tg1.client-state", "inputResponses": {"q": {"action": "accept", "content": {}}}}
        await s.send_json(call(700, "echo", {"text": "hi"}, **extra))
        m = await s.answer(700)
        seen = m.get("result", {}).get("content", [{}])[0].get("text", "")
        check(
            "stdio: an allowed call reaches the upstream with its decided name and arguments only",
            json.loads(seen or "{}").get("arguments") == {"text": "hi"}
            and "requestState" not in seen
            and "inputResponses" not in seen,
            m,
        )
        # The gateway's own _meta key (the client's progress token, for its
        # transport) is taken off before the upstream sees the request, and
        # a client's own copy of it never travels.
        forged = {"progressToken": "client-7", "io.toolgate/client-progress-token": "someone-else"}
        await s.send_json(call(702, "echo", {"text": "hi"}, _meta=forged))
        m = await s.answer(702)
        upstream_meta = json.loads(m.get("result", {}).get("content", [{}])[0].get("text", "{}")).get("_meta", {})
        check(
            "stdio: the upstream sees its own progress token and no io.toolgate key",
            "progressToken" in upstream_meta
            and upstream_meta["progressToken"] != "client-7"
            and not any(k.startswith("io.toolgate/") for k in upstream_meta),
            upstream_meta,
        )
        await s.send_json(call(701, "asks", {"text": "hi"}, _meta=modern))
        m = await s.answer(701)
        check(
            "stdio: an upstream's own input request is an UPSTREAM_INPUT_REQUIRED error, not relayed",
            m.get("error", {}).get("data", {}).get("toolgate") == "UPSTREAM_INPUT_REQUIRED"
            and "upstream-state" not in json.dumps(m),
            m,
        )
    finally:
        await s.close()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def wait_port(port):
    """Until something listens on the port (10 s at most)."""
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            await asyncio.sleep(0.1)


def post(port, body: bytes, session=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
        headers["Mcp-Protocol-Version"] = PROTOCOL
    conn.request("POST", "/mcp", body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data


def sse_messages(data: bytes):
    out = []
    for line in data.decode(errors="replace").splitlines():
        if line.startswith("data:") and line[5:].strip():
            out.append(json.loads(line[5:]))
    return out


async def http_checks(root, audit):
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        PROXY,
        "--listen",
        f"127.0.0.1:{port}",
        "--surface",
        "direct",
        "--audit",
        str(audit),
        "--",
        NODE,
        SERVER,
        str(root),
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_port(port)
        status, headers, _ = await asyncio.to_thread(post, port, json.dumps(init_message()).encode())
        session = headers.get("mcp-session-id")
        check("http: initialize gives a session", status == 200 and bool(session), (status, headers))
        await asyncio.to_thread(post, port, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', session)
        cases, target = bad_calls(root)
        for name, line in cases:
            status, _, data = await asyncio.to_thread(post, port, line, session)
            m = json.loads(data)
            check(
                f"http: {name}: refused with its id",
                m.get("error", {}).get("code") in (-32602, -32600) and m.get("id") is not None,
                (status, data[:200]),
            )
        for name, line, want in unparseable(root)[0]:
            status, _, data = await asyncio.to_thread(post, port, line, session)
            m = json.loads(data)
            check(
                f"http: {name}: answered {want}",
                status == 400 and m.get("error", {}).get("code") == want,
                (status, data[:200]),
            )
        for method in LOOKALIKES:
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 300,
                    "method": method,
                    "params": {"name": "write_file", "arguments": json.loads(write_args(target))},
                }
            ).encode()
            status, _, data = await asyncio.to_thread(post, port, body, session)
            m = json.loads(data)
            check(
                f"http: look-alike {method!r} is method-not-found",
                m.get("error", {}).get("code") == -32601 and m.get("id") == 300,
                data[:200],
            )
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"name": "write_file", "arguments": json.loads(write_args(target))},
            }
        ).encode()
        status, _, _ = await asyncio.to_thread(post, port, body, session)
        check("http: tools/call as a notification is accepted and dropped", status == 202, status)
        # A hidden write tool, called properly: answered like an unknown tool.
        status, _, data = await asyncio.to_thread(
            post, port, json.dumps(call(600, "write_file", json.loads(write_args(target)))).encode(), session
        )
        msgs = sse_messages(data) if not data.startswith(b"{") else [json.loads(data)]
        check(
            "http: the hidden write tool, called properly, is not run",
            status == 200 and msgs and not target.exists(),
            data[:300],
        )
        check(
            "http: nothing written by any refused message",
            not target.exists() and not (root / "unparseable.txt").exists(),
        )
        # Two requests with one id in one session: the second is refused
        # while the first is in flight; the id is free again afterwards.
        fifo = root / "http-wait.fifo"
        os.mkfifo(fifo)
        first = asyncio.create_task(
            asyncio.to_thread(
                post, port, json.dumps(call(700, "read_text_file", {"path": str(fifo)})).encode(), session
            )
        )
        await asyncio.sleep(1.0)
        status, _, data = await asyncio.to_thread(
            post, port, json.dumps(call(700, "read_text_file", {"path": str(root / "x")})).encode(), session
        )
        m = json.loads(data) if data.startswith(b"{") else {}
        check(
            "http: a second request with an id in flight is refused",
            status == 400 and m.get("error", {}).get("code") == -32600 and m.get("id") == 700,
            (status, data[:200]),
        )
        fd = os.open(fifo, os.O_WRONLY)
        os.write(fd, b"released\n")
        os.close(fd)
        status, _, data = await first
        check(
            "http: ...and the first still gets its own answer",
            status == 200 and b"released" in data,
            (status, data[:300]),
        )
        status, _, data = await asyncio.to_thread(
            post,
            port,
            json.dumps(call(700, "read_text_file", {"path": str(fifo.with_name("none.txt"))})).encode(),
            session,
        )
        check("http: the id is free once the first was answered", status == 200, (status, data[:200]))
    finally:
        proc.terminate()
        await proc.wait()


def audit_invariant(audit):
    """Every forwarded call in the audit log is an allowed decision."""
    if not audit.exists():
        return True, []
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    bad = [r for r in lines if r.get("outcome") == "forwarded" and r.get("code") is not None]
    return not bad and not any(
        r.get("outcome") == "forwarded" and r.get("tool") == "write_file" and r.get("confirmation") is None
        for r in lines
    ), bad


async def progress_order(runs=20):
    """A server's progress notifications reach the client before the call's
    result (server-everything's long-running operation, over stdio)."""
    policy = Path(tempfile.mkdtemp(prefix="toolgate-gate-progress-")) / "allow.yaml"
    policy.write_text("version: 1\ndefaults:\n  operation_type: read_only\n  require_confirmation: false\n")
    s = await Stdio.start(None, "--policy", str(policy), server=[EVERYTHING, "stdio"])
    bad = []
    try:
        for run in range(runs):
            id_ = 1000 + run
            token = f"p{run}"
            await s.send_json(
                call(id_, "trigger-long-running-operation", {"duration": 0, "steps": 5}, _meta={"progressToken": token})
            )
            s.seen.clear()
            await s.answer(id_)
            got = [
                m["params"]["progress"]
                for m in s.seen
                if m.get("method") == "notifications/progress" and m["params"].get("progressToken") == token
            ]
            if got != [1, 2, 3, 4, 5]:
                bad.append((run, got))
    finally:
        await s.close()
    check(f"stdio: all 5 progress notifications precede the result, {runs} runs of {runs}", not bad, bad)


async def progress_order_http(runs=20):
    """The same over Streamable HTTP, with the official Python client."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    policy = Path(tempfile.mkdtemp(prefix="toolgate-gate-progress-")) / "allow.yaml"
    policy.write_text("version: 1\ndefaults:\n  operation_type: read_only\n  require_confirmation: false\n")
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        PROXY,
        "--policy",
        str(policy),
        "--listen",
        f"127.0.0.1:{port}",
        "--",
        NODE,
        EVERYTHING,
        "stdio",
        stderr=asyncio.subprocess.DEVNULL,
    )
    bad = []
    try:
        await wait_port(port)
        async with streamablehttp_client(f"http://127.0.0.1:{port}/mcp") as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for run in range(runs):
                    got = []

                    async def on_progress(progress, total, message, got=got):
                        got.append(progress)

                    await session.call_tool(
                        "trigger-long-running-operation", {"duration": 0, "steps": 5}, progress_callback=on_progress
                    )
                    if got != [1, 2, 3, 4, 5]:
                        bad.append((run, got))
    finally:
        proc.terminate()
        await proc.wait()
    check(f"http: all 5 progress notifications precede the result, {runs} runs of {runs}", not bad, bad)


async def main():
    tmp = Path(tempfile.mkdtemp(prefix="toolgate-gate-e2e-"))
    root = tmp / "root"
    root.mkdir()
    audit = tmp / "audit.jsonl"
    await stdio_checks(root, audit)
    await http_checks(root, audit)
    await progress_order()
    await progress_order_http()
    ok, bad = audit_invariant(audit)
    check("audit: every forwarded call was an allowed decision, and no unconfirmed write was forwarded", ok, bad)
    failed = RESULTS.count(False)
    print(f"{RESULTS.count(True)} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
