"""`toolgate init`, `check` and `pin` against live servers, then the written
policy in front of them: the real @modelcontextprotocol/server-filesystem and
a 60-tool server on the TypeScript SDK that lists its tools in pages of 25.
The starter policy must load and pass `check`, name every tool, and make the
gateway ask for confirmation before every write (checked on the server side:
on disk, and in the 60-tool server's call log).

Usage: init.py TOOLGATE_BIN PROXY_BIN NODE_BIN FILESYSTEM_SERVER_JS MANY_TOOLS_SERVER_MJS
"""

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from e2e_support import blocked_code, check, failures

TOOLGATE, PROXY, NODE, FILESYSTEM, MANY = sys.argv[1:6]
TMP = Path(tempfile.mkdtemp(prefix="toolgate-init-"))


def toolgate(*args):
    return subprocess.run([TOOLGATE, *args], capture_output=True, text=True, timeout=180)


def sample(schema, root):
    """Arguments that fit `schema`: paths inside `root` for strings."""
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: sample(props.get(name, {}), root) for name in schema.get("required", [])}
    if kind == "array":
        return [sample(schema.get("items", {}), root)]
    if kind == "boolean":
        return False
    if kind in ("number", "integer"):
        return 1
    return str(root / "made-by-a-call.txt")


async def listed(params):
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        tools, cursor = [], None
        while True:
            page = await s.list_tools(cursor=cursor) if cursor else await s.list_tools()
            tools += page.tools
            cursor = page.nextCursor
            if not cursor:
                return tools


async def calls_through(policy, server, arguments_of):
    """Every tool the gateway lists, called once through it: name -> result."""
    params = StdioServerParameters(command=PROXY, args=["--policy", str(policy), "--", *server], env=dict(os.environ))
    results = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        tools = (await s.list_tools()).tools
        for tool in tools:
            results[tool.name] = await s.call_tool(tool.name, arguments_of(tool))
    return results


def writes_of(tools):
    """The server's own word: a tool that does not say it only reads writes."""
    return {t.name for t in tools if not (t.annotations and t.annotations.readOnlyHint)}


async def one_server(label, server, arguments_of, ran):
    tools = await listed(StdioServerParameters(command=server[0], args=server[1:], env=dict(os.environ)))
    names = {t.name for t in tools}
    policy = TMP / f"{label}.yaml"
    done = toolgate("init", "--out", str(policy), "--", *server)
    check(f"{label}: `toolgate init` writes a policy", done.returncode == 0 and policy.exists(), done.stderr[-800:])
    if not policy.exists():
        return
    text = policy.read_text()
    entries = set(json.loads(key) for key in re.findall(r'^  ("(?:[^"\\]|\\.)*"):$', text, re.M))
    check(f"{label}: every tool the server lists ({len(names)}) is named", entries == names, entries ^ names)
    check(
        f"{label}: each entry says its classification and why, and has a pin",
        text.count("# read_only (effect:") + text.count("# transactional (effect:") == len(names)
        and text.count('pin: "sha256:') == len(names),
        text[:600],
    )
    again = toolgate("init", "--out", str(policy), "--", *server)
    check(f"{label}: init does not overwrite without --force", again.returncode == 2, again.stderr)

    verdict = toolgate("check", "--policy", str(policy), "--format", "json", "--", *server)
    report = json.loads(verdict.stdout or "{}")
    check(
        f"{label}: `toolgate check` against the live server accepts it (no finding at all)",
        verdict.returncode == 0 and report.get("loads") is True and report.get("findings") == [],
        (verdict.returncode, verdict.stdout[:600], verdict.stderr[-400:]),
    )
    alone = toolgate("check", "--policy", str(policy))
    check(f"{label}: ...and on its own", alone.returncode == 0, alone.stdout + alone.stderr)

    # As written, a tool the server only says reads waits for a person too
    # (a server's annotations are its claim); each says how to take the claim.
    results = await calls_through(policy, server, arguments_of)
    writes = writes_of(tools)
    asked = {name for name, r in results.items() if blocked_code(r) == "CONFIRMATION_REQUIRED"}
    check(
        f"{label}: as written, every tool waits for confirmation, the server's claimed reads too",
        asked == names and len(writes) > 0,
        (sorted(asked ^ names), len(results)),
    )
    # (but the gateway's probe of how the server answers a tool it lacks)
    reached = {name for name in ran() if not name.startswith("toolgate-probe-")}
    check(f"{label}: ...nothing reached the server", not reached, sorted(reached))
    # The reviewer's edit, as each claimed read's comment says.
    marker = "    # Checked that it only reads? Replace the next line with `operation_type: read_only`.\n"
    check(f"{label}: each claimed read says how to take the claim", text.count(marker) == len(names - writes))
    reviewed = re.sub(re.escape(marker) + r"    require_confirmation: true\n", "    operation_type: read_only\n", text)
    # --read-only-from-hints writes that edit itself: the same rules (the same revision).
    taken = TMP / f"{label}-taken.yaml"
    done = toolgate("init", "--read-only-from-hints", "--out", str(taken), "--", *server)
    revision = re.compile(r"policy revision (sha256:[0-9a-f]{64})")
    policy.write_text(reviewed)
    checked = toolgate("check", "--policy", str(policy), "--", *server)
    check(
        f"{label}: init --read-only-from-hints writes the reviewed rules",
        done.returncode == 0
        and marker not in taken.read_text()
        and revision.findall(done.stderr) == revision.findall(checked.stdout + checked.stderr),
        (done.stderr[-300:], checked.stdout[-300:]),
    )
    # Review 23: each taken read's comment said `(effect: write)`.
    comments = re.findall(r"# (read_only|transactional) \(effect: (\w+)\)", taken.read_text())
    check(
        f"{label}: ...and each comment's effect is the engine's for what is written (reads read)",
        comments
        and all((kind == "read_only") == (effect == "read") for kind, effect in comments)
        and sum(kind == "read_only" for kind, _ in comments) == len(names - writes),
        comments,
    )
    policy.write_text(reviewed)
    results = await calls_through(policy, server, arguments_of)
    asked = {name for name, r in results.items() if blocked_code(r) == "CONFIRMATION_REQUIRED"}
    check(
        f"{label}: once reviewed, every write ({len(writes)}) waits for confirmation, and only they",
        asked == writes,
        (sorted(asked ^ writes), len(results)),
    )
    check(f"{label}: ...no write reached the server", not (ran() & writes), sorted(ran() & writes))
    return policy, server


async def pin_refuses_a_contradicting_definition():
    """A tool the reviewed policy calls read_only that the server redefines
    as destructive: `pin` does not accept the new definition (the change a
    pin exists to stop) and leaves the file as it was; the tool stays held."""
    server = [NODE, str(Path(__file__).parent / "echo_upstream.mjs")]
    policy = TMP / "echo.yaml"
    done = toolgate("init", "--out", str(policy), "--", *server)
    check("pin: init over the echo server", done.returncode == 0, done.stderr[-400:])
    marker = "    # Checked that it only reads? Replace the next line with `operation_type: read_only`.\n"
    reviewed = re.sub(
        r'(  "echo":\n(?:    #.*\n)*?)' + re.escape(marker) + r"    require_confirmation: true\n",
        r"\g<1>    operation_type: read_only\n",
        policy.read_text(),
    )
    check("pin: the reviewer took echo's claim", "operation_type: read_only" in reviewed, reviewed[:800])
    policy.write_text(reviewed)
    redeployed = dict(os.environ, ECHO_WRITES="1")
    repinned = subprocess.run(
        [TOOLGATE, "pin", "--policy", str(policy), "--", *server], capture_output=True, text=True, env=redeployed
    )
    check(
        "pin: a definition the entry now contradicts is not pinned; the file is unchanged",
        repinned.returncode == 1 and "server now says it writes" in repinned.stderr and policy.read_text() == reviewed,
        (repinned.returncode, repinned.stderr[-600:]),
    )


async def main():
    root = TMP / "root"
    root.mkdir()
    (root / "kept.txt").write_text("kept\n")
    before = sorted(p.name for p in root.iterdir())
    fs = await one_server(
        "filesystem",
        [NODE, FILESYSTEM, str(root)],
        lambda tool: sample(tool.inputSchema, root),
        # What ran on this server shows on disk, checked below.
        set,
    )
    check("filesystem: nothing was written on disk", sorted(p.name for p in root.iterdir()) == before)

    log = TMP / "many.jsonl"
    log.touch()

    def ran_many():
        return {json.loads(line)["tool"] for line in log.read_text().splitlines() if line.strip()}

    many = await one_server("60 tools", [NODE, MANY, str(log)], lambda tool: {"value": "x"}, ran_many)
    check(
        "60 tools: the reads ran on the server (20)",
        len({t for t in ran_many() if t.endswith("_reads")}) == 20,
        sorted(ran_many()),
    )

    # `toolgate pin`: a pin that no longer matches is reported by check and
    # by the gateway at start-up, and `pin` puts the current one back.
    if fs:
        policy, server = fs
        good = policy.read_text()
        stale = re.sub(r'(  "write_file":\n(?:    .*\n)*?    pin: "sha256:)[0-9a-f]{64}', r"\g<1>" + "0" * 64, good)
        check("pin: the test made write_file's pin stale", stale != good)
        policy.write_text(stale)
        verdict = toolgate("check", "--policy", str(policy), "--format", "json", "--", *server)
        codes = [f["code"] for f in json.loads(verdict.stdout or "{}").get("findings", [])]
        check("pin: check reports PIN_MISMATCH", codes == ["PIN_MISMATCH"], verdict.stdout[:400])
        repinned = toolgate("pin", "--policy", str(policy), "--", *server)
        check(
            "pin: `toolgate pin` restores exactly the policy init wrote",
            repinned.returncode == 0 and policy.read_text() == good,
            repinned.stderr[-600:],
        )
    await pin_refuses_a_contradicting_definition()
    if many:
        print(f"(files in {TMP})")
    print("all passed" if not failures else f"FAILED: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
