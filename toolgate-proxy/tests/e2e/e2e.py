"""toolgate proxy against the real @modelcontextprotocol/server-filesystem,
driven by the official Python SDK client (mcp). Each check prints its name;
the run ends with "N passed, M failed" and exits non-zero on any failure.

Usage: e2e.py PROXY_BIN NODE_BIN SERVER_JS
"""

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from mcp.types import ElicitResult

PROXY, NODE, SERVER = sys.argv[1], sys.argv[2], sys.argv[3]
RESULTS = []


def blocked_code(result):
    """The decision code of a blocked result: its text is the decision's JSON
    (and, for tools without an outputSchema, so is structuredContent)."""
    try:
        decision = json.loads(result.content[0].text)
    except (IndexError, AttributeError, ValueError):
        return None
    if result.structuredContent is not None and result.structuredContent != decision:
        return "structuredContent differs from the text"
    return decision.get("error", {}).get("code")


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)


def proxy_params(root, *flags):
    return StdioServerParameters(command=PROXY, args=[*flags, "--", NODE, SERVER, str(root)], env=dict(os.environ))


def direct_params(root):
    return StdioServerParameters(command=NODE, args=[SERVER, str(root)], env=dict(os.environ))


def server_pids(root):
    """Processes whose command line names this test's root directory."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            cmd
            and os.path.basename(cmd[0]) == b"node"
            and any(part.decode(errors="replace") == str(root) for part in cmd)
        ):
            pids.append(int(entry.name))
    return pids


def listed_raw(argv):
    """A gateway started as `argv` over raw stdio, initialized and asked
    tools/list (both answers read); its pipes stay open."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "0"}}
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ):
        proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    proc.stdout.readline()
    proc.stdout.readline()
    return proc


async def with_session(params, body, elicit=None):
    kwargs = {} if elicit is None else {"elicitation_callback": elicit}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, **kwargs) as s:
            await s.initialize()
            return await body(s)


def error_of(call):
    """An unknown-tool answer, either a JSON-RPC error or an isError result."""
    if isinstance(call, McpError):
        return {"error": {"code": call.error.code, "message": call.error.message, "data": call.error.data}}
    return {"result": call.model_dump(mode="json", exclude_none=True)}


async def try_call(s, name, args):
    try:
        return await s.call_tool(name, args)
    except McpError as e:
        return e


async def main():
    tmp = Path(tempfile.mkdtemp(prefix="toolgate-proxy-e2e-"))
    root = tmp / "root"
    root.mkdir()
    (root / "hello.txt").write_text("hello\n")
    audit = tmp / "audit.jsonl"

    # What the server itself offers.
    direct = await with_session(direct_params(root), lambda s: s.list_tools())
    read_tools = sorted(t.name for t in direct.tools if t.annotations and t.annotations.readOnlyHint)
    all_tools = sorted(t.name for t in direct.tools)
    check("server lists write_file directly", "write_file" in all_tools, all_tools)

    # 0. `toolgate proxy -- SERVER_CMD` through the CLI, no option before `--`:
    # the gateway is linked into the CLI and gets the `--` as written.
    cli = StdioServerParameters(
        command=str(Path(PROXY).with_name("toolgate")),
        args=["proxy", "--", NODE, SERVER, str(root)],
        env=dict(os.environ),
    )
    via_cli = await with_session(cli, lambda s: s.list_tools())
    check(
        "`toolgate proxy -- node server.js DIR` serves the tools", "read_text_file" in [t.name for t in via_cli.tools]
    )

    # 0b. `toolgate check` against the live server: every page of its
    # catalog, the policy's stray entry named with its position; the
    # gateway says the same at start-up.
    stray = tmp / "stray.yaml"
    stray.write_text("version: 1\ntool_policies:\n  write_file:\n    require_confirmation: true\n  no_such_tool: {}\n")
    toolgate = str(Path(PROXY).with_name("toolgate"))
    done = subprocess.run(
        [toolgate, "check", "--policy", str(stray), "--format", "json", "--", NODE, SERVER, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout or "{}")
    stray_findings = [f for f in report.get("findings", []) if f.get("code") == "POLICY_TOOL_NOT_IN_CATALOG"]
    check(
        "`toolgate check -- SERVER`: the live catalog loads, the stray entry is found at 5:3",
        done.returncode == 0
        and report.get("loads") is True
        and [(f["file"], f["line"], f["column"]) for f in stray_findings] == [(str(stray), 5, 3)],
        (done.returncode, done.stdout[:600], done.stderr[-600:]),
    )
    started = listed_raw([PROXY, "--policy", str(stray), "--", NODE, SERVER, str(root)])
    started.stdin.close()
    started.wait(timeout=30)
    said = started.stderr.read()
    check(
        "the gateway reports the stray entry once at start-up",
        said.count("POLICY_TOOL_NOT_IN_CATALOG") == 1 and "no_such_tool" in said,
        said[-800:],
    )

    # The upstream server dies while the client stays: the gateway exits
    # (non-zero), so the host sees it gone and can start both again, instead
    # of answering every later call with an error while looking connected.
    lone = listed_raw([PROXY, "--", NODE, SERVER, str(root)])
    for pid in server_pids(root):
        os.kill(pid, signal.SIGKILL)
    try:
        lone.wait(timeout=10)
    except subprocess.TimeoutExpired:
        lone.kill()
        lone.wait()
    lone.stdin.close()
    check(
        "stdio: the upstream server killed while the client stays: the gateway exits non-zero, saying why",
        lone.returncode not in (0, None, -9) and "upstream MCP server ended" in lone.stderr.read(),
        lone.returncode,
    )

    # 1. Direct surface: only the read tools.
    via = await with_session(proxy_params(root, "--surface", "direct"), lambda s: s.list_tools())
    names = [t.name for t in via.tools]
    check("direct surface lists exactly the read tools, sorted", names == read_tools, f"{names} vs {read_tools}")
    check("direct surface annotations say read-only", all(t.annotations.readOnlyHint for t in via.tools))

    # 2. write_file without confirmation: blocked, nothing on disk.
    target = root / "out.txt"

    async def write_unconfirmed(s):
        return await s.call_tool("write_file", {"path": str(target), "content": "one\n"})

    r = await with_session(proxy_params(root, "--audit", str(audit)), write_unconfirmed)
    code = blocked_code(r)
    check("write_file without confirmation is a blocked tool result", r.isError and code == "CONFIRMATION_REQUIRED", r)
    text = r.content[0].text if r.content else ""
    check(
        "blocked text says what to do",
        "confirmation" in text and "repeat the same call" in text and "CONFIRMATION_REQUIRED" in text,
        text,
    )
    check("blocked write left no file", not target.exists())

    # 3. The model's own confirmed: true (a client that cannot elicit): not
    # a confirmation unless the operator opted in.
    async def write_confirmed(s):
        return await s.call_tool("write_file", {"path": str(target), "content": "two\n", "confirmed": True})

    r = await with_session(proxy_params(root, "--audit", str(audit)), write_confirmed)
    code = blocked_code(r)
    check("the model's confirmed: true alone does not run a write", r.isError and code == "CONFIRMATION_REQUIRED", r)
    check("...and left no file", not target.exists())
    r = await with_session(proxy_params(root, "--audit", str(audit), "--trust-model-confirmation"), write_confirmed)
    check("with --trust-model-confirmation the model's confirmed write_file runs", not r.isError, r)
    check("confirmed write_file wrote the content", target.exists() and target.read_text() == "two\n")
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    check(
        "the audit line says the model's word was taken",
        any(
            x.get("tool") == "write_file" and x.get("outcome") == "forwarded" and x.get("confirmation") == "argument"
            for x in lines
        ),
        lines[-3:],
    )

    # 4. Confirmation by elicitation: accept, then decline.
    asked = []

    async def accept(context, params):
        asked.append(params.message)
        return ElicitResult(action="accept", content={})

    async def decline(context, params):
        asked.append(params.message)
        return ElicitResult(action="decline")

    elicited = root / "elicited.txt"

    async def write_elicited(s):
        return await s.call_tool("write_file", {"path": str(elicited), "content": "three\n"})

    r = await with_session(proxy_params(root, "--audit", str(audit)), write_elicited, elicit=accept)
    check("elicitation accepted: write_file runs", not r.isError, r)
    check("elicitation accepted: file has the content", elicited.exists() and elicited.read_text() == "three\n")
    check(
        "elicitation message states the tool and the exact arguments",
        bool(asked) and "write_file" in asked[0] and json.dumps(str(elicited)) in asked[0] and "three" in asked[0],
        asked,
    )
    # Invisible and bidirectional characters are shown escaped to the person.
    sneaky = root / "sneaky.txt"
    asked.clear()

    async def write_sneaky(s):
        return await s.call_tool("write_file", {"path": str(sneaky), "content": "ok\u202etxt.exe\u2028\u200bend"})

    r = await with_session(proxy_params(root), write_sneaky, elicit=accept)
    check(
        "elicitation message shows U+202E, U+2028 and U+200B escaped, never raw",
        bool(asked)
        and "\\u{202E}" in asked[0]
        and "\\u{2028}" in asked[0]
        and "\\u{200B}" in asked[0]
        and not any(c in asked[0] for c in "\u202e\u2028\u200b"),
        asked,
    )
    check("...and the file has the exact content", sneaky.read_text() == "ok\u202etxt.exe\u2028\u200bend")
    declined = root / "declined.txt"

    async def write_declined(s):
        # A model-written confirmation is not proof when the person can be asked.
        return await s.call_tool("write_file", {"path": str(declined), "content": "four\n", "confirmed": True})

    asked.clear()
    r = await with_session(proxy_params(root, "--audit", str(audit)), write_declined, elicit=decline)
    code = blocked_code(r)
    check("elicitation declined: blocked CONFIRMATION_REQUIRED", r.isError and code == "CONFIRMATION_REQUIRED", r)
    check("elicitation declined: the person was asked despite confirmed: true", len(asked) == 1)
    check("elicitation declined: no file", not declined.exists())
    # --trust-model-confirmation is for clients that cannot be asked: one that
    # can is asked all the same, and its person's no stands.
    asked.clear()
    r = await with_session(
        proxy_params(root, "--audit", str(audit), "--trust-model-confirmation"), write_declined, elicit=decline
    )
    check(
        "with --trust-model-confirmation a client that elicits is still asked: declined, blocked",
        blocked_code(r) == "CONFIRMATION_REQUIRED" and len(asked) == 1,
        (r, asked),
    )
    check("...no file", not declined.exists())

    # 5. Unknown and hidden tools answer alike.
    async def unknown_and_hidden(s):
        hidden = await try_call(s, "write_file", {"path": str(root / "x"), "content": "x"})
        unknown = await try_call(s, "no_such_tool", {"path": str(root / "x"), "content": "x"})
        return hidden, unknown

    hidden, unknown = await with_session(proxy_params(root, "--surface", "direct"), unknown_and_hidden)
    h = json.dumps(error_of(hidden)).replace("write_file", "NAME")
    u = json.dumps(error_of(unknown)).replace("no_such_tool", "NAME")
    check("hidden tool answers exactly like an unknown tool", h == u, f"{h} vs {u}")
    direct_unknown = await with_session(direct_params(root), lambda s: try_call(s, "no_such_tool", {}))
    d = json.dumps(error_of(direct_unknown)).replace("no_such_tool", "NAME")
    check("...and like the server's own unknown-tool answer", d == u, f"{d} vs {u}")
    check("hidden write left no file", not (root / "x").exists())

    # 6. The server killed mid-call: a clear error, no hang.
    fifo = root / "blocking.fifo"
    os.mkfifo(fifo)

    async def killed_mid_call(s):
        call = asyncio.create_task(try_call(s, "read_text_file", {"path": str(fifo)}))
        await asyncio.sleep(1.0)
        pids = server_pids(root)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        # A hang guard, not a measure: it is shorter than the gateway's own
        # request timeout (300 s), so an answer here is the gateway noticing
        # the exit, not waiting out that timeout.
        result = await asyncio.wait_for(call, 60)
        return pids, result

    pids, result = await with_session(proxy_params(root), killed_mid_call)
    check("found the server process to kill", bool(pids))
    check(
        "killed server: the call gets a clear error",
        isinstance(result, McpError) and "upstream server" in result.error.message,
        result,
    )

    # 7. The client going away stops the server.
    async def just_list(s):
        await s.list_tools()
        return server_pids(root)

    running = await with_session(proxy_params(root), just_list)
    deadline = time.monotonic() + 10
    while server_pids(root) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    check("server was running during the session", bool(running))
    check("client disconnect stopped the server", not server_pids(root), server_pids(root))

    # 8. Garbage from the upstream: a clear error at once.
    garbage = StdioServerParameters(command=PROXY, args=["--", "sh", "-c", "echo this is not json; sleep 30"])
    try:
        async with stdio_client(garbage) as (read, write):
            async with ClientSession(read, write) as s:
                await asyncio.wait_for(s.initialize(), 20)
        outcome = "initialized"
    except McpError as e:
        outcome = e.error.message
    except Exception as e:
        outcome = repr(e)
    check(
        "garbage from the server: clear error, no hang",
        "not a JSON-RPC message" in outcome,
        outcome,
    )

    # 9. The audit log: one line per decision, no argument values by default.
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    codes = [(r["tool"], r["code"], r["confirmation"], r["outcome"]) for r in lines]
    check(
        "audit log records each decision",
        ("write_file", "CONFIRMATION_REQUIRED", "approval", "blocked") in codes
        and ("write_file", None, "argument", "forwarded") in codes
        and ("write_file", None, "elicitation", "forwarded") in codes
        and ("write_file", "CONFIRMATION_REQUIRED", "declined", "blocked") in codes,
        codes,
    )
    check(
        "audit lines carry time, revision, surface and no arguments",
        all(
            r["time"].endswith("Z") and r["policy_revision"].startswith("sha256:") and r["surface"] == "confirming"
            for r in lines
        )
        and "three" not in audit.read_text()
        and all("arguments" not in r for r in lines),
        lines[:2],
    )

    failed = RESULTS.count(False)
    print(f"{RESULTS.count(True)} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
