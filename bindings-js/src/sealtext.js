// The sealed requestState's rules apart from the cryptography: the token's
// framing, the key ring's secrets and the gateway's secret-text format, in
// one place for the Node codec (seal.js, node:crypto) and the WebCrypto one
// (webseal.js, edge workers). Byte-compatible with the Rust gateway
// (toolgate-proxy/src/seal.rs; tests/vectors/seals/request-state.json):
// - key = HKDF-SHA256(secret, no salt, info `toolgate/request-state/v1/aes-256-gcm`), 32 bytes;
// - key id = SHA-256(`toolgate/request-state/v1/kid:` ‖ key)[..4], a public fingerprint;
// - token = `tg1.` ‖ base64url-unpadded(key id ‖ 12-byte random nonce ‖ AES-256-GCM(payload) ‖ 16-byte tag),
//   with `tg1.` ‖ key id as associated data.
import { InvalidStateError, StateKeyError } from './errors.js';
import { concatBytes, wellFormed } from './inputs.js';

export { concatBytes };

export const PREFIX = 'tg1.';
const encoder = new TextEncoder();
export const KDF_INFO = encoder.encode('toolgate/request-state/v1/aes-256-gcm');
export const KID_INFO = encoder.encode('toolgate/request-state/v1/kid:');
export const KID_LEN = 4;
export const NONCE_LEN = 12;
export const TAG_LEN = 16;
/** An operator secret shorter than this many bytes is refused. */
export const MIN_SECRET_BYTES = 32;
/** The longest token `open` reads, in bytes: a seal payload is a few hundred. */
export const MAX_STATE_TOKEN_BYTES = 16384;
const BASE64URL = /^[A-Za-z0-9_-]*$/;

// Rust's `str::trim` (Unicode White_Space), as the gateway trims secrets.
const RUST_WS = '[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const TRIM = new RegExp(`^${RUST_WS}+|${RUST_WS}+$`, 'g');

/**
 * The secrets in a text, as the gateway reads `--state-secret-file` and
 * `TOOLGATE_STATE_SECRET`: one per line or `,`-separated, trimmed, blank
 * items and `#` comments skipped, the sealing secret first.
 * @param {unknown} text
 * @returns {string[]}
 */
export function secretsFromText(text) {
  if (typeof text !== 'string') throw new TypeError('text must be a string');
  return text
    .split('\n')
    .flatMap((line) => line.split(','))
    .map((s) => s.replace(TRIM, ''))
    .filter((s) => s !== '' && !s.startsWith('#'));
}

/**
 * The bytes of each secret of a ring, checked: an array, not empty, each a
 * string (its UTF-8) or bytes of at least MIN_SECRET_BYTES. Throws
 * StateKeyError (`STATE_KEY_INVALID`) or TypeError.
 * @param {unknown} secrets
 * @returns {Uint8Array[]}
 */
export function secretBytes(secrets) {
  if (!Array.isArray(secrets)) throw new TypeError('secrets must be an array of strings or Uint8Arrays');
  if (secrets.length === 0) throw new StateKeyError('empty', -1, 'no state secret given');
  return secrets.map((secret, index) => {
    let bytes;
    // UTF-8 cannot carry a lone surrogate: it would become U+FFFD, another secret than the one given.
    if (typeof secret === 'string' && !wellFormed(secret)) throw new TypeError(`state secret ${index} holds a lone surrogate, which UTF-8 cannot carry`);
    if (typeof secret === 'string') bytes = encoder.encode(secret);
    else if (secret instanceof Uint8Array) bytes = secret;
    else throw new TypeError(`state secret ${index} must be a string or a Uint8Array`);
    if (bytes.length < MIN_SECRET_BYTES) {
      throw new StateKeyError('too-short', index, `state secret ${index} is ${bytes.length} bytes; at least ${MIN_SECRET_BYTES} bytes of secret randomness are needed`);
    }
    return bytes;
  });
}

/**
 * Throws StateKeyError `duplicate` when a key id repeats an earlier one.
 * @param {Uint8Array[]} kids in ring order
 */
export function checkDistinct(kids) {
  kids.forEach((kid, index) => {
    if (kids.slice(0, index).some((other) => sameBytes(other, kid))) {
      throw new StateKeyError('duplicate', index, `state secret ${index} repeats an earlier one`);
    }
  });
}

/** @param {Uint8Array} a @param {Uint8Array} b */
export function sameBytes(a, b) {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

/** The associated data of a key's tokens: `tg1.` ‖ key id. @param {Uint8Array} kid */
export const associatedData = (kid) => concatBytes(encoder.encode(PREFIX), kid);

/** @param {Uint8Array} bytes */
export const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

/** @param {Uint8Array} bytes */
function base64url(bytes) {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * The token of sealed bytes (key id ‖ nonce ‖ ciphertext ‖ tag). Throws
 * RangeError when it would be longer than `open` reads: the retry would
 * fail as CONFIRMATION_INVALID with nothing said about size.
 * @param {Uint8Array} raw
 */
export function toToken(raw) {
  const token = PREFIX + base64url(raw);
  if (token.length > MAX_STATE_TOKEN_BYTES) throw new RangeError(`the sealed state would be ${token.length} bytes, over the ${MAX_STATE_TOKEN_BYTES} a retry may carry`);
  return token;
}

const malformed = () => new InvalidStateError('malformed', 'malformed token');

/**
 * The parts of a token, or InvalidStateError `malformed`: a non-string, over
 * 16 KiB, another prefix, a spelling other than canonical unpadded base64url
 * (decoders are lenient; only one spelling opens), too short.
 * @param {unknown} token
 * @returns {{ kid: Uint8Array, nonce: Uint8Array, sealed: Uint8Array }} sealed: ciphertext ‖ tag
 */
export function fromToken(token) {
  if (typeof token !== 'string' || token.length > MAX_STATE_TOKEN_BYTES || encoder.encode(token).length > MAX_STATE_TOKEN_BYTES || !token.startsWith(PREFIX)) {
    throw malformed();
  }
  const body = token.slice(PREFIX.length);
  if (!BASE64URL.test(body) || body.length % 4 === 1) throw malformed();
  const binary = atob(body.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (body.length % 4)) % 4));
  const raw = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  if (base64url(raw) !== body || raw.length < KID_LEN + NONCE_LEN + TAG_LEN) throw malformed();
  return { kid: raw.subarray(0, KID_LEN), nonce: raw.subarray(KID_LEN, KID_LEN + NONCE_LEN), sealed: raw.subarray(KID_LEN + NONCE_LEN) };
}

/** A payload to seal, as UTF-8. @param {unknown} payload */
export function payloadBytes(payload) {
  if (typeof payload !== 'string') throw new TypeError('payload must be a string');
  // Sealed as U+FFFD, it would not open to the payload given.
  if (!wellFormed(payload)) throw new TypeError('payload holds a lone surrogate, which UTF-8 cannot carry');
  return encoder.encode(payload);
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The opened payload, or InvalidStateError `malformed` if it is not UTF-8. @param {Uint8Array} plain */
export function payloadText(plain) {
  try {
    return utf8.decode(plain);
  } catch {
    throw new InvalidStateError('malformed', 'the sealed payload is not UTF-8');
  }
}

export const unknownKey = () => new InvalidStateError('unknown-key', 'sealed with a key this host does not hold');
export const forged = () => new InvalidStateError('forged', 'altered or forged token');
