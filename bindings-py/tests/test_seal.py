"""Sealed requestState (mcp_toolgate.seal): the Rust gateway's tokens
(tests/vectors/seals/request-state.json) open here to the same payload, or are
refused, and the engine decides the opened payloads as the gateway does; plus
round trip, rotation, tampering and key-ring checks (as bindings-js's
test/seal.test.mjs)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from conftest import VECTORS
from mcp_toolgate import RuleSet, ToolgateError, seal
from mcp_toolgate.seal import MAX_STATE_TOKEN_BYTES, InvalidStateError, StateKeyError, StateKeys

VECTOR_PATH = VECTORS / "seals" / "request-state.json"
DOC: dict[str, Any] = json.loads(VECTOR_PATH.read_text(encoding="utf-8"))
A = "an-operator-secret-of-at-least-32-bytes-A"
B = "an-operator-secret-of-at-least-32-bytes-B"


def b64d(body: str) -> bytes:
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def spell(raw: bytes) -> str:
    return "tg1." + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def refused(fn: Callable[[], object], reason: str | None = None) -> None:
    with pytest.raises(InvalidStateError) as info:
        fn()
    e = info.value
    assert isinstance(e, ToolgateError)
    assert e.code == "STATE_INVALID"
    if reason is not None:
        assert e.reason == reason


@pytest.fixture(scope="module")
def vector_rules() -> RuleSet:
    base = VECTOR_PATH.parent
    return RuleSet.load(
        catalog=(base / DOC["catalog"]).read_text(encoding="utf-8"),
        policy=(base / DOC["policy"]).read_text(encoding="utf-8"),
    )


def test_hkdf_no_salt_is_rfc5869() -> None:
    # RFC 5869 A.3: SHA-256, salt and info not provided (None is HashLen zero bytes).
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    okm = HKDF(algorithm=hashes.SHA256(), length=42, salt=None, info=b"").derive(b"\x0b" * 22)
    assert okm.hex() == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"


@pytest.mark.parametrize("case", DOC["cases"], ids=lambda c: c["name"])
def test_seal_vectors(case: dict[str, Any], vector_rules: RuleSet) -> None:
    keys = StateKeys(DOC["secrets"])
    if case["payload"] is None:
        refused(lambda: keys.open(case["token"]))
        return
    payload = keys.open(case["token"])
    assert payload == case["payload"]
    seal = {"payload": payload, "caller": case["caller"], "now_ms": case["now_ms"]}
    outcome = vector_rules.decide(case["call"], {}, {"seal": seal})
    assert outcome.decision.code == case["expect_code"]
    assert (outcome.forward is not None) == (case["expect_code"] is None)


def test_seal_vectors_cover_the_cases(vector_rules: RuleSet) -> None:
    assert len(DOC["cases"]) >= 7
    assert any(c["payload"] is None for c in DOC["cases"])
    # A payload this host sealed itself decides the same.
    keys = StateKeys(DOC["secrets"])
    call = DOC["cases"][0]["call"]
    payload = vector_rules.seal_payload(call, "user-7", "CCCCCCCCCCCCCCCCCCCCCC", 1_900_000_000_000)
    opened = keys.open(keys.seal(payload))
    assert opened == payload

    def code(caller: str, now_ms: int) -> str | None:
        seal = {"payload": opened, "caller": caller, "now_ms": now_ms}
        return vector_rules.decide(call, {}, {"seal": seal}).decision.code

    assert code("user-7", 1_899_999_000_000) is None
    assert code("user-8", 1_899_999_000_000) == "CONFIRMATION_INVALID"
    assert code("user-7", 1_900_000_000_001) == "CONFIRMATION_INVALID"
    # A refused token is decided as "invalid".
    assert vector_rules.decide(call, {}, "invalid").decision.code == "CONFIRMATION_INVALID"


def test_fingerprint_matches_the_gateway_key_id() -> None:
    for secret, case in ((DOC["secrets"][0], DOC["cases"][0]), (DOC["secrets"][1], DOC["cases"][1])):
        assert StateKeys([secret]).fingerprint == b64d(case["token"][4:])[:4].hex()


def test_round_trip() -> None:
    keys = StateKeys([A])
    for payload in ["payload", "", "ção ✓ 🦀", "x" * 5000]:
        token = keys.seal(payload)
        assert token.startswith("tg1.")
        assert set(token[4:]) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        assert keys.open(token) == payload
    assert keys.seal("payload") != keys.seal("payload")
    assert len(keys.fingerprint) == 8 and int(keys.fingerprint, 16) >= 0
    assert keys.fingerprint == b64d(keys.seal("p")[4:])[:4].hex()
    assert A not in repr(keys) and keys.fingerprint in repr(keys)
    # The same secret as str, bytes or bytearray is the same key.
    assert StateKeys([A.encode()]).open(keys.seal("p")) == "p"
    assert StateKeys((bytearray(A.encode()),)).fingerprint == keys.fingerprint
    with pytest.raises(TypeError):
        keys.seal(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        keys.seal(b"payload")  # type: ignore[arg-type]


def test_rotation() -> None:
    old = StateKeys([A])
    token = old.seal("payload")
    rotated = StateKeys([B, A])
    assert rotated.open(token) == "payload"
    assert rotated.fingerprint != old.fingerprint
    assert rotated.fingerprint == StateKeys([B]).fingerprint
    refused(lambda: old.open(rotated.seal("new")), "unknown-key")
    refused(lambda: StateKeys([B]).open(token), "unknown-key")
    from_text = StateKeys.from_text(f"# current first\n{B}\r\n\n{A}\n")
    assert from_text.fingerprint == rotated.fingerprint
    assert from_text.open(token) == "payload"
    assert StateKeys.from_text(f" {B} , {A} ").open(token) == "payload"
    assert StateKeys.from_text(f"\u3000{B}\u00a0,\t{A}\u2029").fingerprint == rotated.fingerprint
    # Rust's trim keeps U+001F (Python's str.strip() would take it): another secret.
    assert StateKeys.from_text(f"{A}\x1f").fingerprint != old.fingerprint


def test_every_bit_of_a_token_is_checked() -> None:
    keys = StateKeys([A])
    raw = b64d(keys.seal("payload")[4:])
    for i in range(len(raw)):
        for bit in range(8):
            t = bytearray(raw)
            t[i] ^= 1 << bit
            refused(lambda t=t: keys.open(spell(bytes(t))), "unknown-key" if i < 4 else "forged")
    refused(lambda: keys.open(spell(raw[:-1])), "forged")
    refused(lambda: keys.open(spell(raw[:31])), "malformed")
    refused(lambda: keys.open(spell(raw + b"\0")), "forged")


def test_malformed_and_non_canonical_tokens() -> None:
    keys = StateKeys([A])
    token = keys.seal("payload")
    raw = b64d(token[4:])
    assert keys.open(token) == "payload"
    for bad in [
        "",
        "tg1.",
        "v1.abc",
        "tg1.!!!!",
        f"{token}=",
        f"{token}==",
        token.replace("tg1.", "tg2."),
        token.replace("tg1.", "TG1."),
        f"{token} ",
        f" {token}",
        f"{token}\n",
        f"tg1.{token[4:20]}\n{token[20:]}",
        "tg1." + base64.b64encode(raw).decode(),
        f"tg1.{token[4:20]}+/{token[22:]}",
        token[:-1] + "é",
        f"{token}A",
    ]:
        if bad == token:
            continue
        refused(lambda bad=bad: keys.open(bad))
    # Non-canonical trailing bits decode to the same bytes, yet are refused.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for payload in ["payload!", "payload!!"]:
        body = keys.seal(payload)[4:]
        assert len(body) % 4 != 0
        sibling = alphabet[alphabet.index(body[-1]) ^ 1]
        other = body[:-1] + sibling
        assert b64d(other) == b64d(body)
        assert keys.open(f"tg1.{body}") == payload
        refused(lambda other=other: keys.open(f"tg1.{other}"), "malformed")
    for bad_type in [None, 1, {}, [token], token.encode(), bytearray(token.encode())]:
        refused(lambda bad_type=bad_type: keys.open(bad_type), "malformed")  # type: ignore[arg-type]


def test_size_limit() -> None:
    keys = StateKeys([A])
    # Not sealed when open would refuse it for its size; refused before decoding.
    with pytest.raises(ValueError, match="over the 16384"):
        keys.seal("x" * 12_300)
    fits = keys.seal("x" * 12_000)
    assert len(fits) <= MAX_STATE_TOKEN_BYTES
    assert len(keys.open(fits)) == 12_000
    refused(lambda: keys.open(fits + "A" * MAX_STATE_TOKEN_BYTES), "malformed")
    # A lone surrogate cannot be written as UTF-8: a TypeError, as Node throws, not a UnicodeEncodeError.
    with pytest.raises(TypeError, match="lone surrogate"):
        keys.seal("lone\ud800")
    with pytest.raises(TypeError, match="lone surrogate"):
        StateKeys(["\ud800" * 32])


def test_non_utf8_payload_is_refused() -> None:
    # Only a holder of the key can seal bytes that are not UTF-8; still refused.
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    keys = StateKeys([A])
    (key,) = keys._keys
    nonce = b"\1" * 12
    raw = key.kid + nonce + key.cipher.encrypt(nonce, b"\xff\xfe", key.aad)
    assert isinstance(key.cipher, AESGCM)
    refused(lambda: keys.open(spell(raw)), "malformed")


def test_key_ring_refusals() -> None:
    def bad_ring(secrets: Any, reason: str, index: int) -> None:
        with pytest.raises(StateKeyError) as info:
            StateKeys(secrets)
        e = info.value
        assert isinstance(e, ToolgateError)
        assert (e.code, e.reason, e.index) == ("STATE_KEY_INVALID", reason, index)

    bad_ring(["short"], "too-short", 0)
    bad_ring([A, "x" * 31], "too-short", 1)
    bad_ring([A, bytes(31)], "too-short", 1)
    # Length counts UTF-8 bytes: 15 × "é" + "a" is 31 bytes, 16 × "é" is 32.
    bad_ring(["é" * 15 + "a"], "too-short", 0)
    assert len(StateKeys(["é" * 16]).fingerprint) == 8
    bad_ring([A, A], "duplicate", 1)
    bad_ring([A, B, A.encode()], "duplicate", 2)
    bad_ring([], "empty", -1)
    bad_ring((), "empty", -1)
    with pytest.raises(StateKeyError) as info:
        StateKeys.from_text("# only a comment\n , \n")
    assert info.value.reason == "empty"
    for not_a_list in [A, A.encode(), None, 42]:
        with pytest.raises(TypeError):
            StateKeys(not_a_list)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        StateKeys([A, 42])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        StateKeys.from_text(None)  # type: ignore[arg-type]
    # The error never carries the secret.
    with pytest.raises(StateKeyError) as info:
        StateKeys(["a-short-secret"])
    assert "a-short-secret" not in str(info.value)


def test_lazy_export() -> None:
    # `import mcp_toolgate` does not import cryptography; mcp_toolgate.StateKeys does.
    code = (
        "import sys, mcp_toolgate\n"
        "assert 'cryptography' not in sys.modules and 'mcp_toolgate.seal' not in sys.modules\n"
        "from mcp_toolgate import StateKeys, InvalidStateError, StateKeyError, MIN_SECRET_BYTES\n"
        "assert StateKeys is sys.modules['mcp_toolgate.seal'].StateKeys and MIN_SECRET_BYTES == 32\n"
        "assert issubclass(InvalidStateError, mcp_toolgate.ToolgateError)\n"
        "assert 'cryptography' not in sys.modules\n"
        "StateKeys(['x' * 32])\n"
        "assert 'cryptography' in sys.modules\n"
        "try:\n"
        "    mcp_toolgate.NoSuchName\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert seal.StateKeys is StateKeys
