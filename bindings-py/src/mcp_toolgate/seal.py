"""Sealed ``requestState`` (MCP 2026-07-28, SEP-2322) for Python.

The engine's seal payload (docs/spec.md §8, :meth:`mcp_toolgate.RuleSet.seal_payload`)
encrypted and authenticated with the host's keys, so the client carries a
pending confirmation it can neither read nor forge. Byte-compatible with the
Rust gateway (toolgate-proxy/src/seal.rs) and the Node port
(bindings-js/src/seal.js); checked against tests/vectors/seals/request-state.json:

- key = HKDF-SHA256(secret, no salt, info ``toolgate/request-state/v1/aes-256-gcm``), 32 bytes;
- key id = SHA-256(``toolgate/request-state/v1/kid:`` ‖ key)[:4], a public fingerprint;
- token = ``tg1.`` ‖ base64url-unpadded(key id ‖ 12-byte random nonce ‖ AES-256-GCM(payload) ‖ 16-byte tag),
  with ``tg1.`` ‖ key id as associated data.

Needs the ``cryptography`` package (``pip install 'mcp-toolgate[seal]'``; the
``mcp`` SDK already depends on it). It is imported when the first
:class:`StateKeys` is built, not when this module (or ``mcp_toolgate``) is.

    >>> keys = StateKeys.from_text(os.environ["TOOLGATE_STATE_SECRET"])  # "new,old"
    >>> token = keys.seal(rules.seal_payload(call, caller, id, expires_ms))
    >>> payload = keys.open(token)          # or InvalidStateError
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Sequence
from typing import Any

from ._rules import ToolgateError

__all__ = [
    "MAX_STATE_TOKEN_BYTES",
    "MIN_SECRET_BYTES",
    "InvalidStateError",
    "StateKeyError",
    "StateKeys",
]

_PREFIX = "tg1."
_KDF_INFO = b"toolgate/request-state/v1/aes-256-gcm"
_KID_INFO = b"toolgate/request-state/v1/kid:"
_KID_LEN = 4
_NONCE_LEN = 12
_TAG_LEN = 16
#: An operator secret shorter than this many bytes is refused.
MIN_SECRET_BYTES = 32
#: The longest token :meth:`StateKeys.open` reads, in bytes: a seal payload is a few hundred.
MAX_STATE_TOKEN_BYTES = 16384

_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
# Rust's `str::trim` (Unicode White_Space), as the gateway trims secrets;
# Python's own `str.strip()` also takes U+001C..U+001F, which Rust keeps.
_RUST_WS = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"


class StateKeyError(ToolgateError):
    """A key ring could not be built (``STATE_KEY_INVALID``): no secret
    (``reason`` ``"empty"``, ``index`` -1), a secret shorter than 32 bytes
    (``"too-short"``) or one that repeats an earlier one (``"duplicate"``);
    ``index`` is the secret's position. The message never carries a secret."""

    def __init__(self, reason: str, index: int, message: str) -> None:
        super().__init__("STATE_KEY_INVALID", message)
        self.reason = reason
        self.index = index


class InvalidStateError(ToolgateError):
    """A ``requestState`` token was not opened (``STATE_INVALID``). ``reason``
    (``"malformed"``, ``"unknown-key"`` or ``"forged"``) is for the log only:
    answer every refusal alike, by deciding the call with confirmation
    ``"invalid"``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__("STATE_INVALID", message)
        self.reason = reason


def _crypto() -> tuple[Any, Any, Any, Any]:
    try:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "mcp_toolgate.seal needs the 'cryptography' package (>= 42): pip install 'mcp-toolgate[seal]'"
        ) from e
    return AESGCM, HKDF, hashes, InvalidTag


def _secret_bytes(secret: object, index: int) -> bytes:
    if isinstance(secret, str):
        try:
            return secret.encode("utf-8")
        except UnicodeEncodeError:
            raise TypeError(f"state secret {index} holds a lone surrogate, which UTF-8 cannot carry") from None
    if isinstance(secret, (bytes, bytearray, memoryview)):
        return bytes(secret)
    raise TypeError(f"state secret {index} must be a str or bytes")


def _malformed(message: str = "malformed token") -> InvalidStateError:
    return InvalidStateError("malformed", message)


class _Key:
    __slots__ = ("aad", "cipher", "kid")

    def __init__(self, kid: bytes, cipher: Any) -> None:
        self.kid = kid
        self.cipher = cipher
        self.aad = _PREFIX.encode("ascii") + kid


class StateKeys:
    """The host's keys for sealed ``requestState`` (the Rust gateway's
    ``KeyRing``): the first secret seals, every secret opens, so keys rotate
    without dropping pending confirmations (put the new secret first, keep the
    old one until its tokens have expired). What a payload binds and when it
    expires is the engine's to check (``RuleSet.decide`` with ``{"seal": ...}``);
    fresh ids and one-time use are the host's.

    ``secrets``: operator secrets, the sealing one first; a ``str`` is taken
    as its UTF-8 bytes. Raises :class:`StateKeyError` (``STATE_KEY_INVALID``)
    for no secret, a secret under 32 bytes or a repeated one; ``TypeError``
    for anything that is not a sequence of ``str`` / ``bytes``."""

    __slots__ = ("_invalid_tag", "_keys")

    def __init__(self, secrets: Sequence[str | bytes]) -> None:
        if isinstance(secrets, (str, bytes, bytearray, memoryview)) or not isinstance(secrets, Sequence):
            raise TypeError("secrets must be a sequence of str or bytes")
        if len(secrets) == 0:
            raise StateKeyError("empty", -1, "no state secret given")
        aesgcm, hkdf, hashes, invalid_tag = _crypto()
        keys: list[_Key] = []
        for index, secret in enumerate(secrets):
            data = _secret_bytes(secret, index)
            if len(data) < MIN_SECRET_BYTES:
                raise StateKeyError(
                    "too-short",
                    index,
                    f"state secret {index} is {len(data)} bytes; "
                    f"at least {MIN_SECRET_BYTES} bytes of secret randomness are needed",
                )
            key = hkdf(algorithm=hashes.SHA256(), length=32, salt=None, info=_KDF_INFO).derive(data)
            kid = hashlib.sha256(_KID_INFO + key).digest()[:_KID_LEN]
            if any(k.kid == kid for k in keys):
                raise StateKeyError("duplicate", index, f"state secret {index} repeats an earlier one")
            keys.append(_Key(kid, aesgcm(key)))
        self._keys: tuple[_Key, ...] = tuple(keys)
        self._invalid_tag = invalid_tag

    @classmethod
    def from_text(cls, text: str) -> StateKeys:
        """A ring from text, as the gateway reads ``--state-secret-file`` and
        ``TOOLGATE_STATE_SECRET``: one secret per line or ``,``-separated,
        trimmed, blank items and ``#`` comments skipped, the sealing secret first."""
        if not isinstance(text, str):
            raise TypeError("text must be a str")
        secrets = [
            item
            for line in text.split("\n")
            for part in line.split(",")
            if (item := part.strip(_RUST_WS)) and not item.startswith("#")
        ]
        return cls(secrets)

    @property
    def fingerprint(self) -> str:
        """The sealing key's public fingerprint (8 hex digits: its key id), for start-up messages."""
        return self._keys[0].kid.hex()

    def __repr__(self) -> str:
        return f"StateKeys(keys={len(self._keys)}, fingerprint={self.fingerprint!r})"

    def seal(self, payload: str) -> str:
        """Encrypts ``payload`` (as UTF-8) under the first key with a fresh
        random nonce (two seals of one payload differ); returns a ``tg1.`` token."""
        if not isinstance(payload, str):
            raise TypeError("payload must be a str")
        try:
            data = payload.encode("utf-8")
        except UnicodeEncodeError:
            raise TypeError("payload holds a lone surrogate, which UTF-8 cannot carry") from None
        key = self._keys[0]
        nonce = os.urandom(_NONCE_LEN)
        sealed = key.cipher.encrypt(nonce, data, key.aad)
        body = base64.urlsafe_b64encode(key.kid + nonce + sealed).rstrip(b"=").decode("ascii")
        token = _PREFIX + body
        # open() refuses a longer token: the retry would fail as
        # CONFIRMATION_INVALID with nothing said about size.
        if len(token) > MAX_STATE_TOKEN_BYTES:
            raise ValueError(
                f"the sealed state would be {len(token)} bytes, over the {MAX_STATE_TOKEN_BYTES} a retry may carry"
            )
        return token

    def open(self, token: str) -> str:
        """Decrypts a token sealed by any key of the ring and returns the
        payload exactly as sealed. Raises :class:`InvalidStateError`
        (``STATE_INVALID``) for anything else: a non-``str``, a token over
        16 KiB, another prefix, a non-canonical base64url spelling, a key not
        in the ring, any altered bit."""
        if not isinstance(token, str) or len(token) > MAX_STATE_TOKEN_BYTES or not token.startswith(_PREFIX):
            raise _malformed()
        body = token[len(_PREFIX) :]
        # Only the canonical spelling opens (Python's decoder skips stray characters).
        if not token.isascii() or not _BASE64URL.fullmatch(body):
            raise _malformed()
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            raise _malformed() from None
        if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != body:
            raise _malformed()
        if len(raw) < _KID_LEN + _NONCE_LEN + _TAG_LEN:
            raise _malformed()
        kid = raw[:_KID_LEN]
        key = next((k for k in self._keys if k.kid == kid), None)
        if key is None:
            raise InvalidStateError("unknown-key", "sealed with a key this host does not hold")
        nonce = raw[_KID_LEN : _KID_LEN + _NONCE_LEN]
        try:
            plain = key.cipher.decrypt(nonce, raw[_KID_LEN + _NONCE_LEN :], key.aad)
        except self._invalid_tag:
            raise InvalidStateError("forged", "altered or forged token") from None
        try:
            return plain.decode("utf-8")
        except UnicodeDecodeError:
            raise _malformed("the sealed payload is not UTF-8") from None
