"""The approval page, end to end: the official Python SDK client (`mcp`
1.30, no elicitation capability) through the gateway in front of the real
filesystem server; headless Chromium (Debian's, driven by Playwright) opens
the link the blocked result gives and approves or denies; the model's retry
runs once (checked on disk). Then two replicas sharing a real redis-server
(approve on one, retry on the other), forged POSTs, expiry, and the model's
own `confirmed: true`.

Usage: approve.py PROXY_BIN NODE_BIN SERVER_JS REDIS_SERVER_BIN ARTIFACT_DIR
"""

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from playwright.async_api import async_playwright

from e2e_support import blocked_code, check, failures, free_port, wait_port

warnings.simplefilter("ignore")
PROXY, NODE, SERVER, REDIS, ARTIFACTS = sys.argv[1:6]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def link_of(result):
    """The approval link in the blocked result's second text block."""
    if len(result.content) < 2:
        return None
    m = re.search(r"(http://[^\s]+/approve/[A-Za-z0-9_-]+)", result.content[1].text)
    return m.group(1) if m else None


def http(method, url, data=None, headers=None):
    """(status, headers, body) without raising on 4xx."""
    body = None if data is None else urllib.parse.urlencode(data).encode()
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    if body is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def token_of(html):
    m = re.search(r'name="token" value="([^"]+)"', html)
    return m.group(1) if m else None


class Browser:
    def __init__(self, *args):
        self.args = ["--no-sandbox", *args]

    async def __aenter__(self):
        self.pw = await async_playwright().start()
        self.browser = await self.pw.chromium.launch(executable_path=CHROMIUM, args=self.args)
        return self

    async def __aexit__(self, *exc):
        await self.browser.close()
        await self.pw.stop()

    async def answer(self, url, button, screenshot=None):
        """Opens the page, returns (its text, its HTML, its headers, the
        answer page's text) after clicking `button`."""
        page = await self.browser.new_page()
        try:
            response = await page.goto(url)
            headers = await response.all_headers()
            text = await page.inner_text("body")
            html = await page.content()
            if screenshot:
                await page.screenshot(path=screenshot, full_page=True)
            async with page.expect_navigation():
                await page.click(f"#{button}")
            done = await page.inner_text("body")
            return text, html, headers, done
        finally:
            await page.close()


async def stdio_session(root, audit, *flags):
    params = StdioServerParameters(
        command=PROXY, args=["--audit", str(audit), *flags, "--", NODE, SERVER, str(root)], env=dict(os.environ)
    )
    return stdio_client(params)


async def main():
    tmp = Path(tempfile.mkdtemp(prefix="toolgate-approve-"))
    root = tmp / "root"
    root.mkdir()
    audit = tmp / "audit.jsonl"
    Path(ARTIFACTS).mkdir(parents=True, exist_ok=True)
    shot = Path(ARTIFACTS) / "approval.png"

    metrics_port = free_port()
    async with Browser() as browser:
        # 1. One stdio gateway (pages on a loopback port chosen at start).
        async with await stdio_session(root, audit, "--metrics", f"127.0.0.1:{metrics_port}") as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                check("the client declares no elicitation", True, init)
                target = root / "approved.txt"
                args = {"path": str(target), "content": "exact\u202econtent\n"}
                r = await s.call_tool("write_file", args)
                url = link_of(r)
                check(
                    "unconfirmed write: CONFIRMATION_REQUIRED with a link",
                    blocked_code(r) == "CONFIRMATION_REQUIRED" and url,
                    r,
                )
                check(
                    "...the engine's decision JSON kept as the first block",
                    "CONFIRMATION_REQUIRED" in r.content[0].text,
                )
                if r.structuredContent is not None:
                    check(
                        "...structuredContent.approval carries the url and expiry",
                        r.structuredContent.get("approval", {}).get("url") == url
                        and r.structuredContent["approval"]["expires_ms"] > time.time() * 1000,
                        r.structuredContent,
                    )
                check("...nothing written yet", not target.exists())
                text, html, headers, done = await browser.answer(url, "approve", screenshot=str(shot))
                path_json = json.dumps(str(target))
                check("page shows the tool", "write_file" in text, text)
                check("page shows the exact path", path_json in text, text)
                check(
                    "page shows the content with U+202E escaped as \\u{202E}, never raw",
                    '"exact\\u{202E}content\\n"' in text and "\u202e" not in html and "\u202e" not in text,
                    text,
                )
                check("page shows the policy revision and expiry", "sha256:" in text and "Expires" in text, text)
                check(
                    "page headers are strict",
                    headers.get("content-security-policy")
                    == "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
                    and headers.get("x-content-type-options") == "nosniff"
                    and headers.get("referrer-policy") == "no-referrer"
                    and headers.get("cache-control") == "no-store",
                    headers,
                )
                check("screenshot kept", shot.exists() and shot.stat().st_size > 1000, shot)
                check("approve answered", "Approved" in done, done)
                check("...the approval alone wrote nothing", not target.exists())
                r = await s.call_tool("write_file", args)
                check("retry after approve: the write runs", not r.isError, r)
                check("...the file has exactly the content", target.exists() and target.read_text() == args["content"])
                # The link and the approved retry are decisions like any
                # other (review 28: the approval path was not counted).
                _, _, exposition = http("GET", f"http://127.0.0.1:{metrics_port}/metrics")
                counted = {
                    code: count
                    for code, count in re.findall(
                        r'^toolgate_decisions_total\{[^}]*tool="write_file"[^}]*code="([A-Z_]+)"[^}]*\} (\d+)',
                        exposition,
                        re.M,
                    )
                }
                check(
                    "metrics: the link and the approved retry are counted decisions",
                    counted == {"CONFIRMATION_REQUIRED": "1", "ALLOW": "1"},
                    [x for x in exposition.splitlines() if "decisions_total" in x],
                )
                target.unlink(missing_ok=True)
                r = await s.call_tool("write_file", args)
                check(
                    "second retry: CONFIRMATION_REQUIRED with a new link",
                    blocked_code(r) == "CONFIRMATION_REQUIRED" and link_of(r) not in (None, url),
                    r,
                )
                check("...nothing written", not target.exists())
                status, _, _ = http("GET", url)
                check("the used link no longer shows a page", status in (404, 410), status)

                # Other content while an approval is waiting.
                other = root / "other.txt"
                wanted = {"path": str(other), "content": "wanted\n"}
                r = await s.call_tool("write_file", wanted)
                await browser.answer(link_of(r), "approve")
                r = await s.call_tool("write_file", {"path": str(other), "content": "something else\n"})
                check("retry with other content: blocked", blocked_code(r) == "CONFIRMATION_REQUIRED", r)
                check("...nothing written", not other.exists())
                r = await s.call_tool("write_file", wanted)
                check(
                    "...while the approved call still runs once", not r.isError and other.read_text() == "wanted\n", r
                )

                # Deny.
                denied = root / "denied.txt"
                dargs = {"path": str(denied), "content": "no\n"}
                r = await s.call_tool("write_file", dargs)
                durl = link_of(r)
                _, _, _, done = await browser.answer(durl, "deny")
                check("deny answered", "Denied" in done, done)
                r = await s.call_tool("write_file", dargs)
                check(
                    "retry after deny: blocked with a new link",
                    blocked_code(r) == "CONFIRMATION_REQUIRED" and link_of(r) != durl,
                    r,
                )
                check("...nothing written", not denied.exists())

                # The person's last word stands: approved on one link, then
                # denied on another link of the same call, it does not run.
                changed = root / "changed-mind.txt"
                cargs = {"path": str(changed), "content": "changed\n"}
                first = link_of(await s.call_tool("write_file", cargs))
                second = link_of(await s.call_tool("write_file", cargs))
                check(
                    "two links for one call while none is answered",
                    first and second and first != second,
                    (first, second),
                )
                await browser.answer(first, "approve")
                _, _, _, done = await browser.answer(second, "deny")
                check("...deny on the second after approving the first answered", "Denied" in done, done)
                r = await s.call_tool("write_file", cargs)
                check(
                    "...the retry is blocked: the deny took the approval back",
                    blocked_code(r) == "CONFIRMATION_REQUIRED",
                    r,
                )
                check("...nothing written", not changed.exists())

                # Forged POSTs.
                forged = root / "forged.txt"
                fargs = {"path": str(forged), "content": "forged\n"}
                r = await s.call_tool("write_file", fargs)
                furl = link_of(r)
                r2 = await s.call_tool("write_file", {"path": str(root / "decoy.txt"), "content": "d\n"})
                _, _, decoy_html = http("GET", link_of(r2))
                status, _, html = http("GET", furl)
                token = token_of(html)
                check("page GET over plain HTTP has a token", status == 200 and token, status)
                attempts = [
                    ("no token", {"action": "approve"}, {}),
                    ("another page's token", {"action": "approve", "token": token_of(decoy_html)}, {}),
                    ("a made-up token", {"action": "approve", "token": "A" * 22}, {}),
                    ("another origin", {"action": "approve", "token": token}, {"Origin": "http://evil.example"}),
                ]
                for label, data, extra in attempts:
                    status, _, _ = http("POST", furl, data, extra)
                    check(f"forged POST ({label}): refused", status == 403, status)
                r = await s.call_tool("write_file", fargs)
                check(
                    "...after the forged POSTs the call is still not approved",
                    blocked_code(r) == "CONFIRMATION_REQUIRED",
                    r,
                )
                check("...nothing written", not forged.exists())
                status, _, html = http("GET", furl)
                token = token_of(html)
                # The link fetched again (a preview, the model, a second tab)
                # before the person answers on the page they have open.
                for _ in range(3):
                    http("GET", furl)
                status, _, _ = http("POST", furl, {"action": "approve", "token": token})
                check("the page's own POST approves, though the link was fetched again since", status == 200, status)
                r = await s.call_tool("write_file", fargs)
                check("...the retry runs", not r.isError and forged.read_text() == "forged\n", r)
                forged.unlink(missing_ok=True)
                status, _, _ = http("POST", furl, {"action": "approve", "token": token})
                check("a replayed POST: refused", status in (404, 410), status)
                r = await s.call_tool("write_file", fargs)
                check(
                    "...and the call does not run again",
                    blocked_code(r) == "CONFIRMATION_REQUIRED" and not forged.exists(),
                    r,
                )

                # The model's own confirmed: true.
                mine = root / "mine.txt"
                r = await s.call_tool("write_file", {"path": str(mine), "content": "m\n", "confirmed": True})
                check(
                    "the model's confirmed: true: blocked with a link",
                    blocked_code(r) == "CONFIRMATION_REQUIRED" and link_of(r),
                    r,
                )
                check("...nothing written", not mine.exists())

        # 2. --trust-model-confirmation: the model's word counts (opt-in).
        async with await stdio_session(root, audit, "--trust-model-confirmation") as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                mine = root / "trusted.txt"
                r = await s.call_tool("write_file", {"path": str(mine), "content": "t\n", "confirmed": True})
                check(
                    "with --trust-model-confirmation the model's confirmed: true runs",
                    not r.isError and mine.exists(),
                    r,
                )

        # 3. Expiry.
        async with await stdio_session(root, audit, "--confirm-ttl", "1") as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                late = root / "late.txt"
                largs = {"path": str(late), "content": "late\n"}
                r = await s.call_tool("write_file", largs)
                lurl = link_of(r)
                _, _, html = http("GET", lurl)
                token = token_of(html)
                await asyncio.sleep(1.3)
                status, _, _ = http("POST", lurl, {"action": "approve", "token": token})
                check("approve after --confirm-ttl: refused", status == 404, status)
                r = await s.call_tool("write_file", largs)
                check("...the retry is blocked", blocked_code(r) == "CONFIRMATION_REQUIRED" and not late.exists(), r)

        # 3b. What the pages keep is bounded: arguments past 64 KiB, or a
        # caller's 33rd link in a window, get no link (the engine's blocked
        # result alone), so no client fills the gateway's memory.
        async with await stdio_session(root, audit) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                big = root / "big.txt"
                r = await s.call_tool("write_file", {"path": str(big), "content": "b" * (64 * 1024)})
                check(
                    "arguments over 64 KiB: CONFIRMATION_REQUIRED without a link",
                    blocked_code(r) == "CONFIRMATION_REQUIRED" and link_of(r) is None,
                    r.content[1:] if len(r.content) > 1 else r,
                )
                r = await s.call_tool("write_file", {"path": str(big), "content": "b" * (60 * 1024)})
                check("...60 KiB still gets one", link_of(r) is not None, r.content[1:])
                linked = 1
                for i in range(40):
                    r = await s.call_tool("write_file", {"path": str(root / f"many-{i}.txt"), "content": f"{i}\n"})
                    if link_of(r) is None:
                        break
                    linked += 1
                check(
                    "a caller's 33rd link in a window: CONFIRMATION_REQUIRED without a link",
                    linked == 32 and blocked_code(r) == "CONFIRMATION_REQUIRED",
                    (linked, r),
                )
                check("...nothing written", not big.exists() and not (root / "many-0.txt").exists())

        # 4. Two replicas sharing a real redis-server.
        redis_port = free_port()
        redis = subprocess.Popen(
            [REDIS, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        replicas = []
        try:
            wait_port(redis_port)
            for name in ("a", "b"):
                port = free_port()
                proc = subprocess.Popen(
                    [
                        PROXY,
                        "--listen",
                        f"127.0.0.1:{port}",
                        "--audit",
                        str(audit),
                        "--store",
                        f"redis://127.0.0.1:{redis_port}",
                        "--",
                        NODE,
                        SERVER,
                        str(root),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=open(tmp / f"{name}.log", "w"),
                )
                replicas.append((proc, f"http://127.0.0.1:{port}/mcp"))
                wait_port(port)
            (_, url_a), (_, url_b) = replicas
            shared = root / "shared.txt"
            sargs = {"path": str(shared), "content": "shared\n"}

            async def call(url, arguments):
                async with streamablehttp_client(url) as (read, write, _):
                    async with ClientSession(read, write) as s:
                        await s.initialize()
                        return await s.call_tool("write_file", arguments)

            r = await call(url_a, sargs)
            link = link_of(r)
            check("replica A: a link on A's address", link and link.startswith(url_a.removesuffix("/mcp")), r)
            _, _, _, done = await browser.answer(link, "approve")
            check("approved on A's page", "Approved" in done, done)
            r = await call(url_b, sargs)
            check("retry on replica B: the write runs", not r.isError and shared.read_text() == "shared\n", r)
            shared.unlink(missing_ok=True)
            for label, url in [("A", url_a), ("B", url_b)]:
                r = await call(url, sargs)
                check(f"another retry on {label}: blocked", blocked_code(r) == "CONFIRMATION_REQUIRED", r)
            check("...nothing written again", not shared.exists())
        finally:
            for proc, _ in replicas:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            redis.terminate()

    await browser_pages(root)

    # 5. The audit lines: every event, the digest, no argument values.
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    events = {x.get("event") for x in lines if x.get("confirmation") == "approval"}
    check(
        "audit: link, shown, approved, denied, expired and consumed events",
        {"link", "shown", "approved", "denied", "expired", "consumed"} <= events,
        events,
    )
    page = [x for x in lines if x.get("outcome") == "page"]
    check(
        "audit: a person's acts on the page are page lines, no decision (decision null), about the blocked call",
        {x["event"] for x in page} == {"shown", "approved", "denied", "expired"}
        and all((x["decision"], x["code"]) == (None, "CONFIRMATION_REQUIRED") for x in page),
        page[:4],
    )
    check(
        "audit: approval lines carry the digest and id",
        all(x.get("digest", "").startswith("sha256:") and x.get("approval") for x in lines if x.get("event")),
        lines[:3],
    )
    text = audit.read_text()
    check("audit: no argument values", "exact" not in text and "wanted" not in text and "arguments" not in text)

    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


FETCH = """async ([url, body, session]) => {
    const headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"};
    if (session) { headers["mcp-session-id"] = session; headers["mcp-protocol-version"] = "2025-06-18"; }
    try {
        const r = await fetch(url, {method: "POST", headers, body: JSON.stringify(body)});
        return {status: r.status, session: r.headers.get("mcp-session-id"), text: await r.text()};
    } catch (e) {
        return {error: String(e)};
    }
}"""


async def browser_pages(root):
    """6. A web page calls the gateway from Chromium: a page of an
    --allow-origin origin gets its preflight answered and reads the answers
    (the session id too); a foreign page's request is stopped by the browser
    at the preflight. The pages are served on a loopback port under names
    Chromium resolves to it (so no Private Network Access rule is involved)."""
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<!doctype html><title>page</title>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    pages = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=pages.serve_forever, daemon=True).start()
    page_port = pages.server_address[1]
    port = free_port()
    gateway = subprocess.Popen(
        [
            PROXY,
            "--listen",
            f"127.0.0.1:{port}",
            "--allow-origin",
            "http://app.example.test:*",
            "--",
            NODE,
            SERVER,
            str(root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "page", "version": "0"}},
    }
    try:
        wait_port(port)
        async with Browser("--host-resolver-rules=MAP *.example.test 127.0.0.1") as browser:
            page = await browser.browser.new_page()
            await page.goto(f"http://app.example.test:{page_port}/")
            opened = await page.evaluate(FETCH, [url, initialize, None])
            check(
                "browser: an --allow-origin page's initialize is answered and it reads the session id",
                opened.get("status") == 200 and opened.get("session") and "serverInfo" in opened.get("text", ""),
                opened,
            )
            listing = await page.evaluate(
                FETCH, [url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, opened.get("session")]
            )
            check(
                "browser: ...and, after a preflight for its MCP headers, reads the tool list",
                listing.get("status") == 200 and "read_text_file" in listing.get("text", ""),
                listing,
            )
            # The same request from pages the gateway grants no CORS: a
            # foreign origin, and this machine's own (a local dev server
            # must not drive a gateway without --auth).
            for label, origin in [
                ("a foreign page", "http://evil.example.test"),
                ("a localhost page", "http://localhost"),
            ]:
                other = await browser.browser.new_page()
                await other.goto(f"{origin}:{page_port}/")
                refused = await other.evaluate(FETCH, [url, initialize, None])
                check(
                    f"browser: {label}'s request is stopped (CORS)",
                    "error" in refused and opened.get("session"),
                    refused,
                )
    finally:
        gateway.terminate()
        gateway.wait(10)
        pages.shutdown()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
