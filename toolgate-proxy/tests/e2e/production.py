"""`toolgate proxy` deployed as in production, end to end, with real things
only: bearer tokens signed by keys made here (RS256, ES256) and checked
against a JWKS file or a JWKS served over HTTP (refetched for an unknown
kid), the RFC 9728 metadata found by the official SDK's own OAuth code (and
a whole authorization-code flow through it), per-caller scopes, an upstream
over HTTPS with its own CA, headers and a token sent to it, the policy
re-read while calls run, shadow mode, Prometheus metrics and readiness, and
the refusal of an open listener without auth. The upstream is
upstream_server.py (the official Python SDK, `mcp` 2.3); every call it runs
is in its log, which is how "nothing reached the upstream" is checked.

Usage: production.py PROXY_BIN
"""

import asyncio
import base64
import contextlib
import datetime
import hashlib
import hmac
import http.server
import ipaddress
import json
import logging
import os
import re
import secrets
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import warnings
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    handle_protected_resource_response,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata, ProtectedResourceMetadata
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from mcp.types import ElicitResult, InputRequiredResult

from e2e_support import blocked_code, check, failures, free_port, wait_port

warnings.simplefilter("ignore")
HERE = Path(__file__).resolve().parent
UPSTREAM = HERE / "upstream_server.py"
AUDIENCE = "toolgate-e2e-gateway"
MODERN = "2026-07-28"

# ---------------------------------------------------------------------------
# Keys, JWKS, tokens


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
LATE_KEY = ec.generate_private_key(ec.SECP256R1())  # served only later (kid refetch)
STRAY_KEY = ec.generate_private_key(ec.SECP256R1())  # in no JWKS at all
RSA_PUBLIC_PEM = RSA_KEY.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
)


def jwk(public_key, kid, alg):
    algorithm = RSAAlgorithm if alg.startswith("RS") else ECAlgorithm
    key = algorithm.to_jwk(public_key, as_dict=True)
    key.update(kid=kid, alg=alg, use="sig")
    return key


JWK_RSA = jwk(RSA_KEY.public_key(), "rsa-1", "RS256")
JWK_EC = jwk(EC_KEY.public_key(), "ec-1", "ES256")
JWK_LATE = jwk(LATE_KEY.public_key(), "ec-late", "ES256")

KEYS = {
    "rsa-1": (RSA_KEY, "RS256"),
    "ec-1": (EC_KEY, "ES256"),
    "ec-late": (LATE_KEY, "ES256"),
    "stray": (STRAY_KEY, "ES256"),
}
ISSUER = ""  # set once the authorization server has its port


def claims_for(sub, *, scope=None, scp=None, iss=None, aud=AUDIENCE, exp_in=300, nbf_in=None, drop=()):
    now = int(time.time())
    claims = {"iss": iss or ISSUER, "aud": aud, "sub": sub, "iat": now, "exp": now + exp_in}
    if nbf_in is not None:
        claims["nbf"] = now + nbf_in
    if scope is not None:
        claims["scope"] = scope
    if scp is not None:
        claims["scp"] = scp
    for name in drop:
        claims.pop(name, None)
    return claims


def token(sub, *, kid="rsa-1", typ=None, **claims):
    key, alg = KEYS[kid]
    headers = {"kid": kid} if typ is None else {"kid": kid, "typ": typ}
    return jwt.encode(claims_for(sub, **claims), key, algorithm=alg, headers=headers)


def unsigned_token(header, claims, key=None):
    """A JWT built by hand (PyJWT refuses these): `alg: none`, or HS256
    keyed with `key` (the RSA public key's PEM: the algorithm confusion)."""
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    signature = "" if key is None else b64url(hmac.new(key, signing_input.encode(), hashlib.sha256).digest())
    return signing_input + "." + signature


def flipped(tok):
    head, body, sig = tok.split(".")
    raw = bytearray(unb64url(sig))
    raw[len(raw) // 2] ^= 0x01
    return f"{head}.{body}.{b64url(bytes(raw))}"


# ---------------------------------------------------------------------------
# Certificates (a CA and a server certificate for 127.0.0.1 / localhost)


def make_ca(name):
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def make_server_cert(ca_key, ca_cert):
    return make_leaf_cert(ca_key, ca_cert, "localhost", ExtendedKeyUsageOID.SERVER_AUTH)


def make_client_cert(ca_key, ca_cert):
    return make_leaf_cert(ca_key, ca_cert, "toolgate gateway", ExtendedKeyUsageOID.CLIENT_AUTH)


class ServerPki:
    """A CA and a server certificate it issued (localhost, 127.0.0.1), with
    the CA, the certificate and its key written to `TMP/{name}-ca.pem`,
    `{name}.pem` and `{name}-key.pem`."""

    def __init__(self, name):
        self.ca_key, self.ca_cert = make_ca(f"toolgate e2e {name} CA")
        self.leaf_key, self.leaf_cert = make_server_cert(self.ca_key, self.ca_cert)
        self.ca_pem, self.cert_pem, self.key_pem = (TMP / f"{name}{n}.pem" for n in ("-ca", "", "-key"))
        write_pem(self.ca_pem, cert=self.ca_cert)
        write_pem(self.cert_pem, cert=self.leaf_cert)
        write_pem(self.key_pem, key=self.leaf_key)


def make_leaf_cert(ca_key, ca_cert, name, usage):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if usage == ExtendedKeyUsageOID.SERVER_AUTH:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    cert = (
        builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def write_pem(path, cert=None, key=None):
    data = b""
    if cert is not None:
        data += cert.public_bytes(serialization.Encoding.PEM)
    if key is not None:
        data += key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    path.write_bytes(data)


# ---------------------------------------------------------------------------
# The authorization server: JWKS (with a hit counter), RFC 8414 metadata,
# dynamic registration, an authorize endpoint that approves at once, and a
# token endpoint that checks PKCE and signs an RS256 access token.


class AuthServer:
    def __init__(self):
        self.jwks = {"keys": [JWK_RSA, JWK_EC]}
        self.jwks_hits = 0
        self.last_hit = time.monotonic()
        self.codes = {}
        self.resources = []
        # RFC 7662: opaque tokens (token -> claims), the client allowed to
        # ask about them (id, secret), and the tokens asked about.
        self.opaque = {}
        self.introspection_client = None
        self.introspected = []
        self.lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *_args):
                pass

            def reply(self, status, body, headers=()):
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/jwks.json":
                    with server.lock:
                        server.jwks_hits += 1
                        server.last_hit = time.monotonic()
                        body = json.loads(json.dumps(server.jwks))
                    return self.reply(200, body)
                if url.path.startswith("/.well-known/oauth-authorization-server"):
                    return self.reply(200, server.metadata())
                if url.path == "/authorize":
                    q = dict(urllib.parse.parse_qsl(url.query))
                    code = secrets.token_urlsafe(16)
                    with server.lock:
                        server.codes[code] = q
                        server.resources.append(("authorize", q.get("resource")))
                    location = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q["state"]})
                    return self.reply(302, None, [("Location", location)])
                return self.reply(404, {"error": "not_found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/register":
                    meta = json.loads(raw)
                    meta.update(client_id="e2e-" + secrets.token_hex(4), client_id_issued_at=int(time.time()))
                    meta.setdefault("token_endpoint_auth_method", "none")
                    return self.reply(201, meta)
                if url.path == "/introspect":
                    expected = server.introspection_client
                    basic = (
                        "Basic " + base64.b64encode(f"{expected[0]}:{expected[1]}".encode()).decode()
                        if expected
                        else None
                    )
                    if basic is None or self.headers.get("Authorization") != basic:
                        return self.reply(401, {"error": "invalid_client"}, [("WWW-Authenticate", 'Basic realm="e2e"')])
                    form = dict(urllib.parse.parse_qsl(raw.decode()))
                    with server.lock:
                        server.introspected.append(form.get("token"))
                        claims = server.opaque.get(form.get("token", ""))
                    return self.reply(200, {"active": True, **claims} if claims else {"active": False})
                if url.path == "/token":
                    form = dict(urllib.parse.parse_qsl(raw.decode()))
                    with server.lock:
                        grant = server.codes.pop(form.get("code", ""), None)
                        server.resources.append(("token", form.get("resource")))
                    verifier = form.get("code_verifier", "")
                    if grant is None or b64url(hashlib.sha256(verifier.encode()).digest()) != grant["code_challenge"]:
                        return self.reply(400, {"error": "invalid_grant"})
                    scope = grant.get("scope", "")
                    access = token("oauth-user", scope=scope)
                    return self.reply(
                        200, {"access_token": access, "token_type": "Bearer", "expires_in": 300, "scope": scope}
                    )
                return self.reply(404, {"error": "not_found"})

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def metadata(self):
        return {
            "issuer": self.base,
            "authorization_endpoint": self.base + "/authorize",
            "token_endpoint": self.base + "/token",
            "registration_endpoint": self.base + "/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
        }

    def hits(self):
        with self.lock:
            return self.jwks_hits

    def serve_key(self, key):
        with self.lock:
            self.jwks = {"keys": [*self.jwks["keys"], key]}


# ---------------------------------------------------------------------------
# Processes: the upstream's command, gateways, their files


class Gateway:
    """One `toolgate proxy` process with `--listen` on a free port (reached
    over loopback), its stdout and stderr in files."""

    def __init__(self, name, *flags, upstream_args=None, env=None, cwd=None, host="127.0.0.1", wait=True):
        self.name = name
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = self.base + "/mcp"
        self.stderr_path = TMP / f"{name}.stderr"
        self.stdout_path = TMP / f"{name}.stdout"
        argv = [PROXY, "--listen", f"{host}:{self.port}", *map(str, flags)]
        if upstream_args is not None:
            argv += ["--", *upstream_args]
        self.argv = argv
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=open(self.stdout_path, "wb"),
            stderr=open(self.stderr_path, "wb"),
            env=dict(os.environ, **(env or {})),
            cwd=cwd,
        )
        GATEWAYS.append(self)
        self.up = None
        if wait:
            self.wait()

    def wait(self, timeout=20):
        """Whether the listen port opened (a gateway that exits instead is
        reported by the checks that use it, with its stderr)."""
        deadline = time.monotonic() + timeout
        self.up = False
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                wait_port(self.port, 0.2)
                self.up = True
                break
            except RuntimeError:
                pass
        return self.up

    def stderr(self):
        return self.stderr_path.read_text(errors="replace")

    def stdout(self):
        return self.stdout_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def auth_flags(jwks):
    return ["--auth", "jwt", "--jwks", str(jwks), "--issuer", ISSUER, "--audience", AUDIENCE]


def exits(argv, timeout=8, env=None):
    """Runs a command expected to exit at once: (exit code or "still running", stderr)."""
    with tempfile.TemporaryFile() as err:
        full_env = {**os.environ, **env} if env else None
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=full_env)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            code = "still running"
        err.seek(0)
        return code, err.read().decode(errors="replace")


def upstream_cmd(log, notes, *extra):
    return [sys.executable, str(UPSTREAM), "--log", str(log), "--notes", str(notes), *map(str, extra)]


def log_entries(log):
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def ran(log, tool, **arguments):
    """The upstream's log lines for calls of `tool` whose arguments include these."""
    return [
        e
        for e in log_entries(log)
        if e.get("tool") == tool
        and e.get("phase", "start") == "start"
        and all(e["arguments"].get(k) == v for k, v in arguments.items())
    ]


def audit_lines(path):
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def write_atomically(path, text):
    """Replace the file in one rename, as editors do, so a poll never reads
    half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# HTTP and MCP helpers


LEGACY = "2025-06-18"
BASE_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def legacy_initialize(name):
    """A handshake-era `initialize` as one raw POST body (it opens a session)."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": name, "version": "0"}},
    }


class RawLegacySession:
    """A handshake-era session driven with plain HTTP requests, so each
    answer's HTTP status is seen as sent."""

    def __init__(self, http, url, session):
        self.http, self.url, self.session, self.next_id = http, url, session, 2

    def headers(self):
        return {**BASE_HEADERS, "Mcp-Session-Id": self.session or "", "MCP-Protocol-Version": LEGACY}

    async def call(self, tool, arguments):
        self.next_id += 1
        body = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        return await self.http.post(self.url, json=body, headers=self.headers())


async def raw_legacy_session(http, url, name):
    r = await http.post(url, json=legacy_initialize(name), headers=BASE_HEADERS)
    session = RawLegacySession(http, url, r.headers.get("mcp-session-id"))
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session.headers())
    return session


async def session_owner(gw, alice, bob):
    legacy, base, initialize = LEGACY, BASE_HEADERS, legacy_initialize("alice")
    async with http_client() as http:
        r = await http.post(gw.url, json=initialize, headers={**base, "Authorization": f"Bearer {alice}"})
        session = r.headers.get("mcp-session-id")
        check("alice opens a handshake-era session", r.status_code == 200 and session, (r.status_code, r.text[:300]))
        if not session:
            return

        def on(tok, **extra):
            return {
                **base,
                "Authorization": f"Bearer {tok}",
                "Mcp-Session-Id": session,
                "MCP-Protocol-Version": legacy,
                **extra,
            }

        await http.post(gw.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=on(alice))
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        r_bob = await http.post(gw.url, json=listing, headers=on(bob))
        check(
            "bob's tools/list on alice's session: 404", r_bob.status_code == 404, (r_bob.status_code, r_bob.text[:300])
        )
        try:
            # Allowed, this would be her event stream, which never ends.
            g_bob = await asyncio.wait_for(
                http.get(gw.url, headers=on(bob, Accept="text/event-stream", **{"Last-Event-ID": "0/0"})), 5
            )
            resumed = g_bob.status_code
        except (TimeoutError, asyncio.TimeoutError):
            resumed = "an open stream"
        check("bob's GET (resume) on alice's session: 404", resumed == 404, resumed)
        d_bob = await http.delete(gw.url, headers=on(bob))
        check("bob's DELETE of alice's session: 404", d_bob.status_code == 404, d_bob.status_code)
        r_alice = await http.post(gw.url, json=listing, headers=on(alice))
        message = rpc_message(r_alice)
        check(
            "...and alice's session still answers her",
            r_alice.status_code == 200 and "tools" in message.get("result", {}),
            (r_alice.status_code, r_alice.text[:300]),
        )
        d_alice = await http.delete(gw.url, headers=on(alice))
        check("alice closes her own session", d_alice.status_code == 200, d_alice.status_code)
        # A DELETE tells nothing of which ids are live: a closed or unknown
        # one gets the 404 another caller's session gets (review 28: 200).
        again = await http.delete(gw.url, headers=on(alice))
        unknown = await http.delete(gw.url, headers={**on(bob), "Mcp-Session-Id": "no-such-session"})
        check(
            "a DELETE of a closed or an unknown session: 404, as another caller's",
            (again.status_code, unknown.status_code) == (404, 404),
            (again.status_code, unknown.status_code),
        )


async def jwks_max_age():
    """A key the issuer took out of its set stops vouching for tokens once
    the set in hand is --jwks-max-age old, though no token named an unknown
    key; a plain-http JWKS URL off this machine is refused at start."""
    log = TMP / "k-upstream.jsonl"
    policy = TMP / "k-policy.yaml"
    policy.write_text(POLICY)
    jwks = TMP / "k-jwks.json"
    jwks.write_text(json.dumps({"keys": [JWK_RSA, JWK_EC]}))
    code, err = exits(
        [
            PROXY,
            "--listen",
            f"127.0.0.1:{free_port()}",
            *auth_flags("http://keys.example/jwks.json"),
            "--",
            *upstream_cmd(log, TMP),
        ]
    )
    check(
        "--jwks over plain http to another machine: usage error (64)", code == 64 and "https" in err, (code, err[-300:])
    )

    gw = Gateway(
        "k",
        *auth_flags(jwks),
        "--jwks-max-age",
        "2",
        "--policy",
        policy,
        upstream_args=upstream_cmd(log, TMP / "notes-k"),
    )
    check("gateway with --jwks-max-age 2 starts", gw.up, gw.stderr()[-500:])
    async with http_client() as http:
        before = await post_call(
            http, gw.url, "read_note", {"name": "k-before"}, tok=token("alice", scope="notes:read")
        )
        check("a token signed with rsa-1: 200", before.status_code == 200, (before.status_code, before.text[:300]))
        write_atomically(jwks, json.dumps({"keys": [JWK_EC]}))
        await asyncio.sleep(3)
        # The first request past the max age starts the refetch beside itself
        # and goes on with the keys in hand; the set (a file) is read at once.
        trigger = await post_call(
            http, gw.url, "read_note", {"name": "k-trigger"}, tok=token("bob", kid="ec-1", scope="notes:read")
        )
        check("the request past the max age is served meanwhile", trigger.status_code == 200, trigger.status_code)
        await asyncio.sleep(0.5)
        after = await post_call(http, gw.url, "read_note", {"name": "k-after"}, tok=token("alice", scope="notes:read"))
        check(
            "rsa-1 taken out of the set, the set in hand 2 s old: a fresh rsa-1 token is 401",
            after.status_code == 401,
            (after.status_code, after.text[:300]),
        )
        ec = await post_call(
            http, gw.url, "read_note", {"name": "k-ec"}, tok=token("bob", kid="ec-1", scope="notes:read")
        )
        check("...while a token signed with the key still published is 200", ec.status_code == 200, ec.status_code)
        check("...and the refused call reached nothing", not ran(log, "read_note", name="k-after"))
    gw.stop()


def http_client(**kw):
    return httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60), trust_env=False, **kw)


@asynccontextmanager
async def mcp_client(url, tok=None, mode="auto", **kw):
    headers = {"Authorization": f"Bearer {tok}"} if tok else {}
    async with (
        http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **kw) as client,
    ):
        yield client


def raw_call(tool, arguments, id_=1):
    """A 2026-07-28 tools/call as one stateless POST (what `Client(mode=...)`
    sends), so a token's fate is the only thing that decides whether it runs."""
    body = {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    return body, headers


async def post_call(http, url, tool, arguments, tok=None, raw_auth=None):
    body, headers = raw_call(tool, arguments)
    if raw_auth is not None:
        headers["Authorization"] = raw_auth
    elif tok is not None:
        headers["Authorization"] = f"Bearer {tok}"
    return await http.post(url, json=body, headers=headers)


def rpc_message(response):
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return {}


def auth_params(header):
    """The auth-params of a `Bearer` challenge as a dict (quoted values)."""
    return dict(re.findall(r'([A-Za-z_]+)="([^"]*)"', header or ""))


def error_text(exc):
    """Every message in an exception and its causes and groups."""
    parts = [f"{type(exc).__name__}: {exc}"]
    for inner in getattr(exc, "exceptions", ()) or ():
        parts.append(error_text(inner))
    if exc.__cause__ is not None:
        parts.append(error_text(exc.__cause__))
    if exc.__context__ is not None and exc.__context__ is not exc.__cause__:
        parts.append(error_text(exc.__context__))
    error = getattr(exc, "error", None)
    if error is not None:
        parts.append(str(getattr(error, "message", "")) + " " + str(getattr(error, "data", "")))
    return " | ".join(parts)


def tool_names(result):
    return sorted(t.name for t in result.tools)


class SessionCloseWarnings(logging.Handler):
    """Collects the official client's warnings about closing a session."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []
        self.logger = logging.getLogger("mcp.client.streamable_http")
        self.logger.addHandler(self)

    def emit(self, record):
        message = record.getMessage()
        if "Session termination" in message:
            self.messages.append(message)

    def detach(self):
        self.logger.removeHandler(self)


async def wait_for(predicate, timeout=10.0, step=0.05):
    """Polls `predicate` (plain or async) until it holds or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value or time.monotonic() > deadline:
            return bool(value)
        await asyncio.sleep(step)


def metric_samples(text, name):
    """{frozenset(labels): value} for one metric name in Prometheus text."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[labels] = float(m.group(3))
    return out


POLICY = """\
version: 1
defaults:
  operation_type: transactional
tool_policies:
  read_note:
    operation_type: read_only
    scopes: ["notes:read"]
  slow:
    operation_type: read_only
    scopes: ["notes:read"]
  write_note:
    operation_type: transactional
  admin_reset:
    operation_type: transactional
    require_confirmation: false
    scopes: ["admin"]
"""


# ---------------------------------------------------------------------------
# 1-5: inbound auth on one gateway (JWKS file), per-caller scopes, 401/403,
# RFC 9728 metadata and the SDK's OAuth discovery and flow.


async def inbound_auth(auth_server):
    log = TMP / "a-upstream.jsonl"
    audit = TMP / "a-audit.jsonl"
    policy = TMP / "a-policy.yaml"
    policy.write_text(POLICY)
    jwks = TMP / "jwks.json"
    jwks.write_text(json.dumps({"keys": [JWK_RSA, JWK_EC]}))
    # --scopes (static grants) with --auth: a usage error.
    code, err = exits(
        [
            PROXY,
            "--listen",
            f"127.0.0.1:{free_port()}",
            *auth_flags(jwks),
            "--scopes",
            "admin",
            "--",
            *upstream_cmd(log, TMP),
        ]
    )
    check("--scopes together with --auth: usage error (64)", code == 64, (code, err[-300:]))

    flags = [*auth_flags(jwks), "--require-scope", "notes:read", "--policy", policy, "--audit", audit]
    gw = Gateway("a", *flags, upstream_args=upstream_cmd(log, TMP / "notes-a"))
    check("gateway with --auth jwt --jwks FILE starts", gw.up, gw.stderr()[-500:])
    prm_url = gw.base + "/.well-known/oauth-protected-resource/mcp"
    async with http_client() as http:
        # RFC 9728 metadata, no auth needed, at both well-known places.
        r = await http.get(prm_url)
        doc = r.json() if r.status_code == 200 else {}
        check(
            "PRM: GET /.well-known/oauth-protected-resource/mcp without a token -> 200 JSON",
            r.status_code == 200 and r.headers.get("content-type", "").startswith("application/json"),
            (r.status_code, r.text[:300]),
        )
        check("PRM: resource = http://ADDR/mcp (the default)", doc.get("resource") == gw.url, doc)
        check("PRM: authorization_servers = [issuer]", doc.get("authorization_servers") == [ISSUER], doc)
        check("PRM: bearer_methods_supported = [header]", doc.get("bearer_methods_supported") == ["header"], doc)
        check("PRM: scopes_supported = the --require-scope values", doc.get("scopes_supported") == ["notes:read"], doc)
        check("PRM: resource_name is a string", isinstance(doc.get("resource_name"), str) and doc["resource_name"], doc)
        root_doc = await http.get(gw.base + "/.well-known/oauth-protected-resource")
        check(
            "PRM: also at /.well-known/oauth-protected-resource, same document",
            root_doc.status_code == 200 and root_doc.json() == doc,
            (root_doc.status_code, root_doc.text[:300]),
        )

        # No token: 401, a challenge that points at the metadata, no error code.
        r = await post_call(http, gw.url, "read_note", {"name": "probe-none"})
        challenge = r.headers.get("www-authenticate", "")
        params = auth_params(challenge)
        check("no token: HTTP 401", r.status_code == 401, (r.status_code, r.text[:200]))
        check(
            'no token: WWW-Authenticate: Bearer resource_metadata="<base>/.well-known/oauth-protected-resource/mcp"',
            challenge.startswith("Bearer ") and params.get("resource_metadata") == prm_url and "error" not in params,
            challenge,
        )
        try:
            body = r.json()
        except ValueError:
            body = {}
        check(
            "no token: JSON body with error and error_description",
            isinstance(body.get("error"), str) and isinstance(body.get("error_description"), str),
            r.text[:300],
        )

        # 5. The SDK's own discovery, on the real 401 and the real document.
        found = extract_resource_metadata_from_www_auth(r)
        check("SDK: extract_resource_metadata_from_www_auth reads the 401's challenge", found == prm_url, found)
        urls = build_protected_resource_metadata_discovery_urls(found, gw.url)
        check(
            "SDK: discovery URLs start with the challenge's, then the path-based well-known",
            urls[:2] == [prm_url, prm_url],
            urls,
        )
        prm = None
        for url in urls:
            prm = await handle_protected_resource_response(await http.get(url))
            if prm:
                break
        check(
            "SDK: handle_protected_resource_response parses the document (ProtectedResourceMetadata)",
            isinstance(prm, ProtectedResourceMetadata),
            prm,
        )
        if isinstance(prm, ProtectedResourceMetadata):
            check(
                "SDK: the resource is allowed for this server URL (RFC 8707 check)",
                check_resource_allowed(resource_url_from_server_url(gw.url), str(prm.resource)),
                prm.resource,
            )
            check(
                "SDK: authorization server = the issuer",
                [str(u) for u in prm.authorization_servers] == [ISSUER],
                prm.authorization_servers,
            )

        # 4. Tokens that must never pass: 401, invalid_token, nothing upstream.
        alice = token("alice", scope="notes:read")

        bad = {
            "expired (2 min ago, past the 60 s leeway)": token("alice", scope="notes:read", exp_in=-120),
            "wrong audience": token("alice", scope="notes:read", aud="someone-else"),
            "wrong issuer": token("alice", scope="notes:read", iss="https://evil.example"),
            "not yet valid (nbf in 5 min)": token("alice", scope="notes:read", nbf_in=300),
            "no exp": token("alice", scope="notes:read", drop=("exp",)),
            "no iss": token("alice", scope="notes:read", drop=("iss",)),
            "no aud": token("alice", scope="notes:read", drop=("aud",)),
            "unknown kid": token("alice", kid="stray", scope="notes:read"),
            "an ID token (typ id_token+jwt), not an access token": token(
                "alice", typ="id_token+jwt", scope="notes:read"
            ),
            "alg none": unsigned_token(
                {"alg": "none", "typ": "JWT", "kid": "rsa-1"}, claims_for("alice", scope="notes:read")
            ),
            "alg none, no kid": unsigned_token({"alg": "none", "typ": "JWT"}, claims_for("alice", scope="notes:read")),
            "HS256 keyed with the RSA public key PEM": unsigned_token(
                {"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, claims_for("alice", scope="notes:read"), RSA_PUBLIC_PEM
            ),
            "a flipped signature byte": flipped(alice),
            "a token for kid rsa-1 signed by another key": jwt.encode(
                claims_for("alice", scope="notes:read"), STRAY_KEY, algorithm="ES256", headers={"kid": "rsa-1"}
            ),
            # RFC 7515 §4.1.11: an extension marked critical that the
            # gateway does not understand (review 22: accepted).
            "signed, with a crit extension": jwt.encode(
                claims_for("alice", scope="notes:read"),
                KEYS["rsa-1"][0],
                algorithm=KEYS["rsa-1"][1],
                headers={"kid": "rsa-1", "crit": ["r22"], "r22": "x"},
            ),
            "garbage": "not.a.jwt",
        }
        probes = {}
        for i, (label, tok) in enumerate(bad.items()):
            name = f"probe-bad-{i}"
            probes[name] = label
            r = await post_call(http, gw.url, "read_note", {"name": name}, tok=tok)
            params = auth_params(r.headers.get("www-authenticate", ""))
            try:
                body = r.json()
            except ValueError:
                body = {}
            check(
                f"401 for {label}: invalid_token challenge, metadata link, JSON body",
                r.status_code == 401
                and r.headers.get("www-authenticate", "").startswith("Bearer ")
                and params.get("error") == "invalid_token"
                and params.get("error_description")
                and params.get("resource_metadata") == prm_url
                and body.get("error") == "invalid_token"
                and isinstance(body.get("error_description"), str),
                (r.status_code, r.headers.get("www-authenticate"), r.text[:200]),
            )
        for scheme_label, header in [("Basic scheme", "Basic YWxpY2U6c2VjcmV0"), ("empty Bearer", "Bearer")]:
            name = f"probe-{scheme_label.replace(' ', '-')}"
            probes[name] = scheme_label
            r = await post_call(http, gw.url, "read_note", {"name": name}, raw_auth=header)
            check(f"401 for {scheme_label}", r.status_code == 401, (r.status_code, r.text[:200]))
        # Inside the 60 s leeway: still accepted (and runs).
        r = await post_call(
            http, gw.url, "read_note", {"name": "probe-leeway"}, tok=token("alice", scope="notes:read", exp_in=-30)
        )
        check(
            "exp 30 s ago (inside the 60 s leeway): accepted",
            r.status_code == 200 and "result" in rpc_message(r),
            (r.status_code, r.text[:200]),
        )
        # The positive control: the same raw request with a good token runs.
        r = await post_call(http, gw.url, "read_note", {"name": "probe-valid"}, tok=alice)
        check(
            "a valid RS256 token: the same raw call runs",
            r.status_code == 200 and "result" in rpc_message(r),
            (r.status_code, r.text[:300]),
        )
        check("...seen on the upstream", len(ran(log, "read_note", name="probe-valid")) == 1, log_entries(log)[-3:])
        leaked = [
            probes[e["arguments"]["name"]] for e in log_entries(log) if e.get("arguments", {}).get("name") in probes
        ]
        check("none of the refused requests reached the upstream", not leaked, leaked)

        # 403: a valid token without the --require-scope scope.
        r = await post_call(http, gw.url, "read_note", {"name": "probe-403"}, tok=token("mallory", scope="profile"))
        params = auth_params(r.headers.get("www-authenticate", ""))
        check(
            'valid token lacking --require-scope: 403 insufficient_scope, scope="notes:read", metadata link',
            r.status_code == 403
            and r.headers.get("www-authenticate", "").startswith("Bearer ")
            and params.get("error") == "insufficient_scope"
            and params.get("scope") == "notes:read"
            and params.get("resource_metadata") == prm_url,
            (r.status_code, r.headers.get("www-authenticate")),
        )
        check(
            "SDK: extract_scope_from_www_auth reads the 403's scope",
            extract_scope_from_www_auth(r) == "notes:read",
            r.headers.get("www-authenticate"),
        )
        check("...and the 403'd call did not reach the upstream", not ran(log, "read_note", name="probe-403"))

    # 3. Two callers, two catalogs, two decisions for the same call.
    bob = token("bob", kid="ec-1", scp=["notes:read", "admin"])  # ES256, `scp` as an array
    carol = token("carol", kid="ec-1", scp="notes:read admin")  # `scp` as a string
    alice = token("alice", scope="notes:read")
    async with mcp_client(gw.url, alice) as c:
        alice_tools = tool_names(await c.list_tools())
        r_alice = await c.call_tool("admin_reset", {"reason": "alice-tries"})
    async with mcp_client(gw.url, bob) as c:
        bob_tools = tool_names(await c.list_tools())
        r_bob = await c.call_tool("admin_reset", {"reason": "bob-resets"})
    async with mcp_client(gw.url, carol, mode="legacy") as c:
        carol_tools = tool_names(await c.list_tools())
    check(
        'alice (scope "notes:read"): tools/list without admin_reset',
        "admin_reset" not in alice_tools and "read_note" in alice_tools,
        alice_tools,
    )
    check("bob (ES256, scp [notes:read, admin]): tools/list with admin_reset", "admin_reset" in bob_tools, bob_tools)
    check(
        'carol (scp "notes:read admin" as a string): tools/list with admin_reset',
        "admin_reset" in carol_tools,
        carol_tools,
    )
    check("alice's admin_reset: SCOPE_DENIED", blocked_code(r_alice) == "SCOPE_DENIED", r_alice)
    check("...not run on the upstream", not ran(log, "admin_reset", reason="alice-tries"))
    check("bob's admin_reset: runs", blocked_code(r_bob) is None and not r_bob.is_error, r_bob)
    check("...run once on the upstream", len(ran(log, "admin_reset", reason="bob-resets")) == 1, log_entries(log)[-3:])

    # A handshake-era session is its opener's: bob, with a good token and
    # alice's Mcp-Session-Id, can neither resume her stream (and read her
    # results or her confirmation prompts), nor post on it, nor close it.
    await session_owner(gw, alice, bob)

    # The caller in the confirmation seal: alice's sealed write is not bob's.
    async def accept(_ctx, _params):
        return ElicitResult(action="accept", content={})

    args = {"name": "sealed", "text": "by alice"}
    answers = {"toolgate_confirm": ElicitResult(action="accept", content={})}
    async with mcp_client(gw.url, alice, mode=MODERN, elicitation_callback=accept) as c:
        leg1 = await c.session.call_tool("write_note", args, allow_input_required=True)
    state = getattr(leg1, "request_state", None)
    check(
        "alice's write: input_required with a sealed requestState",
        isinstance(leg1, InputRequiredResult) and state,
        leg1,
    )
    if isinstance(leg1, InputRequiredResult):
        responses = {key: answers["toolgate_confirm"] for key in leg1.input_requests} or answers
        async with mcp_client(gw.url, bob, mode=MODERN, elicitation_callback=accept) as c:
            stolen = await c.session.call_tool(
                "write_note", args, input_responses=responses, request_state=state, allow_input_required=True
            )
        check(
            "bob retries with alice's requestState: CONFIRMATION_INVALID",
            blocked_code(stolen) == "CONFIRMATION_INVALID",
            stolen,
        )
        check("...nothing written", not ran(log, "write_note", name="sealed"))
        async with mcp_client(gw.url, alice, mode=MODERN, elicitation_callback=accept) as c:
            own = await c.session.call_tool(
                "write_note", args, input_responses=responses, request_state=state, allow_input_required=True
            )
        check(
            "alice retries with her own requestState: the write runs",
            blocked_code(own) is None and not own.is_error,
            own,
        )
        check("...once on the upstream", len(ran(log, "write_note", name="sealed")) == 1)

    # The official client's OAuth support, end to end: 401 -> PRM -> AS
    # metadata -> registration -> authorize (PKCE) -> token -> the call.
    await oauth_flow(gw, auth_server, log)

    # Audit: every line names its caller (the token's sub).
    lines = audit_lines(audit)
    by = {(x.get("tool"), x.get("caller"), x.get("code")) for x in lines}
    check(
        "audit: alice's admin_reset line has caller alice, SCOPE_DENIED",
        ("admin_reset", "alice", "SCOPE_DENIED") in by,
        lines[-6:],
    )
    check("audit: bob's admin_reset line has caller bob, allowed", ("admin_reset", "bob", None) in by, lines[-6:])
    check(
        "audit: every decision line names a caller",
        lines and all(isinstance(x.get("caller"), str) and x["caller"] for x in lines),
        [x for x in lines if not x.get("caller")][:3],
    )
    return gw


async def oauth_flow(gw, auth_server, log):
    class Memory:
        tokens = None
        info = None

        async def get_tokens(self):
            return self.tokens

        async def set_tokens(self, tokens):
            self.tokens = tokens

        async def get_client_info(self):
            return self.info

        async def set_client_info(self, info):
            self.info = info

    redirect = {}

    async def redirect_handler(url):
        async with http_client() as http:
            r = await http.get(url)
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(r.headers.get("location", "")).query))
        redirect.update(q)

    async def callback_handler():
        return AuthorizationCodeResult(code=redirect.get("code", ""), state=redirect.get("state"))

    provider = OAuthClientProvider(
        server_url=gw.url,
        client_metadata=OAuthClientMetadata(
            client_name="toolgate-e2e",
            redirect_uris=["http://127.0.0.1:9/callback"],
            grant_types=["authorization_code"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=Memory(),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    try:
        async with (
            http_client(auth=provider) as http,
            Client(streamable_http_client(gw.url, http_client=http), mode="auto") as c,
        ):
            names = tool_names(await c.list_tools())
            r = await c.call_tool("read_note", {"name": "probe-oauth"})
        ok, detail = True, names
    except Exception as e:
        ok, detail, names, r = False, error_text(e), [], None
    check(
        "SDK OAuthClientProvider: 401 -> PRM -> AS -> token -> tools/list through the gateway",
        ok and "read_note" in names,
        detail,
    )
    check(
        "...the token asked for the PRM's scopes_supported and carried the PRM resource (RFC 8707)",
        provider.context.client_metadata.scope == "notes:read"
        and ("authorize", gw.url) in auth_server.resources
        and ("token", gw.url) in auth_server.resources,
        (provider.context.client_metadata.scope, auth_server.resources),
    )
    check(
        "...and its call ran",
        r is not None and blocked_code(r) is None and len(ran(log, "read_note", name="probe-oauth")) == 1,
        r,
    )


# ---------------------------------------------------------------------------
# 4b. JWKS over HTTP: an unknown kid refetches (at most once per 10 s), and a
# key published later becomes accepted.


async def jwks_url_start(auth_server):
    log = TMP / "b-upstream.jsonl"
    resource = "https://gateway.example.test/mcp"
    # The set in hand never ages out during the run (the fetch counts below
    # are about unknown kids; "JWKS max age" tests the age).
    flags = [*auth_flags(auth_server.base + "/jwks.json"), "--resource", resource, "--jwks-max-age", "3600"]
    gw = Gateway("b", *flags, upstream_args=upstream_cmd(log, TMP / "notes-b"))
    check("gateway with --jwks URL starts", gw.up, gw.stderr()[-500:])
    async with http_client() as http:
        doc = (await http.get(gw.base + "/.well-known/oauth-protected-resource/mcp")).json()
        check("JWKS URL gateway: PRM resource = --resource", doc.get("resource") == resource, doc)
        r = await http.get(gw.url, headers={"Accept": "text/event-stream"})
        check(
            "JWKS URL gateway: challenge names the --resource's metadata? (resource_metadata points at this gateway)",
            r.status_code == 401
            and auth_params(r.headers.get("www-authenticate"))
            .get("resource_metadata", "")
            .endswith("/.well-known/oauth-protected-resource/mcp"),
            (r.status_code, r.headers.get("www-authenticate")),
        )
        r = await post_call(http, gw.url, "read_note", {"name": "b-known"}, tok=token("alice", kid="rsa-1"))
        check(
            "JWKS URL: a token for a served kid (RS256) runs",
            r.status_code == 200 and "result" in rpc_message(r),
            (r.status_code, r.text[:300]),
        )
        r = await post_call(http, gw.url, "read_note", {"name": "b-known-ec"}, tok=token("bob", kid="ec-1"))
        check(
            "JWKS URL: a token for a served kid (ES256) runs",
            r.status_code == 200 and "result" in rpc_message(r),
            (r.status_code, r.text[:300]),
        )
        check("JWKS URL: fetched at least once", auth_server.hits() >= 1, auth_server.hits())
    return gw, log


async def jwks_url_unknown(auth_server, gw, log):
    # 10 s after the last fetch, whatever started it (so the test holds
    # whether or not the first fetch counts toward the refetch limit).
    wait = 10.5 - (time.monotonic() - auth_server.last_hit)
    if wait > 0:
        await asyncio.sleep(wait)
    async with http_client() as http:
        before = auth_server.hits()
        r = await post_call(http, gw.url, "read_note", {"name": "b-late-1"}, tok=token("dave", kid="ec-late"))
        after_unknown = auth_server.hits()
        check("unknown kid: 401", r.status_code == 401, (r.status_code, r.text[:200]))
        check("unknown kid: the gateway refetched the JWKS once", after_unknown == before + 1, (before, after_unknown))
        refetched_at = time.monotonic()
        # Published now, but asked again within 10 s: no second fetch yet.
        auth_server.serve_key(JWK_LATE)
        r = await post_call(http, gw.url, "read_note", {"name": "b-late-2"}, tok=token("dave", kid="ec-late"))
        r2 = await post_call(http, gw.url, "read_note", {"name": "b-late-3"}, tok=token("dave", kid="stray"))
        check(
            "within 10 s of a refetch: no other fetch for unknown kids (401 still)",
            auth_server.hits() == after_unknown and r.status_code == 401 and r2.status_code == 401,
            (auth_server.hits(), after_unknown, r.status_code, r2.status_code),
        )
    return refetched_at


async def jwks_url_later(auth_server, gw, log, refetched_at):
    wait = 10.6 - (time.monotonic() - refetched_at)
    if wait > 0:
        await asyncio.sleep(wait)
    before = auth_server.hits()
    async with http_client() as http:
        r = await post_call(http, gw.url, "read_note", {"name": "b-late-4"}, tok=token("dave", kid="ec-late"))
    check(
        "10 s later: the key published since is fetched and the token accepted",
        r.status_code == 200 and "result" in rpc_message(r) and auth_server.hits() == before + 1,
        (r.status_code, r.text[:200], before, auth_server.hits()),
    )
    late = [e["arguments"]["name"] for e in log_entries(log) if e.get("tool") == "read_note"]
    check("...the upstream saw the accepted calls only", late == ["b-known", "b-known-ec", "b-late-4"], late)


# ---------------------------------------------------------------------------
# 6. The upstream over HTTPS: its CA, headers and a token sent, TLS failures.


def start_https_upstream(name, log, cert, key, *extra, env=None):
    """upstream_server.py over TLS on a free port, `env` added to its
    environment: (process, port)."""
    port = free_port()
    upstream = subprocess.Popen(
        upstream_cmd(log, TMP / f"notes-{name}", "--http", port, "--certfile", cert, "--keyfile", key, *extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(TMP / f"{name}-upstream.stderr", "wb"),
        env={**os.environ, **(env or {})},
    )
    PROCS.append(upstream)
    wait_port(port, 20)
    return upstream, port


async def list_outcome(gw):
    """ "connected" when a (legacy) client lists tools through `gw`, else every message of its error."""
    try:
        async with mcp_client(gw.url, mode="legacy") as c:
            await c.list_tools()
        return "connected"
    except Exception as e:
        return error_text(e)


async def lists_and_reads(gw, log, note, label):
    """Through `gw`: tools/list shows read_note, and reading `note` runs on the upstream (`log`)."""
    try:
        async with mcp_client(gw.url) as c:
            names = tool_names(await c.list_tools())
            r = await c.call_tool("read_note", {"name": note})
        ok, detail = True, names
    except Exception as e:
        ok, detail, names, r = False, error_text(e), [], None
    check(f"{label}: tools/list through the gateway", ok and "read_note" in names, detail)
    check(
        "...a read call runs on the upstream",
        r is not None and blocked_code(r) is None and ran(log, "read_note", name=note),
        r,
    )


async def tls_upstream():
    ca_key, ca_cert = make_ca("toolgate e2e CA")
    _, other_ca = make_ca("some other CA")
    leaf_key, leaf_cert = make_server_cert(ca_key, ca_cert)
    ca_pem, wrong_pem, cert_pem, key_pem = (TMP / n for n in ("ca.pem", "wrong-ca.pem", "server.pem", "server-key.pem"))
    write_pem(ca_pem, cert=ca_cert)
    write_pem(wrong_pem, cert=other_ca)
    write_pem(cert_pem, cert=leaf_cert)
    write_pem(key_pem, key=leaf_key)
    log = TMP / "tls-upstream.jsonl"
    upstream, port = start_https_upstream("tls", log, cert_pem, key_pem)
    url = f"https://127.0.0.1:{port}/mcp"
    api_key = "k-" + secrets.token_hex(12)
    bearer = "t-" + secrets.token_hex(12)
    env = {"E2E_API_KEY": api_key, "E2E_UPSTREAM_TOKEN": bearer, "RUST_LOG": "debug"}
    headers = ["--upstream-header", "X-Api-Key: ${E2E_API_KEY}", "--upstream-header", "X-Static: plain-value"]
    gw = Gateway(
        "tls",
        "--upstream",
        url,
        "--upstream-ca",
        ca_pem,
        *headers,
        "--upstream-token-env",
        "E2E_UPSTREAM_TOKEN",
        env=env,
    )
    await lists_and_reads(gw, log, "over-tls", "HTTPS upstream with --upstream-ca")
    requests = [e for e in log_entries(log) if "http" in e]
    check(
        "--upstream-header 'X-Api-Key: ${VAR}': the upstream got the variable's value",
        requests and all(e["headers"].get("x-api-key") == api_key for e in requests),
        [e["headers"] for e in requests][:3],
    )
    check(
        "--upstream-header 'X-Static: plain-value' sent as written",
        requests and all(e["headers"].get("x-static") == "plain-value" for e in requests),
        [e["headers"] for e in requests][:3],
    )
    check(
        "--upstream-token-env: Authorization: Bearer $VAR on every upstream request",
        requests and all(e["headers"].get("authorization") == f"Bearer {bearer}" for e in requests),
        [e["headers"] for e in requests][:3],
    )
    gw.stop()
    said = gw.stderr() + gw.stdout()
    check(
        "the secrets appear nowhere in the gateway's output (RUST_LOG=debug)",
        api_key not in said and bearer not in said,
        [line for line in said.splitlines() if api_key in line or bearer in line][:3],
    )
    check(
        "...nor the call's argument values (rmcp's message logs stay at warnings unless RUST_LOG names rmcp)",
        "over-tls" not in said,
        [line for line in said.splitlines() if "over-tls" in line][:3],
    )

    # The wrong CA: the client's connect fails, naming the host and TLS.
    seen = len(log_entries(log))
    bad = Gateway("tls-wrong", "--upstream", url, "--upstream-ca", wrong_pem, env=env)
    outcome = await list_outcome(bad)
    check("wrong CA: the client's initialize fails", outcome != "connected", outcome)
    check(
        "...with a message naming the upstream host (127.0.0.1) and the certificate / TLS",
        "127.0.0.1" in outcome and ("certificate" in outcome.lower() or "tls" in outcome.lower()),
        outcome[:600],
    )
    try:
        async with http_client() as http:
            r = await post_call(http, bad.url, "read_note", {"name": "wrong-ca"})
        check("wrong CA: a raw 2026 call is not answered with a result", "result" not in rpc_message(r), r.text[:300])
    except httpx2.HTTPError as e:
        check("wrong CA: a raw 2026 call is not answered with a result", True, e)
    check(
        "wrong CA: nothing reached the upstream (not even an HTTP request)",
        len(log_entries(log)) == seen,
        log_entries(log)[seen:],
    )
    bad.stop()
    upstream.terminate()


async def upstream_restart():
    """An HTTP upstream restarted (redeployed) with read_note turned into a
    destructive tool: it forgets the gateway's sessions. The gateway must not
    go on deciding with the old server's catalog (rmcp would quietly open a
    new upstream session): the call in flight fails, and the next one is
    decided on the new catalog (a destructive tool needs confirmation)."""
    pki = ServerPki("restart")
    ca_pem, cert_pem, key_pem = pki.ca_pem, pki.cert_pem, pki.key_pem
    log = TMP / "restart-upstream.jsonl"
    # UPSTREAM_JSON_RESPONSE: a POST lasts as long as its call.
    upstream, port = start_https_upstream("restart", log, cert_pem, key_pem, env={"UPSTREAM_JSON_RESPONSE": "1"})
    url = f"https://127.0.0.1:{port}/mcp"
    mport = free_port()
    audit = TMP / "restart-audit.jsonl"
    gw = Gateway(
        "restart",
        *("--upstream", url, "--upstream-ca", ca_pem, "--metrics", f"127.0.0.1:{mport}"),
        *("--audit", audit, "--audit-args"),
    )
    async with http_client() as http, mcp_client(gw.url, mode="legacy") as legacy:
        r = await post_call(http, gw.url, "read_note", {"name": "before"})
        check("before the restart: a 2026-07-28 read runs", ran(log, "read_note", name="before"), r.text[:300])
        before = await legacy.call_tool("read_note", {"name": "before-legacy"})
        check(
            "before the restart: a handshake-era read runs",
            blocked_code(before) is None and ran(log, "read_note", name="before-legacy"),
            before,
        )
        # Every 2026-07-28 caller shares one upstream session: 20 slow calls
        # of one caller (more than rmcp's default of 16 at once) must not
        # hold up another call (an order, not a time, is checked).
        hogs = [
            asyncio.create_task(post_call(http, gw.url, "slow", {"seconds": 4, "tag": f"hog-{n}"})) for n in range(20)
        ]
        started = await wait_for(lambda: len(ran(log, "slow")) >= 20, 10)
        await post_call(http, gw.url, "read_note", {"name": "between-hogs"})
        check(
            "20 slow calls in flight on the shared upstream session all run at once, and another call runs meanwhile",
            started and ran(log, "read_note", name="between-hogs") and not any(h.done() for h in hogs),
            (len(ran(log, "slow")), [h.done() for h in hogs].count(True)),
        )
        await asyncio.gather(*hogs)
        # One request the upstream answers 503 (a busy proxy) fails alone: the
        # shared session lives on, and a call in flight on it completes.
        inflight = asyncio.create_task(post_call(http, gw.url, "slow", {"seconds": 2, "tag": "through-503"}))
        await wait_for(lambda: ran(log, "slow", tag="through-503"), 10)
        busy = await post_call(http, gw.url, "overloaded", {})
        next_call = await post_call(http, gw.url, "read_note", {"name": "after-503"})
        done = await inflight
        check(
            "an upstream 503 fails that request only: the next call and the call in flight on the shared session run",
            "UPSTREAM" in busy.text and ran(log, "read_note", name="after-503") and "slept" in done.text,
            (busy.text[:300], next_call.text[:200], done.text[:300]),
        )
        # Review 22: an answer that is not a message was reported as a
        # connection that ended (UPSTREAM_CLOSED), sending operators to look
        # for network trouble.
        check(
            "...reported as an answer the gateway cannot read (UPSTREAM_ERROR, HTTP 503), not a closed connection",
            "UPSTREAM_ERROR" in busy.text and "503" in busy.text and "UPSTREAM_CLOSED" not in busy.text,
            busy.text[:300],
        )
        raw = await raw_legacy_session(http, gw.url, "restart-raw")
        r = await raw.call("read_note", {"name": "before-raw"})
        check(
            "before the restart: a raw handshake-era session's read runs",
            ran(log, "read_note", name="before-raw"),
            r.text[:300],
        )
        upstream.terminate()
        upstream.wait(10)
        restarted = subprocess.Popen(
            upstream_cmd(log, TMP / "notes-restart", "--http", port, "--certfile", cert_pem, "--keyfile", key_pem),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(TMP / "restart2-upstream.stderr", "wb"),
            env={**os.environ, "UPSTREAM_READ_NOTE_DESTRUCTIVE": "1", "UPSTREAM_JSON_RESPONSE": "1"},
        )
        PROCS.append(restarted)
        wait_port(port, 20)
        outcomes = []
        for n in range(3):
            r = await post_call(http, gw.url, "read_note", {"name": f"after-{n}"})
            outcomes.append(r.text[:400])
        check(
            "after the restart: no 2026-07-28 read_note ran on the old catalog's word",
            not any(ran(log, "read_note", name=f"after-{n}") for n in range(3)),
            outcomes,
        )
        check(
            "...and once the new upstream session is open, read_note is decided as the destructive tool it now is",
            "CONFIRMATION_REQUIRED" in outcomes[-1],
            outcomes,
        )
        try:
            after = await legacy.call_tool("read_note", {"name": "after-legacy"})
        except Exception as e:
            after = error_text(e)
        check(
            "after the restart: the handshake-era session's read_note does not run",
            not ran(log, "read_note", name="after-legacy"),
            after,
        )
        # The raw session's first request finds its upstream session gone
        # (UPSTREAM_CLOSED); from then on the gateway says the session is gone
        # (404), so the client initializes again, on the new catalog.
        first = await raw.call("read_note", {"name": "after-raw-1"})
        second = await raw.call("read_note", {"name": "after-raw-2"})
        check(
            "after the restart: the raw session's next request fails (UPSTREAM_CLOSED)",
            "UPSTREAM_CLOSED" in first.text and not ran(log, "read_note", name="after-raw-1"),
            (first.status_code, first.text[:300]),
        )
        lines = [
            (e.get("outcome"), e.get("code"), e.get("decision"))
            for e in audit_lines(audit)
            if (e.get("arguments") or {}).get("name") == "after-raw-1"
        ]
        check(
            "...its audit says forwarded, then upstream_failed with the code (the engine's decision: allowed)",
            lines == [("forwarded", None, "allowed"), ("upstream_failed", "UPSTREAM_CLOSED", "allowed")],
            lines,
        )
        check(
            "...and the one after is told the session is gone (404), not UPSTREAM_CLOSED again",
            second.status_code == 404 and not ran(log, "read_note", name="after-raw-2"),
            (second.status_code, second.text[:300]),
        )
        again = await raw_legacy_session(http, gw.url, "restart-raw-again")
        r = await again.call("read_note", {"name": "after-raw-3"})
        check(
            "...a new session is decided on the new catalog (read_note now needs confirmation)",
            again.session and "CONFIRMATION_REQUIRED" in r.text and not ran(log, "read_note", name="after-raw-3"),
            (again.session, r.text[:300]),
        )
        text = (await http.get(f"http://127.0.0.1:{mport}/metrics")).text
        closed = metric_samples(text, "toolgate_upstream_errors_total").get(frozenset({("reason", "UPSTREAM_CLOSED")}))
        check(
            "metrics: the requests the restart failed are counted (toolgate_upstream_errors_total)",
            (closed or 0) >= 2,
            closed,
        )
    gw.stop()
    restarted.terminate()


async def readiness_is_the_shared_session_s():
    """/readyz says whether MCP 2026-07-28 calls can be decided: while the
    shared upstream session cannot open, a handshake-era client's own session
    loading its catalog does not make the gateway ready."""
    pki = ServerPki("ready")
    log = TMP / "ready-upstream.jsonl"
    refuse = {"UPSTREAM_REFUSE_CLIENT": "toolgate-proxy"}
    upstream, port = start_https_upstream("ready", log, pki.cert_pem, pki.key_pem, env=refuse)
    url = f"https://127.0.0.1:{port}/mcp"
    gw = Gateway("ready", "--upstream", url, "--upstream-ca", pki.ca_pem)
    async with http_client() as http:
        refused = await wait_for(lambda: any(e.get("initialize_refused") for e in log_entries(log)), 15)
        r = await http.get(gw.base + "/readyz")
        check("the shared session cannot open: /readyz 503", refused and r.status_code == 503, (refused, r.status_code))
        async with mcp_client(gw.url, mode="legacy") as legacy:
            result = await legacy.call_tool("read_note", {"name": "ready-legacy"})
            check(
                "...a handshake-era client's own session works",
                blocked_code(result) is None and ran(log, "read_note", name="ready-legacy"),
                result,
            )
            r = await http.get(gw.base + "/readyz")
            check(
                "...and /readyz stays 503 (that session says nothing of the shared one)",
                r.status_code == 503,
                r.status_code,
            )
    gw.stop()
    upstream.terminate()


async def graceful_stop():
    """SIGTERM while a client holds its session (and GET stream) and a call is
    in flight: /readyz turns 503, the call finishes, the gateway exits."""
    log = TMP / "stop-upstream.jsonl"
    gw = Gateway("stop", "--shutdown-grace", 10, upstream_args=upstream_cmd(log, TMP / "notes-stop"))
    result, ready, ready_after_late, exited_in, late_refused = None, None, None, None, None
    try:
        async with mcp_client(gw.url, mode="legacy") as c:
            slow = asyncio.create_task(c.call_tool("slow", {"seconds": 2, "tag": "drain"}))
            await wait_for(lambda: ran(log, "slow", tag="drain"), 10)
            sent = time.monotonic()
            gw.proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            async with http_client() as http:
                ready = (await http.get(gw.base + "/readyz")).status_code
                # A session would be ended within the grace: none opens
                # during the drain (the client opens it on another replica).
                late = await http.post(
                    gw.url,
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-06-18",
                            "capabilities": {},
                            "clientInfo": {"name": "late", "version": "1"},
                        },
                    },
                    headers={"Accept": "application/json, text/event-stream"},
                )
                late_code = rpc_message(late).get("error", {}).get("data", {}).get("toolgate")
                late_refused = (late.status_code, late_code, late.headers.get("retry-after"))
                ready_after_late = (await http.get(gw.base + "/readyz")).status_code
            result = await slow
            if await wait_for(lambda: gw.proc.poll() is not None, 10):
                exited_in = time.monotonic() - sent
    except Exception as e:  # the client's own goodbye may find the server gone
        result = result or error_text(e)
    check("SIGTERM: /readyz answers 503 while the calls in flight finish", ready == 503, ready)
    check(
        "...an initialize during the drain is answered 503 SHUTTING_DOWN with Retry-After",
        late_refused == (503, "SHUTTING_DOWN", "1"),
        late_refused,
    )
    check("...and /readyz stays 503", ready_after_late == 503, ready_after_late)
    check(
        "...the call in flight completes",
        result is not None
        and not isinstance(result, str)
        and blocked_code(result) is None
        and "slept" in result.content[0].text,
        result,
    )
    check(
        "...and the gateway exits though the client still holds its session",
        exited_in is not None,
        (exited_in, gw.stderr()[-400:]),
    )
    gw.stop()


async def stop_past_the_grace():
    """A call still waiting for the upstream when the grace runs out is
    cancelled there and answered CANCELLED, with its audit line, before the
    sessions end (review 22: its POST ended with no message, its audit with
    no second line)."""
    log = TMP / "cut-upstream.jsonl"
    audit = TMP / "cut-audit.jsonl"
    gw = Gateway(
        "cut",
        *("--shutdown-grace", "1", "--audit", audit),
        upstream_args=upstream_cmd(log, TMP / "notes-cut"),
    )
    async with http_client() as http:
        call = asyncio.create_task(post_call(http, gw.url, "slow", {"seconds": 60, "tag": "past-grace"}))
        started = await wait_for(lambda: ran(log, "slow", tag="past-grace"), 10)
        gw.proc.send_signal(signal.SIGTERM)
        answer = await asyncio.wait_for(call, 60)
    message = rpc_message(answer)
    outcomes = [(e.get("outcome"), e.get("code")) for e in audit_lines(audit) if e.get("tool") == "slow"]
    check(
        "a call past --shutdown-grace is answered CANCELLED (the gateway is stopping)",
        started
        and message.get("error", {}).get("data", {}).get("toolgate") == "CANCELLED"
        and "stopping" in message.get("error", {}).get("message", ""),
        (answer.status_code, answer.text[:300]),
    )
    check(
        "...and its audit says forwarded, then upstream_failed CANCELLED",
        outcomes == [("forwarded", None), ("upstream_failed", "CANCELLED")],
        outcomes,
    )
    await wait_for(lambda: gw.proc.poll() is not None, 20)
    gw.stop()


async def mtls_upstream():
    """An upstream that requires a client certificate (mutual TLS): the gateway
    presents --upstream-cert / --upstream-key; without them, or with a
    certificate the upstream's CA did not issue, nothing reaches it."""
    ca_key, ca_cert = make_ca("toolgate e2e mTLS CA")
    other_key, other_ca = make_ca("an unrelated CA")
    leaf_key, leaf_cert = make_server_cert(ca_key, ca_cert)
    client_key, client_cert = make_client_cert(ca_key, ca_cert)
    stranger_key, stranger_cert = make_client_cert(other_key, other_ca)
    files = {n: TMP / f"mtls-{n}.pem" for n in ("ca", "server", "server-key", "client", "client-key", "stranger")}
    write_pem(files["ca"], cert=ca_cert)
    write_pem(files["server"], cert=leaf_cert)
    write_pem(files["server-key"], key=leaf_key)
    write_pem(files["client"], cert=client_cert)
    write_pem(files["client-key"], key=client_key)
    write_pem(files["stranger"], cert=stranger_cert, key=stranger_key)
    log = TMP / "mtls-upstream.jsonl"
    upstream, port = start_https_upstream("mtls", log, files["server"], files["server-key"], "--client-ca", files["ca"])
    url = f"https://127.0.0.1:{port}/mcp"

    gw = Gateway(
        "mtls",
        *("--upstream", url, "--upstream-ca", files["ca"]),
        *("--upstream-cert", files["client"], "--upstream-key", files["client-key"]),
    )
    await lists_and_reads(gw, log, "over-mtls", "mTLS upstream with --upstream-cert/--upstream-key")
    gw.stop()

    # No client certificate, or one from another CA: the handshake fails and
    # nothing reaches the upstream's MCP server.
    for label, flags in (
        ("no client certificate", ()),
        (
            "a client certificate the upstream's CA did not issue",
            ("--upstream-cert", files["stranger"], "--upstream-key", files["stranger"]),
        ),
    ):
        seen = len(log_entries(log))
        bad = Gateway("mtls-" + label.split()[0], "--upstream", url, "--upstream-ca", files["ca"], *flags)
        outcome = await list_outcome(bad)
        check(f"mTLS upstream, {label}: the client's initialize fails", outcome != "connected", outcome)
        check(
            f"...nothing of it reached the upstream ({label})",
            len(log_entries(log)) == seen,
            log_entries(log)[seen:],
        )
        bad.stop()
    upstream.terminate()

    # Start-up refusals, exit 64 naming the flag: a client certificate for an
    # http:// upstream (it would never be sent), a key that is not the
    # certificate's.
    for label, argv, needle in (
        (
            "--upstream-cert with an http:// upstream",
            [
                "--upstream",
                f"http://127.0.0.1:{port}/mcp",
                "--upstream-cert",
                files["client"],
                "--upstream-key",
                files["client-key"],
            ],
            "not https://",
        ),
        (
            "--upstream-key that is not the certificate's",
            ["--upstream", url, "--upstream-cert", files["client"], "--upstream-key", files["stranger"]],
            "is not the key of the first certificate",
        ),
    ):
        code, err = exits([PROXY, "--listen", f"127.0.0.1:{free_port()}", *map(str, argv)])
        check(f"{label}: refused at start, exit 64", code == 64, (code, err[-300:]))
        check(f"...the message says why ({needle!r})", needle in err, err[-300:])
    code, err = exits(
        [PROXY, "--listen", f"127.0.0.1:{free_port()}", "--upstream", url, "--upstream-cert", files["client"]]
    )
    check(
        "--upstream-cert without --upstream-key: a usage error naming --upstream-key",
        code == 64 and "--upstream-key" in err,
        (code, err[-300:]),
    )


async def introspection(auth_server):
    """--auth introspection: opaque tokens asked about at the authorization
    server's RFC 7662 endpoint, with the gateway's client credentials."""
    log = TMP / "i-upstream.jsonl"
    policy = TMP / "i-policy.yaml"
    policy.write_text(POLICY)
    secret = "cs-" + secrets.token_hex(12)
    auth_server.introspection_client = ("toolgate-e2e", secret)

    def opaque(sub, **claims):
        tok = "op-" + secrets.token_urlsafe(24)
        with auth_server.lock:
            auth_server.opaque[tok] = claims_for(sub, **claims)
        return tok

    def flags(url, cache="2"):
        return [
            *("--auth", "introspection", "--introspection-url", url),
            *("--introspection-client-id", "toolgate-e2e", "--introspection-secret-env", "E2E_INTROSPECTION_SECRET"),
            *("--introspection-cache", cache, "--issuer", ISSUER, "--audience", AUDIENCE, "--policy", policy),
        ]

    endpoint = auth_server.base + "/introspect"
    mport = free_port()
    gw = Gateway(
        "i",
        *flags(endpoint),
        *("--metrics", f"127.0.0.1:{mport}"),
        upstream_args=upstream_cmd(log, TMP / "notes-i"),
        env={"E2E_INTROSPECTION_SECRET": secret},
    )
    check("gateway with --auth introspection starts", gw.up, gw.stderr()[-500:])
    reader = opaque("ivy", scope="notes:read")
    try:
        async with mcp_client(gw.url, reader) as c:
            names = tool_names(await c.list_tools())
            r = await c.call_tool("read_note", {"name": "introspected"})
        detail = names
    except Exception as e:
        names, r, detail = [], None, error_text(e)
    check(
        "an active opaque token with notes:read: tools/list shows read_note, not admin_reset (its scopes)",
        "read_note" in names and "admin_reset" not in names,
        detail,
    )
    check(
        "...its read call runs on the upstream",
        r is not None and blocked_code(r) is None and ran(log, "read_note", name="introspected"),
        r,
    )
    check(
        "...the gateway asked the endpoint about that token",
        reader in auth_server.introspected,
        len(auth_server.introspected),
    )

    bad = {
        "a token the server does not know (active: false)": "op-unknown-" + secrets.token_hex(8),
        "another audience": opaque("ivy", scope="notes:read", aud="someone-else"),
        "another issuer": opaque("ivy", scope="notes:read", iss="https://evil.example"),
        "expired (2 min ago)": opaque("ivy", scope="notes:read", exp_in=-120),
        "no aud": opaque("ivy", scope="notes:read", drop=("aud",)),
        "no sub": opaque("ivy", scope="notes:read", drop=("sub",)),
    }
    async with http_client() as http:
        for i, (label, tok) in enumerate(bad.items()):
            name = f"i-bad-{i}"
            r = await post_call(http, gw.url, "read_note", {"name": name}, tok=tok)
            params = auth_params(r.headers.get("www-authenticate", ""))
            check(
                f"introspection, {label}: 401 invalid_token, nothing upstream",
                r.status_code == 401
                and params.get("error") == "invalid_token"
                and not ran(log, "read_note", name=name),
                (r.status_code, r.text[:200]),
            )

        # Revoked: refused once the active answer's trust (--introspection-cache 2) is over.
        revoked = opaque("ivy", scope="notes:read")
        first = await post_call(http, gw.url, "read_note", {"name": "before-revocation"}, tok=revoked)
        with auth_server.lock:
            del auth_server.opaque[revoked]
        await asyncio.sleep(3.2)
        after = await post_call(http, gw.url, "read_note", {"name": "after-revocation"}, tok=revoked)
        check(
            "a revoked token: served before, 401 once --introspection-cache (2 s) has passed, nothing upstream",
            first.status_code == 200
            and after.status_code == 401
            and not ran(log, "read_note", name="after-revocation"),
            (first.status_code, after.status_code, after.text[:200]),
        )
        await post_call(http, gw.url, "read_note", {"name": "no-token"})
        refusals = metric_samples(
            (await http.get(f"http://127.0.0.1:{mport}/metrics")).text, "toolgate_auth_refusals_total"
        )
        counted = {dict(k).get("reason"): v for k, v in refusals.items() if v}
        check(
            "toolgate_auth_refusals_total counts them by reason: invalid_token 7 (six bad, one revoked), missing 1",
            counted == {"invalid_token": len(bad) + 1, "missing": 1},
            counted,
        )
    gw.stop()
    said = gw.stderr() + gw.stdout()
    check("the client secret appears nowhere in the gateway's output", secret not in said, "")

    # The endpoint refusing the gateway's credentials, or not there at all:
    # 503, and nothing reaches the upstream.
    down = f"http://127.0.0.1:{free_port()}/introspect"
    for label, url, env_secret in (
        ("a wrong client secret", endpoint, "wrong-" + secret),
        ("an endpoint that is not there", down, secret),
    ):
        g = Gateway(
            "i-" + label.split()[1],
            *flags(url),
            upstream_args=upstream_cmd(log, TMP / "notes-i"),
            env={"E2E_INTROSPECTION_SECRET": env_secret},
        )
        name = "i-down-" + label.split()[1]
        async with http_client() as http:
            r = await post_call(http, g.url, "read_note", {"name": name}, tok=opaque("ivy", scope="notes:read"))
        check(
            f"introspection with {label}: 503 temporarily_unavailable, nothing upstream",
            r.status_code == 503 and "temporarily_unavailable" in r.text and not ran(log, "read_note", name=name),
            (r.status_code, r.text[:300]),
        )
        g.stop()

    code, err = exits([PROXY, "--listen", f"127.0.0.1:{free_port()}", *flags(endpoint), "--", *upstream_cmd(log, TMP)])
    check(
        "--introspection-secret-env naming an unset variable: refused at start (64), naming it",
        code == 64 and "E2E_INTROSPECTION_SECRET" in err,
        (code, err[-300:]),
    )
    # One way of checking tokens at a time: the other way's flags are refused.
    jwt_with_url = [*auth_flags(TMP / "jwks.json"), "--introspection-url", endpoint]
    introspection_with_jwks = [*flags(endpoint), "--jwks", str(TMP / "jwks.json")]
    for label, argv, env in (
        ("--introspection-url with --auth jwt", jwt_with_url, None),
        ("--jwks with --auth introspection", introspection_with_jwks, {"E2E_INTROSPECTION_SECRET": secret}),
    ):
        code, err = exits(
            [PROXY, "--listen", f"127.0.0.1:{free_port()}", *map(str, argv), "--", *upstream_cmd(log, TMP)], env=env
        )
        refused = code == 64 and ("goes with --auth" in err or "go with --auth" in err)
        check(f"{label}: refused at start (64), saying which --auth it goes with", refused, (code, err[-300:]))


# ---------------------------------------------------------------------------
# 7. --watch: good edits apply to the next call, a bad one keeps the rules.

WATCH_V1 = """\
version: 1
defaults:
  operation_type: transactional
tool_policies:
  read_note:
    operation_type: read_only
  slow:
    operation_type: read_only
"""
WATCH_V2 = WATCH_V1.replace("  read_note:\n    operation_type: read_only\n", '  read_note:\n    hold: "maintenance"\n')
WATCH_BAD = """\
version: 1
tool_policies:
  read_note:
    operation_type: read_only
   slow: [unclosed
"""
WATCH_V3 = WATCH_V1 + "  write_note:\n    operation_type: transactional\n"


def hidden_like(result, absent, name):
    """`result` is the answer `absent` (a call to `no_such_tool`) with `name` in its place."""

    def text(r):
        return [getattr(c, "text", None) for c in r.content]

    return text(result) == [t.replace("no_such_tool", name) if t else t for t in text(absent)]


async def watch():
    (TMP / "watch").mkdir()
    policy = TMP / "watch" / "policy.yaml"
    policy.write_text(WATCH_V1)
    log = TMP / "w-upstream.jsonl"
    audit = TMP / "w-audit.jsonl"
    mport = free_port()
    flags = ["--policy", "watch/policy.yaml", "--watch", "--audit", audit, "--metrics", f"127.0.0.1:{mport}"]
    gw = Gateway("watch", *flags, upstream_args=upstream_cmd(log, TMP / "notes-w"), cwd=TMP)
    wait_port(mport, 20)

    def last_line(tool):
        for x in reversed(audit_lines(audit)):
            if x.get("tool") == tool:
                return x
        return {}

    async with mcp_client(gw.url) as c:
        r = await c.call_tool("read_note", {"name": "w1"})
        line1 = last_line("read_note")
        check("--watch: read_note allowed under v1", blocked_code(r) is None and ran(log, "read_note", name="w1"), r)
        rev1 = line1.get("policy_revision")
        write_atomically(policy, WATCH_V2)
        await asyncio.sleep(1.0)
        r = await c.call_tool("read_note", {"name": "w2"})
        line2 = last_line("read_note")
        # A held tool is hidden: its call gets the upstream's own answer for a
        # tool it does not have (the gateway replays it), nothing toolgate-shaped.
        absent = await c.call_tool("no_such_tool", {})
        check(
            "--watch: the edit (read_note held) decides the next call: answered as an absent tool",
            r.is_error and absent.is_error and hidden_like(r, absent, "read_note"),
            (r, absent),
        )
        check("...not run", not ran(log, "read_note", name="w2"))
        rev2 = line2.get("policy_revision")
        check(
            "...audit policy_revision changed from the first call under v2",
            rev1 and rev2 and rev2 != rev1,
            (rev1, rev2),
        )
        # Review 28: the reload's log named a revision no audit line carried.
        check(
            "...and the log says the revision the audit lines carry, for each rules loaded",
            all(f"carry policy_revision {rev}" in gw.stderr() for rev in (rev1, rev2)),
            gw.stderr()[-600:],
        )
        listed = tool_names(await c.list_tools())
        check("...tools/list follows the new policy", "read_note" not in listed and "slow" in listed, listed)

        before = gw.stderr()
        write_atomically(policy, WATCH_BAD)
        await asyncio.sleep(1.6)  # several polls
        new = gw.stderr()[len(before) :]
        mentions = [line for line in new.splitlines() if re.search(r"watch/policy\.yaml:\d+:\d+", line)]
        check(
            "--watch: a YAML syntax error -> ONE stderr line with FILE:LINE:COL (the path as given)",
            len(mentions) == 1 and re.search(r"(?<![\w/])watch/policy\.yaml:\d+:\d+", mentions[0]),
            new[-800:],
        )
        r = await c.call_tool("read_note", {"name": "w3"})
        check(
            "...the previous (v2) rules stay: read_note still hidden",
            r.is_error and hidden_like(r, absent, "read_note"),
            r,
        )
        check("...same revision as v2", last_line("read_note").get("policy_revision") == rev2, last_line("read_note"))
        check("...the gateway is still up", gw.proc.poll() is None, gw.proc.returncode)

        # An edit while a slow call is in flight: the call completes.
        slow_call = asyncio.create_task(c.call_tool("slow", {"seconds": 1.5, "tag": "inflight"}))
        started = await wait_for(lambda: ran(log, "slow", tag="inflight"), 5)
        write_atomically(policy, WATCH_V3)
        r = await slow_call
        check(
            "--watch: a call in flight during an edit completes",
            started and blocked_code(r) is None and not r.is_error and "slept" in r.content[0].text,
            r,
        )
        await asyncio.sleep(0.8)
        r = await c.call_tool("read_note", {"name": "w4"})
        line4 = last_line("read_note")
        check("--watch: the fix after the bad edit applies (read_note allowed again)", blocked_code(r) is None, r)
        check("...with a third revision", line4.get("policy_revision") not in (None, rev1, rev2), (rev1, rev2, line4))

        # The file gone for good (a wrong mount): said once, the rules stay.
        policy.unlink()
        said = await wait_for(lambda: "cannot be read" in gw.stderr(), 6)
        check("--watch: a policy file that stays unreadable is said on stderr", said, gw.stderr()[-600:])
        r = await c.call_tool("read_note", {"name": "w5"})
        check("...and the rules in force stay (read_note still allowed)", blocked_code(r) is None, r)
    async with http_client() as http:
        text = (await http.get(f"http://127.0.0.1:{mport}/metrics")).text
    reloads = metric_samples(text, "toolgate_policy_reloads_total")
    ok = reloads.get(frozenset({("result", "ok")}))
    err = reloads.get(frozenset({("result", "error")}))
    check(
        "metrics: toolgate_policy_reloads_total ok=2 error=2 (the bad edit, the unreadable file)",
        ok == 2 and err == 2,
        reloads,
    )
    gw.stop()


# ---------------------------------------------------------------------------
# 8. --mode shadow: decided and audited, but forwarded.


async def shadow():
    policy = TMP / "s-policy.yaml"
    policy.write_text(
        "version: 1\ndefaults:\n  operation_type: transactional\ntool_policies:\n"
        '  read_note:\n    operation_type: read_only\n  admin_reset:\n    hold: "not in this deployment"\n'
    )
    log = TMP / "s-upstream.jsonl"
    notes = TMP / "notes-s"
    gw = Gateway(
        "shadow", "--mode", "shadow", "--policy", policy, "--audit", "-", upstream_args=upstream_cmd(log, notes)
    )
    asked = []

    async def elicit(_ctx, params):
        asked.append(params)
        return ElicitResult(action="decline")

    async with mcp_client(gw.url, elicitation_callback=elicit) as c:
        names = tool_names(await c.list_tools())
        w = await c.call_tool("write_note", {"name": "shadow", "text": "unconfirmed"})
        a = await c.call_tool("admin_reset", {"reason": "shadow-held"})
        r = await c.call_tool("read_note", {"name": "shadow"})
    check(
        "shadow: tools/list shows every upstream tool (the held one too)",
        names == ["admin_reset", "read_note", "slow", "write_note"],
        names,
    )
    check(
        "shadow: an unconfirmed write runs on the upstream", not w.is_error and ran(log, "write_note", name="shadow"), w
    )
    check("...no confirmation was asked", not asked, asked)
    check(
        "shadow: a held (hidden) tool runs on the upstream",
        not a.is_error and ran(log, "admin_reset", reason="shadow-held"),
        a,
    )
    check("shadow: an allowed read runs", not r.is_error and ran(log, "read_note", name="shadow"), r)
    await asyncio.sleep(0.2)
    lines = audit_lines(gw.stdout_path)  # --audit - : stdout
    by_tool = {x.get("tool"): x for x in lines}
    wl, al, rl = by_tool.get("write_note", {}), by_tool.get("admin_reset", {}), by_tool.get("read_note", {})
    check("--audit -: the audit lines are on stdout", len(lines) >= 3, gw.stdout()[-500:])
    check(
        "shadow audit: the write has would_block true, code CONFIRMATION_REQUIRED",
        wl.get("would_block") is True and wl.get("code") == "CONFIRMATION_REQUIRED",
        wl,
    )
    check(
        "shadow audit: the held tool has would_block true, code NOT_FOUND",
        al.get("would_block") is True and al.get("code") == "NOT_FOUND",
        al,
    )
    check("shadow audit: the allowed read has no would_block", not rl.get("would_block") and rl.get("code") is None, rl)
    gw.stop()


# ---------------------------------------------------------------------------
# 8b. The upstream changes a pinned tool and says so (tools/list_changed).

RELOAD_POLICY = """\
version: 1
defaults:
  operation_type: transactional
tool_policies:
  read_note:
    operation_type: read_only
    pin: "{pin}"
  redefine_read_note:
    require_confirmation: false
"""


async def catalog_reload():
    """Every session reloads its catalog on the upstream's list_changed, with
    or without a client to tell: a 2026-07-28 client's calls go through the
    shared sessionless session, which has none. A pinned tool whose definition
    changed is held back from the next call on, in both protocol eras."""
    policy = TMP / "r-policy.yaml"
    policy.write_text(RELOAD_POLICY.format(pin="sha256:" + "0" * 64))
    upstream = upstream_cmd(TMP / "r-probe.jsonl", TMP / "notes-r", "--redefinable")
    probe = Gateway("reload-probe", "--policy", policy, upstream_args=upstream)
    # --listen loads the catalog at start; a wrong pin is reported with the
    # definition's hash, which the real policy pins.
    said = ""
    for _ in range(100):
        said = probe.stderr()
        if "PIN_MISMATCH" in said:
            break
        await asyncio.sleep(0.1)
    probe.stop()
    found = re.search(r"read_note. changed since it was pinned.*?(sha256:[0-9a-f]{64})", said)
    check("reload: the gateway reports read_note's definition hash for a wrong pin", found, said[-600:])
    if not found:
        return
    policy.write_text(RELOAD_POLICY.format(pin=found.group(1)))
    for mode in (MODERN, "legacy"):
        log = TMP / f"r-{mode}.jsonl"
        gw = Gateway(
            f"reload-{mode}", "--policy", policy, upstream_args=upstream_cmd(log, TMP / "notes-r", "--redefinable")
        )
        async with mcp_client(gw.url, mode=mode) as c:
            r = await c.call_tool("read_note", {"name": "before"})
            check(
                f"reload ({mode}): the pinned read_note runs",
                not r.is_error and ran(log, "read_note", name="before"),
                r,
            )
            x = await c.call_tool("redefine_read_note", {})
            check("...the upstream redefines it", not x.is_error and ran(log, "redefine_read_note"), x)
            held = await wait_for(lambda gw=gw: "PIN_MISMATCH" in gw.stderr(), 10)
            check("...the gateway reloads its catalog and reports PIN_MISMATCH", held, gw.stderr()[-600:])
            absent = await c.call_tool("no_such_tool", {})
            r = await c.call_tool("read_note", {"name": "after"})
            check(
                f"reload ({mode}): the changed read_note is held back, answered as an absent tool",
                r.is_error and absent.is_error and hidden_like(r, absent, "read_note"),
                (r, absent),
            )
            check("...not run on the upstream", not ran(log, "read_note", name="after"), log_entries(log)[-3:])
            listed = tool_names(await c.list_tools())
            check("...and not listed", "read_note" not in listed and "redefine_read_note" in listed, listed)
        gw.stop()


async def confirmation_across_an_unchanged_reload():
    """A list_changed that changes nothing, announced while a person is asked,
    does not void their answer (review 31 F3: the rules were compared by
    identity, and a server re-announcing its list refused every confirmation
    that spanned one); a change does."""
    log = TMP / "u-upstream.jsonl"
    policy = TMP / "u-policy.yaml"
    policy.write_text(
        "version: 1\ndefaults:\n  operation_type: read_only\ntool_policies:\n"
        "  write_note:\n    operation_type: transactional\n    require_confirmation: true\n"
    )
    for change, tool, expect_run in (
        ("an unchanged", "announce_changes", True),
        ("a changed", "redefine_read_note", False),
    ):
        gw = Gateway(
            f"unchanged-{expect_run}",
            "--policy",
            policy,
            upstream_args=upstream_cmd(log, TMP / "notes-u", "--redefinable"),
        )
        holder = {}
        announced = []

        async def accept_after_an_announcement(_ctx, params, tool=tool, holder=holder, announced=announced):
            if "write_note" not in params.message:
                return ElicitResult(action="accept", content={})  # the announcing tool's own question
            # Sent, not awaited: this client reads nothing while it asks its person.
            announced.append(
                asyncio.ensure_future(holder["c"].call_tool(tool, {"times": 1} if tool == "announce_changes" else {}))
            )
            await asyncio.sleep(1.5)  # the gateway's reload settles in 50 ms
            return ElicitResult(action="accept", content={})

        name = f"u-{expect_run}"
        async with mcp_client(gw.url, mode="legacy", elicitation_callback=accept_after_an_announcement) as c:
            holder["c"] = c
            r = await c.call_tool("write_note", {"name": name, "text": "kept"})
            if announced:
                await announced[0]
        check(f"a person's yes across {change} catalog: the announcing tool ran", ran(log, tool), log_entries(log)[-3:])
        check(
            f"...the write {'runs' if expect_run else 'does not run'}",
            (not r.is_error) == expect_run and bool(ran(log, "write_note", name=name)) == expect_run,
            r,
        )
        gw.stop()


async def failed_reload():
    """A reload whose tools/list never answers: the calls waiting for the
    rules get that one attempt's failure (review 22: each made its own, one
    `--timeout` after another), and /readyz turns 503 while the shared
    session has no catalog."""
    log = TMP / "r-hang.jsonl"
    upstream = upstream_cmd(log, TMP / "notes-r-hang", "--redefinable", "--list-hangs-after-redefine")
    policy = TMP / "r-hang-policy.yaml"
    policy.write_text(URL_MODE_POLICY)
    gw = Gateway("reload-hang", "--policy", policy, "--timeout", 4, upstream_args=upstream)
    lists = lambda: sum(1 for e in log_entries(log) if e.get("list"))  # noqa: E731

    async def call(http, tool, arguments, id_):
        body, headers = raw_call(tool, arguments, id_)
        r = await http.post(gw.url, json=body, headers=headers)
        return r.status_code, r.text

    async with http_client() as http:
        ready = await wait_for(lambda: lists() >= 1, 20)
        check("failed reload: the gateway loads the catalog at start", ready, log_entries(log)[-3:])
        redefined = await call(http, "redefine_read_note", {}, 1)
        hung = await wait_for(lambda: any(e.get("hangs") for e in log_entries(log)), 10)
        check("...the upstream redefines a tool and hangs on the reload's tools/list", hung, redefined)
        calls = [call(http, "read_note", {"name": f"hang-{i}"}, 10 + i) for i in range(4)]
        answers = await asyncio.wait_for(asyncio.gather(*calls), 120)
        listed_by_then = lists()
        check(
            "...four calls waiting behind it all get its failure, none reaches the upstream",
            all("UPSTREAM_TIMEOUT" in text for _, text in answers)
            and not any(ran(log, "read_note", name=f"hang-{i}") for i in range(4)),
            answers,
        )
        check(
            "...and share that one attempt (at most one more tools/list, the background retry's)",
            listed_by_then <= 3,
            listed_by_then,
        )
        r = await http.get(gw.base + "/readyz")
        check("...while no catalog is loaded, /readyz answers 503", r.status_code == 503, r.status_code)
    gw.stop()


async def reload_burst():
    """Thirty notifications/tools/list_changed in a row cost a reload or two
    (one running, one queued behind it), not thirty (review 22), and calls
    are decided over the catalog as it is after them."""
    log = TMP / "r-burst.jsonl"
    upstream = upstream_cmd(log, TMP / "notes-r-burst", "--redefinable", "--log-lists")
    policy = TMP / "r-burst-policy.yaml"
    policy.write_text(URL_MODE_POLICY + "  announce_changes:\n    operation_type: read_only\n")
    gw = Gateway("reload-burst", "--policy", policy, upstream_args=upstream)
    lists = lambda: sum(1 for e in log_entries(log) if e.get("list"))  # noqa: E731
    async with http_client() as http:
        ready = await wait_for(lambda: lists() >= 1, 20)
        check("reload burst: the gateway loads the catalog at start", ready, log_entries(log)[-3:])
        before = lists()
        body, headers = raw_call("announce_changes", {"times": 30}, 1)
        announced = await http.post(gw.url, json=body, headers=headers)
        check("...the upstream announces 30 changes", "announced 30 changes" in announced.text, announced.text[:300])
        await asyncio.sleep(3)
        reloads = lists() - before
        # A reload waits 50 ms for the rest of a burst: one or two here, up to
        # five on a loaded machine; each notification made its own before.
        check("...which cost a few reloads, not 30", 1 <= reloads <= 5, reloads)
        body, headers = raw_call("read_note", {"name": "after-burst"}, 2)
        after = await http.post(gw.url, json=body, headers=headers)
        check(
            "...and calls go on over the reloaded catalog",
            after.status_code == 200 and ran(log, "read_note", name="after-burst"),
            (after.status_code, after.text[:300]),
        )
    gw.stop()


# The reload test's policy without the pin.
URL_MODE_POLICY = RELOAD_POLICY.replace('    pin: "{pin}"\n', "")
# Logged at every load of the catalog above (the redefining tool writes
# without confirmation): counts the loads.
LOADED = "redefine_read_note` is transactional"


class RawStdioClient:
    """JSON-RPC lines to a `toolgate proxy` over stdio, as a client that
    declares only URL-mode elicitation writes them (no SDK declares that
    alone): responses by id, the server's requests in a queue."""

    def __init__(self, proc):
        self.proc = proc
        self.waiting = {}
        self.sending = set()
        self.requests = asyncio.Queue()
        self.reader = asyncio.create_task(self.read())

    async def read(self):
        while line := await self.proc.stdout.readline():
            message = json.loads(line)
            if "method" in message and "id" in message:
                await self.requests.put(message)
            elif "id" in message and message["id"] in self.waiting:
                self.waiting.pop(message["id"]).set_result(message)

    async def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        await self.proc.stdin.drain()

    def request(self, id_, method, params):
        answer = asyncio.get_running_loop().create_future()
        self.waiting[id_] = answer
        # Kept until sent: the loop holds tasks only weakly.
        sending = asyncio.ensure_future(self.send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}))
        self.sending.add(sending)
        sending.add_done_callback(self.sending.discard)
        return answer


async def url_mode_approval():
    """A handshake-era client that takes only URL-mode elicitation is sent the
    approval page, and the gateway waits for the person: Approve runs the call
    once. If the upstream changed its tools while the gateway waited, the
    approval is not applied to the tools now in force: the call is blocked."""
    policy = TMP / "u-policy.yaml"
    policy.write_text(URL_MODE_POLICY)
    for stale in (False, True):
        label = "catalog reloaded while waiting" if stale else "catalog unchanged"
        log = TMP / f"u-{int(stale)}.jsonl"
        stderr_path = TMP / f"u-{int(stale)}.stderr"
        proc = await asyncio.create_subprocess_exec(
            PROXY,
            "--policy",
            str(policy),
            "--",
            *upstream_cmd(log, TMP / "notes-u", "--redefinable"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(stderr_path, "wb"),
        )
        client = RawStdioClient(proc)
        try:
            init = await asyncio.wait_for(
                client.request(
                    1,
                    "initialize",
                    {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"elicitation": {"url": {}}},
                        "clientInfo": {"name": "url-only", "version": "1"},
                    },
                ),
                20,
            )
            check(f"URL mode ({label}): initialized", "result" in init, init)
            await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = client.request(2, "tools/call", {"name": "write_note", "arguments": {"name": "u", "text": "hello"}})
            asked = await asyncio.wait_for(client.requests.get(), 20)
            params = asked.get("params", {})
            check(
                f"URL mode ({label}): the gateway sends the approval page as a URL-mode elicitation",
                asked.get("method") == "elicitation/create"
                and params.get("mode") == "url"
                and "/approve/" in params.get("url", ""),
                asked,
            )
            if stale:
                x = await asyncio.wait_for(
                    client.request(3, "tools/call", {"name": "redefine_read_note", "arguments": {}}), 20
                )
                check(
                    "...the upstream changes its tools meanwhile", "result" in x and ran(log, "redefine_read_note"), x
                )
                reloaded = await wait_for(
                    lambda path=stderr_path: path.read_text(errors="replace").count(LOADED) >= 2, 10
                )
                check(
                    "...and the gateway reloads its catalog", reloaded, stderr_path.read_text(errors="replace")[-600:]
                )
            await client.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}})
            async with http_client() as http:
                page = await http.get(params["url"])
                token = re.search(r'name="token" value="([^"]+)"', page.text)
                approved = await http.post(params["url"], data={"action": "approve", "token": token and token.group(1)})
            check(
                f"URL mode ({label}): the person approves on the page",
                approved.status_code == 200,
                approved.text[-300:],
            )
            answer = (await asyncio.wait_for(call, 30)).get("result", {})
            code = None
            if answer.get("isError"):
                try:
                    code = json.loads(answer["content"][0]["text"])["error"]["code"]
                except (KeyError, IndexError, ValueError):
                    code = "unreadable"
            if stale:
                check(
                    "...the approval is refused: CONFIRMATION_REQUIRED, not run",
                    code == "CONFIRMATION_REQUIRED" and not ran(log, "write_note", name="u"),
                    (answer, log_entries(log)[-2:]),
                )
            else:
                check("...the call runs once", code is None and len(ran(log, "write_note", name="u")) == 1, answer)
        finally:
            client.reader.cancel()
            proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except asyncio.TimeoutError:
                proc.kill()


# ---------------------------------------------------------------------------
# 9. Metrics and readiness.


async def metrics():
    policy = TMP / "m-policy.yaml"
    policy.write_text(POLICY)
    log = TMP / "m-upstream.jsonl"
    mport = free_port()
    flags = ["--policy", policy, "--scopes", "notes:read", "--metrics", f"127.0.0.1:{mport}"]
    slow_start = upstream_cmd(log, TMP / "notes-m", "--start-delay", "2.5")
    gw = Gateway("metrics", *flags, upstream_args=slow_start, wait=False)
    started = time.monotonic()
    gw.wait()
    wait_port(mport, 20)
    mbase = f"http://127.0.0.1:{mport}"
    async with http_client() as http:
        early = [(await http.get(base + "/readyz")).status_code for base in (mbase, gw.base)]
        health = [(await http.get(base + "/healthz")).status_code for base in (mbase, gw.base)]
        elapsed = time.monotonic() - started
        check("/healthz 200 on --metrics and on --listen while the upstream starts", health == [200, 200], health)
        check(
            "/readyz 503 on both before the upstream's catalog is loaded",
            early == [503, 503] and elapsed < 2.5,
            (early, round(elapsed, 2)),
        )

        async def ready():
            return (await http.get(mbase + "/readyz")).status_code == 200

        became = await wait_for(ready, 20, 0.1)
        late = (await http.get(gw.base + "/readyz")).status_code
        check(
            "/readyz 200 on both once the catalog is loaded",
            became and late == 200 and time.monotonic() - started >= 2.4,
            (became, late, round(time.monotonic() - started, 2)),
        )
        # Review 22: a page rebinding its name to 127.0.0.1 read /metrics
        # (every tool name, hidden ones included).
        rebound = await http.get(mbase + "/metrics", headers={"Host": f"rebound.example:{mport}"})
        page = await http.get(mbase + "/metrics", headers={"Origin": "https://evil.example"})
        local = await http.get(mbase + "/metrics", headers={"Host": f"localhost:{mport}"})
        check(
            "a loopback --metrics answers its own names only: a rebound Host or a page's Origin gets 403",
            (rebound.status_code, page.status_code, local.status_code) == (403, 403, 200),
            (rebound.status_code, page.status_code, local.status_code),
        )

    async with mcp_client(gw.url) as c:
        for i in range(3):
            await c.call_tool("read_note", {"name": f"m{i}"})
        for _ in range(2):
            await c.call_tool("admin_reset", {"reason": "metrics"})
        await c.call_tool("no_such_tool", {})
        await c.call_tool("write_note", {"name": "m"})  # text missing: BAD_REQUEST
    # More client sessions (handshake era: one upstream session each) with
    # the same policy and catalog: they share the rule set already loaded.
    # Each ends with the client's DELETE, which the SDK logs as a warning
    # unless it is answered 200 or 204.
    closing = SessionCloseWarnings()
    for _ in range(3):
        async with mcp_client(gw.url, mode="legacy") as c:
            await c.list_tools()
    closing.detach()
    check(
        "a handshake-era session's DELETE succeeds for the SDK (no 'Session termination failed')",
        not closing.messages,
        closing.messages,
    )
    async with http_client() as http:
        r = await http.get(mbase + "/metrics")
    text = r.text
    check(
        "no TLS, no certificate expiry sample (a 0 would fire an expiry alert)",
        metric_samples(text, "toolgate_tls_certificate_expiry_timestamp_seconds") == {},
        [x for x in text.splitlines() if "expiry" in x],
    )
    loads = metric_samples(text, "toolgate_rule_set_loads_total")
    check(
        "toolgate_rule_set_loads_total = 1: every session shares the one rule set",
        sum(loads.values()) == 1,
        loads,
    )
    check("/metrics: 200, Prometheus text", r.status_code == 200 and "toolgate_decisions_total" in text, text[:300])
    decisions = {k: v for k, v in metric_samples(text, "toolgate_decisions_total").items() if v}
    want = {
        frozenset({("tool", "read_note"), ("code", "ALLOW")}): 3,
        frozenset({("tool", "admin_reset"), ("code", "SCOPE_DENIED")}): 2,
        frozenset({("tool", "(unknown)"), ("code", "NOT_FOUND")}): 1,
        frozenset({("tool", "write_note"), ("code", "BAD_REQUEST")}): 1,
    }
    check(
        "toolgate_decisions_total matches the calls made, per tool and code",
        decisions == want,
        {tuple(sorted(k)): v for k, v in decisions.items()},
    )
    counts = metric_samples(text, "toolgate_decision_duration_seconds_count")
    check(
        "toolgate_decision_duration_seconds: a histogram counting 7 decisions",
        sum(counts.values()) == 7 and metric_samples(text, "toolgate_decision_duration_seconds_bucket"),
        counts,
    )
    upstream = metric_samples(text, "toolgate_upstream_duration_seconds_count")
    check(
        "toolgate_upstream_duration_seconds: a histogram, at least the 3 forwarded calls",
        sum(upstream.values()) >= 3 and metric_samples(text, "toolgate_upstream_duration_seconds_bucket"),
        upstream,
    )
    starts = metric_samples(text, "toolgate_upstream_starts_total")
    check("toolgate_upstream_starts_total >= 1", sum(starts.values()) >= 1, starts)
    check(
        "...and the upstream ran exactly the allowed calls",
        sorted(e["tool"] for e in log_entries(log)) == ["read_note"] * 3,
        log_entries(log),
    )
    gw.stop()


# ---------------------------------------------------------------------------
# 10. An open listener needs auth, or --insecure-listen (and a warning).


async def open_listener():
    upstream = upstream_cmd(TMP / "open-upstream.jsonl", TMP / "notes-o")
    code, err = exits([PROXY, "--listen", f"0.0.0.0:{free_port()}", "--", *upstream])
    check("--listen 0.0.0.0 without --auth: refused, exit 64", code == 64, (code, err[-300:]))
    check("...the message names --insecure-listen", "--insecure-listen" in err, err[-300:])

    gw = Gateway("insecure", "--insecure-listen", host="0.0.0.0", upstream_args=upstream)
    up = gw.up
    said = gw.stderr()
    check("--insecure-listen: serves on 0.0.0.0", up and gw.proc.poll() is None, said[-300:])
    check(
        "...with a loud warning on stderr",
        "insecure" in said.lower() and ("warning" in said.lower() or "!" in said),
        said[-300:],
    )
    gw.stop()
    authed = Gateway("open-auth", *auth_flags(TMP / "jwks.json"), host="0.0.0.0", upstream_args=upstream)
    check("--listen 0.0.0.0 with --auth jwt: allowed", authed.up and authed.proc.poll() is None, authed.stderr()[-300:])
    authed.stop()


async def private_listing():
    """A tools/list is decided for its caller (scopes, surface): a 2026-07-28
    answer says `cacheScope: private`, so no intermediary serves one
    caller's list to another (absent, the revision reads it as public)."""
    log = TMP / "listing-upstream.jsonl"
    gw = Gateway("listing", *auth_flags(TMP / "jwks.json"), upstream_args=upstream_cmd(log, TMP / "notes-listing"))
    check("gateway for the listing starts", gw.up, gw.stderr()[-300:])
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list",
        "Authorization": f"Bearer {token('alice', scope='notes:read')}",
    }
    async with http_client() as http:
        r = await http.post(gw.url, json=body, headers=headers)
        result = rpc_message(r).get("result", {})
        check(
            "a 2026-07-28 tools/list is private to its caller",
            r.status_code == 200 and result.get("cacheScope") == "private" and result.get("tools"),
            (r.status_code, r.text[:300]),
        )
        # On a handshake-era session rmcp fills in nothing: the gateway says it.
        auth = {"Authorization": headers["Authorization"]}
        opened = await http.post(gw.url, json=legacy_initialize("listing"), headers={**BASE_HEADERS, **auth})
        session = {
            **BASE_HEADERS,
            **auth,
            "Mcp-Session-Id": opened.headers.get("mcp-session-id", ""),
            "MCP-Protocol-Version": LEGACY,
        }
        await http.post(gw.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        r = await http.post(gw.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
        result = rpc_message(r).get("result", {})
        check(
            "a handshake-era session's tools/list is private to its caller",
            r.status_code == 200 and result.get("cacheScope") == "private" and result.get("tools"),
            (r.status_code, r.text[:300]),
        )
    gw.stop()


async def shared_session_tasks():
    """Every MCP 2026-07-28 caller's requests go through one upstream session:
    a task the upstream starts for one caller's call (its ids count up, as
    many servers' do) is answered only to that caller; another's tasks/get or
    tasks/cancel of it is answered as for a task that does not exist, on the
    shared session and from a handshake-era session of the other caller's own
    (every session reaches the upstream under the gateway's one identity, and
    this upstream, as many do, keeps one task table for all of them)."""
    log = TMP / "tasks-upstream.jsonl"
    pki = ServerPki("tasks")
    _, port = start_https_upstream("tasks", log, pki.cert_pem, pki.key_pem, "--tasks")
    gw = Gateway(
        "tasks",
        *auth_flags(TMP / "jwks.json"),
        *("--upstream", f"https://127.0.0.1:{port}/mcp", "--upstream-ca", pki.ca_pem),
    )
    check("gateway in front of a task-running upstream starts", gw.up, gw.stderr()[-300:])
    alice, bob = token("alice", scope="notes:read"), token("bob", scope="notes:read")

    # The gateway hands a task only to a client that declares the extension.
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    }

    def request(method, params, tok, **headers):
        body = {"jsonrpc": "2.0", "id": 2, "method": method, "params": {**params, "_meta": meta}}
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
            "Authorization": f"Bearer {tok}",
            **headers,
        }
        return body, headers

    async def start(http, tag, tok):
        body, headers = request(
            "tools/call", {"name": "background", "arguments": {"tag": tag}}, tok, **{"Mcp-Name": "background"}
        )
        return rpc_message(await http.post(gw.url, json=body, headers=headers))

    async with http_client() as http:
        started = await start(http, "alice-job", alice)
        task_id = started.get("result", {}).get("taskId")
        check(
            "alice's call is answered with a task",
            started.get("result", {}).get("resultType") == "task" and task_id,
            started,
        )
        if not task_id:
            gw.stop()
            return

        async def ask(method, task, tok):
            body, headers = request(method, {"taskId": task}, tok, **{"Mcp-Name": task})
            r = await http.post(gw.url, json=body, headers=headers)
            return r.status_code, rpc_message(r)

        def unknown(answer):
            status, message = answer
            error = message.get("error", {})
            return (
                status == 200
                and error.get("code") == -32602
                and error.get("data", {}).get("toolgate") == "UNKNOWN_TASK"
            )

        bobs_get = await ask("tasks/get", task_id, bob)
        check("bob's tasks/get of alice's task: unknown task", unknown(bobs_get), bobs_get)
        check("...and nothing of her result in it", "alice-job" not in json.dumps(bobs_get), bobs_get)
        bobs_cancel = await ask("tasks/cancel", task_id, bob)
        check("bob's tasks/cancel of alice's task: unknown task", unknown(bobs_cancel), bobs_cancel)
        check(
            "...and it never reached the upstream",
            not any("task_cancelled" in e for e in log_entries(log)),
            log_entries(log),
        )
        nonexistent = await ask("tasks/get", "task-999", bob)
        check("a task that does not exist is answered the same", unknown(nonexistent), nonexistent)
        status, alices = await ask("tasks/get", task_id, alice)
        check(
            "alice reads her own task's result",
            status == 200
            and alices.get("result", {}).get("status") == "completed"
            and "job alice-job done" in json.dumps(alices),
            (status, alices),
        )
        own = await start(http, "bob-job", bob)
        bobs_task = own.get("result", {}).get("taskId")
        status, bobs = await ask("tasks/get", bobs_task, bob)
        check(
            "bob reads the task started for him",
            bobs_task and bobs_task != task_id and "job bob-job done" in json.dumps(bobs),
            (own, status, bobs),
        )
        alices_view = await ask("tasks/get", bobs_task, alice)
        check("...which alice cannot", unknown(alices_view), alices_view)

        # Bob opens a handshake-era session of his own and names alice's task there.
        as_bob = {**BASE_HEADERS, "Authorization": f"Bearer {bob}"}
        initialize = legacy_initialize("bob")
        initialize["params"]["capabilities"] = meta["io.modelcontextprotocol/clientCapabilities"]
        r = await http.post(gw.url, json=initialize, headers=as_bob)
        session = r.headers.get("mcp-session-id")
        check("bob opens a handshake-era session", r.status_code == 200 and session, (r.status_code, r.text[:300]))
        on_his_session = {**as_bob, "Mcp-Session-Id": session or "", "MCP-Protocol-Version": LEGACY}
        await http.post(gw.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=on_his_session)
        for method in ("tasks/get", "tasks/cancel"):
            body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {"taskId": task_id}}
            r = await http.post(gw.url, json=body, headers=on_his_session)
            answer = (r.status_code, rpc_message(r))
            check(f"bob's {method} of alice's task from his handshake-era session: unknown", unknown(answer), answer)
            check("...and nothing of her result in it", "alice-job" not in json.dumps(answer), answer)
        check(
            "...and no cancel reached the upstream",
            not any("task_cancelled" in e for e in log_entries(log)),
            log_entries(log),
        )
    gw.stop()


async def session_limits():
    """Each handshake-era session holds an upstream session (here a child
    process): with --auth one subject holds at most --max-sessions-per-caller
    of them, and the gateway at most --max-sessions; a closed one frees its
    place."""
    log = TMP / "limits-upstream.jsonl"
    gw = Gateway(
        "limits",
        *auth_flags(TMP / "jwks.json"),
        "--max-sessions",
        "3",
        "--max-sessions-per-caller",
        "2",
        "--max-in-flight-per-caller",
        "2",
        upstream_args=upstream_cmd(log, TMP / "notes-limits"),
    )
    check("gateway with session limits starts", gw.up, gw.stderr()[-300:])
    base, initialize = BASE_HEADERS, legacy_initialize("limits")
    tokens = {who: token(who, scope="notes:read") for who in ("alice", "bob", "carol")}
    async with http_client() as http:

        async def open_session(who):
            r = await http.post(gw.url, json=initialize, headers={**base, "Authorization": f"Bearer {tokens[who]}"})
            return r, r.headers.get("mcp-session-id")

        async def close(who, session):
            headers = {**base, "Authorization": f"Bearer {tokens[who]}", "Mcp-Session-Id": session}
            return (await http.delete(gw.url, headers=headers)).status_code

        # Two at once: both places are counted before either is answered.
        opened = await asyncio.gather(open_session("alice"), open_session("alice"))
        alice = [session for _, session in opened]
        check("alice opens two sessions at once", all(alice), [(r.status_code, r.text[:200]) for r, _ in opened])
        r, third = await open_session("alice")
        message = rpc_message(r)
        check(
            "alice's third session: 429 TOO_MANY_SESSIONS, no session id",
            r.status_code == 429
            and third is None
            and message.get("error", {}).get("data", {}).get("toolgate") == "TOO_MANY_SESSIONS"
            and message.get("id") == 1
            and r.headers.get("retry-after"),
            (r.status_code, r.text[:300], third),
        )
        r, bob = await open_session("bob")
        check("bob still opens one of his own", r.status_code == 200 and bob, (r.status_code, r.text[:300]))
        r, carol = await open_session("carol")
        check(
            "carol, past --max-sessions: 429",
            r.status_code == 429 and carol is None and "--max-sessions" in r.text,
            (r.status_code, r.text[:300]),
        )
        check("alice closes one of hers", alice[0] and await close("alice", alice[0]) == 200)
        r, again = await open_session("alice")
        check("...and may open another", r.status_code == 200 and again, (r.status_code, r.text[:300]))

        # Requests in flight: alice's two slow calls hold her places; a third
        # is refused (429) and never reaches the upstream, while bob's runs.
        slow = [
            asyncio.create_task(
                post_call(http, gw.url, "slow", {"seconds": 3, "tag": f"alice-{n}"}, tok=tokens["alice"])
            )
            for n in range(2)
        ]
        started = await wait_for(lambda: len(ran(log, "slow")) >= 2, 10)
        third = await post_call(http, gw.url, "slow", {"seconds": 0, "tag": "alice-third"}, tok=tokens["alice"])
        message = rpc_message(third)
        check(
            "alice's third request in flight: 429 TOO_MANY_REQUESTS, not forwarded",
            started
            and third.status_code == 429
            and message.get("error", {}).get("data", {}).get("toolgate") == "TOO_MANY_REQUESTS"
            and third.headers.get("retry-after")
            and not ran(log, "slow", tag="alice-third"),
            (started, third.status_code, third.text[:300]),
        )
        r = await post_call(http, gw.url, "read_note", {"name": "bob-meanwhile"}, tok=tokens["bob"])
        check(
            "...bob's request meanwhile runs",
            ran(log, "read_note", name="bob-meanwhile"),
            (r.status_code, r.text[:300]),
        )
        await asyncio.gather(*slow)
        r = await post_call(http, gw.url, "slow", {"seconds": 0, "tag": "alice-later"}, tok=tokens["alice"])
        check(
            "...and alice's next, once hers are answered",
            ran(log, "slow", tag="alice-later"),
            (r.status_code, r.text[:300]),
        )

        # GET streams stay open, each on a connection: they hold places too
        # (review 22: one token held every --max-connections place with them).
        streaming = {
            **base,
            "Accept": "text/event-stream",
            "Authorization": f"Bearer {tokens['alice']}",
            "Mcp-Session-Id": again,
            "MCP-Protocol-Version": "2025-06-18",
        }
        async with contextlib.AsyncExitStack() as held:
            opened = [await held.enter_async_context(http.stream("GET", gw.url, headers=streaming)) for _ in range(2)]
            async with http.stream("GET", gw.url, headers=streaming) as extra:
                extra_status = extra.status_code
            call = await post_call(http, gw.url, "read_note", {"name": "alice-streaming"}, tok=tokens["alice"])
            bobs = await post_call(http, gw.url, "read_note", {"name": "bob-streaming"}, tok=tokens["bob"])
        check(
            "alice's two open GET streams hold her places: a third stream and a call get 429",
            [r.status_code for r in opened] == [200, 200]
            and extra_status == 429
            and call.status_code == 429
            and not ran(log, "read_note", name="alice-streaming"),
            ([r.status_code for r in opened], extra_status, call.status_code, call.text[:200]),
        )
        check("...bob's call meanwhile runs", ran(log, "read_note", name="bob-streaming"), bobs.text[:200])
        # A closed stream's place frees when the gateway sees the connection
        # go, a moment after the client closes it.
        for _ in range(50):
            r = await post_call(http, gw.url, "read_note", {"name": "alice-closed"}, tok=tokens["alice"])
            if r.status_code != 429:
                break
            await asyncio.sleep(0.1)
        check(
            "...once they are closed, alice's call runs",
            ran(log, "read_note", name="alice-closed"),
            (r.status_code, r.text[:300]),
        )
    gw.stop()


async def idle_sessions():
    """A session its client left (no DELETE, no stream) is closed after
    --session-idle, though its upstream keeps sending it notifications
    (review 22: rmcp's idle timer restarted on them, and the session held its
    place and its upstream child for good)."""
    log = TMP / "idle-upstream.jsonl"
    gw = Gateway(
        "idle",
        *("--max-sessions", "1", "--session-idle", "2"),
        upstream_args=upstream_cmd(log, TMP / "notes-idle", "--chatty"),
    )
    async with http_client() as http:
        r = await http.post(gw.url, json=legacy_initialize("idle-a"), headers=BASE_HEADERS)
        session = r.headers.get("mcp-session-id")
        headers = {**BASE_HEADERS, "Mcp-Session-Id": session or "", "MCP-Protocol-Version": "2025-06-18"}
        await http.post(gw.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "chatty", "arguments": {}}}
        r = await http.post(gw.url, json=call, headers=headers)
        check(
            "idle sessions: a session's upstream starts talking to it",
            session and ran(log, "chatty"),
            (r.status_code, r.text[:300]),
        )
        r = await http.post(gw.url, json=legacy_initialize("idle-b"), headers=BASE_HEADERS)
        check("...while it is open, --max-sessions 1 is full: 429", r.status_code == 429, (r.status_code, r.text[:200]))
        # Abandoned: its client sends nothing more. Within a few idle times
        # it is closed and its place is free.
        opened = None
        for _ in range(60):
            await asyncio.sleep(0.25)
            r = await http.post(gw.url, json=legacy_initialize("idle-c"), headers=BASE_HEADERS)
            if r.status_code == 200:
                opened = r.headers.get("mcp-session-id")
                break
        check("...once its client has been idle past --session-idle, a new session opens", opened, r.status_code)
        r = await http.post(gw.url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=headers)
        check("...and the abandoned session is gone (404)", r.status_code == 404, (r.status_code, r.text[:200]))
        # A session in use is not idle (review 24: rmcp's own timer closed it
        # under an open GET stream or a call longer than the idle time).
        busy = {**BASE_HEADERS, "Mcp-Session-Id": opened or "", "MCP-Protocol-Version": "2025-06-18"}
        await http.post(gw.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=busy)
        async with http.stream("GET", gw.url, headers={**busy, "Accept": "text/event-stream"}) as stream:
            await asyncio.sleep(5)
            ping = await http.post(gw.url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=busy)
        long = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "slow", "arguments": {}}}
        long["params"]["arguments"] = {"seconds": 5, "tag": "past-idle"}
        slow = await http.post(gw.url, json=long, headers=busy)
        check(
            "...a session with a GET stream open, or a call running, past --session-idle lives on",
            stream.status_code == 200 and ping.status_code == 200 and "slept" in slow.text,
            (stream.status_code, ping.status_code, slow.status_code, slow.text[:200]),
        )
    gw.stop()


async def origins():
    """`/mcp` answers only this machine's pages, --resource's and the
    --allow-origin ones: a web page the person visits cannot drive it."""
    log = TMP / "origin-upstream.jsonl"
    gw = Gateway(
        "origin",
        *("--allow-origin", "https://app.example.com", "--allow-host", "gw.example"),
        upstream_args=upstream_cmd(log, TMP / "notes-origin"),
    )
    check("gateway with --allow-origin starts", gw.up, gw.stderr()[-300:])
    async with http_client() as http:
        answers = {}
        for name, origin in [
            ("none", None),
            ("allowed", "https://app.example.com"),
            ("this machine", f"http://localhost:{gw.port}"),
            ("foreign", "https://evil.example"),
        ]:
            body, headers = raw_call("read_note", {"name": f"origin-{name.replace(' ', '-')}"})
            if origin:
                headers["Origin"] = origin
            r = await http.post(gw.url, json=body, headers=headers)
            answers[name] = r.status_code
    check("no Origin (not a browser): 200", answers["none"] == 200, answers)
    check("an --allow-origin page: 200", answers["allowed"] == 200, answers)
    check("a page of this machine: 200", answers["this machine"] == 200, answers)
    check("a foreign page: 403", answers["foreign"] == 403, answers)
    check("...and its call reached nothing", not ran(log, "read_note", name="origin-foreign"))
    async with http_client() as http:
        hosts = {}
        for host in ("gw.example", "other.example"):
            body, headers = raw_call("read_note", {"name": f"host-{host}"})
            r = await http.post(gw.url, json=body, headers={**headers, "Host": f"{host}:{gw.port}"})
            page = await http.get(gw.base + "/approve/x", headers={"Host": host})
            hosts[host] = (r.status_code, page.status_code)
    check(
        "--allow-host: a request naming that host is served (the call, the approval pages)",
        hosts["gw.example"][0] == 200
        and hosts["gw.example"][1] != 403
        and ran(log, "read_note", name="host-gw.example"),
        hosts,
    )
    check(
        "...one naming another host: 403 (the call reached nothing, the pages refuse)",
        hosts["other.example"] == (403, 403) and not ran(log, "read_note", name="host-other.example"),
        hosts,
    )
    async with http_client() as http:
        body, headers = raw_call("read_note", {"name": "origin-other-port"})
        r = await http.post(gw.url, json=body, headers={**headers, "Origin": "https://app.example.com:8443"})
    check(
        "an --allow-origin entry without a port admits its scheme's default port only (8443: 403)",
        r.status_code == 403 and not ran(log, "read_note", name="origin-other-port"),
        (r.status_code, r.text[:200]),
    )
    # Review 22: a page's `text/plain` post (no preflight) or a rebound host
    # made the gateway read and parse up to 16 MiB before the session layer
    # refused it. Refused on the headers now: a body announced and never
    # sent is not waited for (the gate would wait 30 s, then answer 408).
    for label, extra, status in [
        ("a foreign page's text/plain post", {"Origin": "https://evil.example", "Content-Type": "text/plain"}, 403),
        ("a rebound host's post", {"Host": f"rebound.example:{gw.port}"}, 403),
        ("a text/plain post", {"Content-Type": "text/plain"}, 415),
    ]:
        got = await status_before_body(gw.port, extra)
        check(f"{label} is refused on its headers, its body never read: {status}", got == status, got)
    code, err = exits([PROXY, "--listen", "127.0.0.1:0", "--allow-host", "gw.example:8080", "--", "true"])
    check("--allow-host with a port: a usage error (64)", code == 64 and "--allow-host" in err, (code, err[-300:]))
    await cors(gw, log)
    gw.stop()
    # With --auth the preflight is answered before the token is asked for
    # (browsers send none with it); the call itself still needs one.
    authed = Gateway(
        "origin-auth",
        *auth_flags(TMP / "jwks.json"),
        "--allow-origin",
        "https://app.example.com",
        upstream_args=upstream_cmd(log, TMP / "notes-origin"),
    )
    async with http_client() as http:
        r = await http.options(authed.url, headers=preflight("https://app.example.com"))
        check(
            "with --auth: a preflight without a token is answered",
            r.status_code == 200 and r.headers.get("access-control-allow-origin") == "https://app.example.com",
            (r.status_code, dict(r.headers)),
        )
        body, headers = raw_call("read_note", {"name": "origin-no-token"})
        r = await http.post(authed.url, json=body, headers={**headers, "Origin": "https://app.example.com"})
        check(
            "...the call without a token: 401, readable by the page",
            r.status_code == 401 and r.headers.get("access-control-allow-origin") == "https://app.example.com",
            (r.status_code, dict(r.headers)),
        )
    authed.stop()


async def status_before_body(port, extra):
    """The status of a POST to /mcp that announces 16 MB and sends none of
    it, or what went wrong (a hang guard of 20 s: the gate waits 30 s for a
    body it reads)."""
    headers = {
        "Host": f"127.0.0.1:{port}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Content-Length": str(16_000_000),
        **extra,
    }
    head = "POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head.encode())
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 20)
        return int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else line
    except TimeoutError:
        return "no answer before the body (the gate was reading it)"
    finally:
        writer.close()


def preflight(origin):
    return {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,authorization,mcp-protocol-version,mcp-method,mcp-name",
    }


async def cors(gw, log):
    """A page the gateway answers may read the answers, and gets its
    preflight; any other gets no CORS headers (its browser neither reads nor
    sends)."""
    async with http_client() as http:
        r = await http.options(gw.url, headers=preflight("https://app.example.com"))
        allowed_headers = r.headers.get("access-control-allow-headers", "").lower()
        check(
            "CORS: an --allow-origin page's preflight is answered for POST with MCP's headers",
            r.status_code == 200
            and r.headers.get("access-control-allow-origin") == "https://app.example.com"
            and "POST" in r.headers.get("access-control-allow-methods", "")
            and all(h in allowed_headers for h in ("content-type", "authorization", "mcp-method")),
            (r.status_code, dict(r.headers)),
        )
        for label, origin in [
            ("a foreign page", "https://evil.example"),
            ("this machine's page", f"http://localhost:{gw.port + 1}"),
        ]:
            r = await http.options(gw.url, headers=preflight(origin))
            check(
                f"CORS: {label}'s preflight is not granted (no Access-Control-Allow-Origin)",
                "access-control-allow-origin" not in r.headers,
                (r.status_code, dict(r.headers)),
            )
        for method in ("OPTIONS", "GET"):
            r = await http.request(method, gw.base + "/approve/x", headers=preflight("https://app.example.com"))
            check(
                f"CORS: the approval pages grant no origin ({method})",
                not any(h.startswith("access-control-") for h in r.headers),
                (r.status_code, dict(r.headers)),
            )
        r = await http.post(
            gw.url, json=legacy_initialize("cors"), headers={**BASE_HEADERS, "Origin": "https://app.example.com"}
        )
        exposed = r.headers.get("access-control-expose-headers", "").lower()
        check(
            "CORS: an --allow-origin page may read the answer and its session id",
            r.status_code == 200
            and r.headers.get("access-control-allow-origin") == "https://app.example.com"
            and "mcp-session-id" in exposed
            and r.headers.get("mcp-session-id"),
            (r.status_code, dict(r.headers)),
        )
        body, headers = raw_call("read_note", {"name": "origin-foreign-cors"})
        r = await http.post(gw.url, json=body, headers={**headers, "Origin": "https://evil.example"})
        check(
            "CORS: a foreign page's request: 403 with no CORS headers, and nothing ran",
            r.status_code == 403
            and "access-control-allow-origin" not in r.headers
            and not ran(log, "read_note", name="origin-foreign-cors"),
            (r.status_code, dict(r.headers)),
        )


def tls_context(ca_pem, cert_pem=None):
    context = ssl.create_default_context(cafile=str(ca_pem))
    if cert_pem is not None:
        context.load_cert_chain(str(cert_pem))
    return context


async def tls_post(url, context, tool, arguments):
    """(HTTP status, text) of a 2026-07-28 call over TLS, or (None, the
    error) when no answer came (a refused handshake)."""
    body, headers = raw_call(tool, arguments)
    try:
        async with httpx2.AsyncClient(verify=context, timeout=10, trust_env=False) as http:
            r = await http.post(url, json=body, headers=headers)
            return r.status_code, r.text
    except (httpx2.HTTPError, OSError) as e:  # ssl.SSLError is an OSError
        return None, error_text(e)


async def listen_tls():
    """--listen over HTTPS: calls run over TLS only; a renewed certificate is
    served without a restart; with --tls-client-ca only clients holding a
    certificate of that CA get through the handshake; a key of another
    certificate is refused at start."""
    log = TMP / "listen-tls-upstream.jsonl"
    upstream = upstream_cmd(log, TMP / "notes-listen-tls")
    pki = ServerPki("listen")
    ca_key, ca_cert, leaf_key, leaf_cert = pki.ca_key, pki.ca_cert, pki.leaf_key, pki.leaf_cert
    ca_pem, cert_pem, key_pem = pki.ca_pem, pki.cert_pem, pki.key_pem
    mport = free_port()
    gw = Gateway(
        "listen-tls",
        *("--tls-cert", cert_pem, "--tls-key", key_pem, "--metrics", f"127.0.0.1:{mport}"),
        upstream_args=upstream,
    )
    url = f"https://127.0.0.1:{gw.port}/mcp"

    async def expiry():
        async with http_client() as http:
            text = (await http.get(f"http://127.0.0.1:{mport}/metrics")).text
        return metric_samples(text, "toolgate_tls_certificate_expiry_timestamp_seconds").get(
            frozenset({("listener", "mcp")})
        )

    served = await expiry()
    check(
        "metrics: the served certificate's expiry (toolgate_tls_certificate_expiry_timestamp_seconds)",
        served == int(leaf_cert.not_valid_after_utc.timestamp()),
        (served, leaf_cert.not_valid_after_utc),
    )
    status, text = await tls_post(url, tls_context(ca_pem), "read_note", {"name": "over-tls"})
    check(
        "--tls-cert: a call over HTTPS runs",
        status == 200 and ran(log, "read_note", name="over-tls"),
        (status, text[:300], gw.stderr()[-300:]),
    )
    check(
        "...and the gateway says https at start", f"https://127.0.0.1:{gw.port}/mcp" in gw.stderr(), gw.stderr()[-300:]
    )
    async with http_client() as http:
        body, headers = raw_call("read_note", {"name": "in-clear"})
        try:
            r = await http.post(gw.url, json=body, headers=headers)
            plain = r.status_code
        except httpx2.HTTPError as e:
            plain = error_text(e)[:200]
    check(
        "...plain HTTP on that port gets no answer, and nothing runs",
        plain != 200 and not ran(log, "read_note", name="in-clear"),
        plain,
    )
    # Renewal: a certificate of another CA written over the files is served
    # from the next check on (every 10 s), without a restart.
    new_ca_key, new_ca_cert = make_ca("toolgate e2e renewed CA")
    new_key, new_cert = make_server_cert(new_ca_key, new_ca_cert)
    new_ca_pem = TMP / "listen-ca-renewed.pem"
    write_pem(new_ca_pem, cert=new_ca_cert)
    write_atomically(
        key_pem,
        new_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
    )
    write_atomically(cert_pem, new_cert.public_bytes(serialization.Encoding.PEM).decode())

    async def renewed():
        status, _ = await tls_post(url, tls_context(new_ca_pem), "read_note", {"name": "renewed"})
        return status == 200

    check("...a renewed certificate is served without a restart", await wait_for(renewed, 25, 1), gw.stderr()[-400:])
    served = await expiry()
    check(
        "...and its expiry is the metric's now",
        served == int(new_cert.not_valid_after_utc.timestamp()),
        (served, new_cert.not_valid_after_utc),
    )
    # A renewal half done (the old key under the new certificate) does not
    # load: it is said, and the certificate served stays the one before.
    write_pem(key_pem, key=leaf_key)
    said = await wait_for(lambda: "does not load" in gw.stderr(), 25, 1)
    check(
        "...a pair that does not load is said, and the one before is still served",
        said and await renewed(),
        gw.stderr()[-400:],
    )
    gw.stop()

    client_key, client_cert = make_client_cert(ca_key, ca_cert)
    client_pem = TMP / "listen-client.pem"
    write_pem(client_pem, cert=client_cert, key=client_key)
    other_key, other_cert = make_client_cert(new_ca_key, new_ca_cert)
    other_pem = TMP / "listen-client-other.pem"
    write_pem(other_pem, cert=other_cert, key=other_key)
    write_pem(cert_pem, cert=leaf_cert)
    write_pem(key_pem, key=leaf_key)
    gw = Gateway(
        "listen-mtls", "--tls-cert", cert_pem, "--tls-key", key_pem, "--tls-client-ca", ca_pem, upstream_args=upstream
    )
    url = f"https://127.0.0.1:{gw.port}/mcp"
    answers = {}
    for label, cert in [("none", None), ("other CA", other_pem), ("the CA's", client_pem)]:
        answers[label] = await tls_post(url, tls_context(ca_pem, cert), "read_note", {"name": f"mtls-{label}"})
    check(
        "--tls-client-ca: a client without a certificate is refused at the handshake, and nothing runs",
        answers["none"][0] != 200 and not ran(log, "read_note", name="mtls-none"),
        answers["none"],
    )
    check(
        "...one with another CA's certificate too",
        answers["other CA"][0] != 200 and not ran(log, "read_note", name="mtls-other CA"),
        answers["other CA"],
    )
    check(
        "...one with the CA's certificate gets through",
        answers["the CA's"][0] == 200 and ran(log, "read_note", name="mtls-the CA's"),
        answers["the CA's"],
    )
    gw.stop()
    other_key_pem = TMP / "listen-other-key.pem"
    write_pem(other_key_pem, key=new_key)
    for label, key, said in [
        ("a --tls-key that is no key", new_ca_pem, "--tls-key"),
        ("a --tls-key of another certificate", other_key_pem, "not the key"),
    ]:
        argv = [PROXY, "--listen", f"127.0.0.1:{free_port()}", "--tls-cert", cert_pem, "--tls-key", key]
        code, err = exits([*argv, "--", *upstream])
        check(f"{label}: refused at start, exit 64, saying why", code == 64 and said in err, (code, err[-300:]))


async def closed_by_peer(reader, within):
    """Whether the other end closed the connection within `within` seconds
    (nothing else arriving meanwhile but a response, which is read past)."""
    try:
        while await asyncio.wait_for(reader.read(65536), within):
            pass
        return True
    except (asyncio.TimeoutError, ConnectionError):
        return False


async def answered(port, within):
    """Whether a GET /healthz on a new connection is answered within
    `within` seconds, and the status line."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), within)
        return line.startswith(b"HTTP/1.1 200"), line
    except asyncio.TimeoutError:
        return False, b"(no answer)"
    finally:
        writer.close()


async def connection_bounds():
    """Every listener bounds header time and open connections: a client that
    opens connections and sends headers slowly (or idles between requests)
    loses them after --header-timeout, and past --max-connections a client
    waits until a place frees instead of the gateway holding sockets without
    end."""
    upstream = upstream_cmd(TMP / "bounds-upstream.jsonl", TMP / "notes-bounds")
    mport = free_port()
    gw = Gateway("bounds", "--header-timeout", "1", "--metrics", f"127.0.0.1:{mport}", upstream_args=upstream)
    check("gateway with --header-timeout 1 starts", gw.up, gw.stderr()[-300:])
    reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
    writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    await writer.drain()
    check("headers that never end: the connection is closed", await closed_by_peer(reader, 10))
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 10)
    check("a kept-alive connection is answered", status.startswith(b"HTTP/1.1 200"), status)
    check("...and closed once idle past the header time", await closed_by_peer(reader, 10))
    writer.close()
    # The approval pages (on --listen, no login) read a form's body for 10 s
    # at most: one that never comes holds nothing.
    reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
    writer.write(b"POST /approve/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n")
    await writer.drain()
    check("an approval form whose body never comes: the connection is closed", await closed_by_peer(reader, 20))
    writer.close()
    async with http_client() as http:
        text = (await http.get(f"http://127.0.0.1:{mport}/metrics")).text
    timeouts = metric_samples(text, "toolgate_http_header_timeouts_total").get(frozenset())
    check("metrics: the first two are counted (toolgate_http_header_timeouts_total)", timeouts == 2, timeouts)
    gw.stop()

    gw = Gateway("capped", "--max-connections", "2", "--metrics", f"127.0.0.1:{mport}", upstream_args=upstream)
    check("gateway with --max-connections 2 starts", gw.up, gw.stderr()[-300:])

    # wait_port's probe closed at once; its place frees once that is seen.
    async def none_open():
        return await open_connections(mport) == 0

    check("...the start-up probe's connection is seen closed", await wait_for(none_open))
    holders = []
    for _ in range(2):
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        await writer.drain()
        holders.append(writer)
    open_now = await open_connections(mport)
    check("metrics: two connections open on --listen (toolgate_http_connections)", open_now == 2, open_now)
    ok, line = await answered(gw.port, 2)
    check("a third client, past --max-connections: not served while both are held", not ok, line)
    holders[0].close()
    ok, line = await answered(gw.port, 10)
    check("...and served once one closes", ok, line)
    for writer in holders[1:]:
        writer.close()
    gw.stop()


async def open_connections(mport):
    """How many connections the metrics say are open on --listen."""
    async with http_client() as http:
        text = (await http.get(f"http://127.0.0.1:{mport}/metrics")).text
    return metric_samples(text, "toolgate_http_connections").get(frozenset({("listener", "mcp")}))


# ---------------------------------------------------------------------------


GATEWAYS = []
PROCS = []


async def section(name, coro):
    """Runs one part; an exception there is a failed check, and the next
    part still runs."""
    try:
        return await coro
    except Exception as e:
        check(f"{name}: ran to the end", False, error_text(e)[:1500])
        return None


async def main():
    global ISSUER
    help_text = subprocess.run([PROXY, "--help"], capture_output=True, text=True).stdout
    missing = [
        f
        for f in (
            "--auth",
            "--jwks",
            "--watch",
            "--mode",
            "--metrics",
            "--upstream-ca",
            "--upstream-cert",
            "--introspection-url",
            "--insecure-listen",
        )
        if f not in help_text
    ]
    check("the binary has the production flags", not missing, missing)
    if missing:
        return 1
    auth_server = AuthServer()
    ISSUER = auth_server.base
    started = time.monotonic()
    (TMP / "jwks.json").write_text(json.dumps({"keys": [JWK_RSA, JWK_EC]}))
    try:
        # The JWKS-URL steps wait 10 s between them: other sections run meanwhile.
        b = await section("JWKS URL: start", jwks_url_start(auth_server))
        await section("inbound auth", inbound_auth(auth_server))
        refetched_at = b and await section("JWKS URL: unknown kid", jwks_url_unknown(auth_server, *b))
        await section("TLS upstream", tls_upstream())
        await section("mutual TLS upstream", mtls_upstream())
        await section("upstream restart", upstream_restart())
        await section("readiness", readiness_is_the_shared_session_s())
        await section("graceful stop", graceful_stop())
        await section("stop past the grace", stop_past_the_grace())
        await section("token introspection", introspection(auth_server))
        await section("shadow", shadow())
        await section("watch", watch())
        await section("catalog reload", catalog_reload())
        await section("confirmation across an unchanged reload", confirmation_across_an_unchanged_reload())
        await section("failed reload", failed_reload())
        await section("reload burst", reload_burst())
        await section("URL-mode approval", url_mode_approval())
        if refetched_at:
            await section("JWKS URL: a key published later", jwks_url_later(auth_server, *b, refetched_at))
        await section("JWKS max age", jwks_max_age())
        await section("metrics", metrics())
        await section("open listener", open_listener())
        await section("origins", origins())
        await section("session limits", session_limits())
        await section("idle sessions", idle_sessions())
        await section("connection bounds", connection_bounds())
        await section("TLS on --listen", listen_tls())
        await section("shared-session tasks", shared_session_tasks())
        await section("private listing", private_listing())
    finally:
        for g in GATEWAYS:
            g.stop()
        for p in PROCS:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        auth_server.httpd.shutdown()
    print(f"({time.monotonic() - started:.1f} s; files in {TMP})")
    print(f"{'FAILED: ' + ', '.join(failures) if failures else 'all production checks passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    PROXY = sys.argv[1]
    TMP = Path(tempfile.mkdtemp(prefix="toolgate-production-"))
    sys.exit(asyncio.run(main()))
