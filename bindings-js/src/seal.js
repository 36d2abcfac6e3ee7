// Sealed `requestState` (MCP 2026-07-28, SEP-2322) for Node: the engine's
// seal payload (docs/spec.md §8, `Toolgate#sealPayload`) encrypted and
// authenticated with the host's keys, so the client carries a pending
// confirmation it can neither read nor forge. Byte-compatible with the Rust
// gateway (toolgate-proxy/src/seal.rs; tests/vectors/seals/request-state.json):
// - key = HKDF-SHA256(secret, no salt, info `toolgate/request-state/v1/aes-256-gcm`), 32 bytes;
// - key id = SHA-256(`toolgate/request-state/v1/kid:` ‖ key)[..4], a public fingerprint;
// - token = `tg1.` ‖ base64url-unpadded(key id ‖ 12-byte random nonce ‖ AES-256-GCM(payload) ‖ 16-byte tag),
//   with `tg1.` ‖ key id as associated data.
// Node only (node:crypto): the worker entry point does not export it.
import { createCipheriv, createDecipheriv, createHash, createSecretKey, hkdfSync, randomBytes } from 'node:crypto';
import { InvalidStateError, StateKeyError } from './errors.js';
import { wellFormed } from './inputs.js';

const PREFIX = 'tg1.';
const KDF_INFO = Buffer.from('toolgate/request-state/v1/aes-256-gcm', 'utf8');
const KID_INFO = Buffer.from('toolgate/request-state/v1/kid:', 'utf8');
const KID_LEN = 4;
const NONCE_LEN = 12;
const TAG_LEN = 16;
/** An operator secret shorter than this many bytes is refused. */
export const MIN_SECRET_BYTES = 32;
/** The longest token `open` reads, in bytes: a seal payload is a few hundred. */
export const MAX_STATE_TOKEN_BYTES = 16384;
const BASE64URL = /^[A-Za-z0-9_-]*$/;

// Rust's `str::trim` (Unicode White_Space), as the gateway trims secrets.
const RUST_WS = '[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const TRIM = new RegExp(`^${RUST_WS}+|${RUST_WS}+$`, 'g');

/**
 * The key and key id of one secret. RFC 5869's "no salt" is HashLen zero
 * bytes; an empty HMAC key is zero-padded to the same block, so node's empty
 * salt is the same extraction (checked against the gateway's vectors).
 * @param {Uint8Array} secret
 * @returns {{ kid: Buffer, key: import('node:crypto').KeyObject }}
 */
function derive(secret) {
  const key = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), KDF_INFO, 32));
  const kid = createHash('sha256').update(KID_INFO).update(key).digest().subarray(0, KID_LEN);
  const ring = { kid: Buffer.from(kid), key: createSecretKey(key) };
  key.fill(0);
  return ring;
}

/** @param {Buffer} kid */
const associatedData = (kid) => Buffer.concat([Buffer.from(PREFIX, 'utf8'), kid]);

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The host's keys for sealed `requestState` (the Rust gateway's `KeyRing`):
 * the first secret seals, every secret opens, so keys rotate without
 * dropping pending confirmations (put the new secret first, keep the old
 * one until its tokens have expired). What a payload binds and when it
 * expires is the engine's to check (`decide` with `{ seal }`); fresh ids and
 * one-time use are the host's. Node only (`node:crypto`).
 */
export class StateKeys {
  /** @type {{ kid: Buffer, key: import('node:crypto').KeyObject }[]} */
  #keys;

  /**
   * Throws StateKeyError (`STATE_KEY_INVALID`): no secret, a secret under 32
   * bytes, or a repeated one.
   * @param {readonly (string | Uint8Array)[]} secrets operator secrets, the sealing one first; a string is taken as its UTF-8 bytes
   */
  constructor(secrets) {
    if (!Array.isArray(secrets)) throw new TypeError('secrets must be an array of strings or Uint8Arrays');
    if (secrets.length === 0) throw new StateKeyError('empty', -1, 'no state secret given');
    /** @type {{ kid: Buffer, key: import('node:crypto').KeyObject }[]} */
    const keys = [];
    for (const [index, secret] of secrets.entries()) {
      let bytes;
      // UTF-8 cannot carry a lone surrogate: it would become U+FFFD, another secret than the one given.
      if (typeof secret === 'string' && !wellFormed(secret)) throw new TypeError(`state secret ${index} holds a lone surrogate, which UTF-8 cannot carry`);
      if (typeof secret === 'string') bytes = Buffer.from(secret, 'utf8');
      else if (secret instanceof Uint8Array) bytes = secret;
      else throw new TypeError(`state secret ${index} must be a string or a Uint8Array`);
      if (bytes.length < MIN_SECRET_BYTES) {
        throw new StateKeyError('too-short', index, `state secret ${index} is ${bytes.length} bytes; at least ${MIN_SECRET_BYTES} bytes of secret randomness are needed`);
      }
      const key = derive(bytes);
      if (keys.some((k) => k.kid.equals(key.kid))) throw new StateKeyError('duplicate', index, `state secret ${index} repeats an earlier one`);
      keys.push(key);
    }
    this.#keys = keys;
  }

  /**
   * A ring from text, as the gateway reads `--state-secret-file` and
   * `TOOLGATE_STATE_SECRET`: one secret per line or `,`-separated, trimmed,
   * blank items and `#` comments skipped, the sealing secret first.
   * @param {string} text
   * @returns {StateKeys}
   */
  static fromText(text) {
    if (typeof text !== 'string') throw new TypeError('text must be a string');
    const secrets = text
      .split('\n')
      .flatMap((line) => line.split(','))
      .map((s) => s.replace(TRIM, ''))
      .filter((s) => s !== '' && !s.startsWith('#'));
    return new StateKeys(secrets);
  }

  /** The sealing key's public fingerprint (8 hex digits: its key id), for start-up messages. */
  get fingerprint() {
    return this.#keys[0].kid.toString('hex');
  }

  /**
   * Encrypts `payload` (as UTF-8) under the first key, with a fresh random
   * nonce: two seals of one payload differ.
   * @param {string} payload what `Toolgate#sealPayload` returned
   * @returns {string} a `tg1.` token
   */
  seal(payload) {
    if (typeof payload !== 'string') throw new TypeError('payload must be a string');
    // Sealed as U+FFFD, it would not open to the payload given.
    if (!wellFormed(payload)) throw new TypeError('payload holds a lone surrogate, which UTF-8 cannot carry');
    const { kid, key } = this.#keys[0];
    const nonce = randomBytes(NONCE_LEN);
    const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_LEN });
    cipher.setAAD(associatedData(kid));
    const sealed = Buffer.concat([cipher.update(payload, 'utf8'), cipher.final()]);
    const raw = Buffer.concat([kid, nonce, sealed, cipher.getAuthTag()]);
    const token = PREFIX + raw.toString('base64url');
    // open() refuses a longer token: the retry would fail as
    // CONFIRMATION_INVALID with nothing said about size.
    if (token.length > MAX_STATE_TOKEN_BYTES) throw new RangeError(`the sealed state would be ${token.length} bytes, over the ${MAX_STATE_TOKEN_BYTES} a retry may carry`);
    return token;
  }

  /**
   * Decrypts a token sealed by any key of the ring. Throws InvalidStateError
   * (`STATE_INVALID`) for anything else (a non-string included): answer
   * every refusal alike, by deciding the call with confirmation `'invalid'`.
   * @param {unknown} token the client's `requestState`
   * @returns {string} the payload, exactly as sealed
   */
  open(token) {
    if (typeof token !== 'string' || token.length > MAX_STATE_TOKEN_BYTES || Buffer.byteLength(token, 'utf8') > MAX_STATE_TOKEN_BYTES || !token.startsWith(PREFIX)) {
      throw new InvalidStateError('malformed', 'malformed token');
    }
    const body = token.slice(PREFIX.length);
    // Node's base64url decoder is lenient; only the canonical spelling opens.
    if (!BASE64URL.test(body)) throw new InvalidStateError('malformed', 'malformed token');
    const raw = Buffer.from(body, 'base64url');
    if (raw.toString('base64url') !== body || raw.length < KID_LEN + NONCE_LEN + TAG_LEN) {
      throw new InvalidStateError('malformed', 'malformed token');
    }
    const kid = raw.subarray(0, KID_LEN);
    const ring = this.#keys.find((k) => k.kid.equals(kid));
    if (!ring) throw new InvalidStateError('unknown-key', 'sealed with a key this host does not hold');
    const nonce = raw.subarray(KID_LEN, KID_LEN + NONCE_LEN);
    const sealed = raw.subarray(KID_LEN + NONCE_LEN, raw.length - TAG_LEN);
    const tag = raw.subarray(raw.length - TAG_LEN);
    let plain;
    try {
      const decipher = createDecipheriv('aes-256-gcm', ring.key, nonce, { authTagLength: TAG_LEN });
      decipher.setAAD(associatedData(ring.kid));
      decipher.setAuthTag(tag);
      plain = Buffer.concat([decipher.update(sealed), decipher.final()]);
    } catch {
      throw new InvalidStateError('forged', 'altered or forged token');
    }
    try {
      return utf8.decode(plain);
    } catch {
      throw new InvalidStateError('malformed', 'the sealed payload is not UTF-8');
    }
  }
}
