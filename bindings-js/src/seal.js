// Sealed `requestState` (MCP 2026-07-28, SEP-2322) for Node: the engine's
// seal payload (docs/spec.md §8, `Toolgate#sealPayload`) encrypted and
// authenticated with the host's keys, so the client carries a pending
// confirmation it can neither read nor forge. The format and every rule but
// the cryptography are sealtext.js's (shared with webseal.js, the WebCrypto
// codec for edge workers), byte-compatible with the Rust gateway.
// Node only (node:crypto): the worker entry point exports WebStateKeys instead.
import { createCipheriv, createDecipheriv, createHash, createSecretKey, hkdfSync, randomBytes } from 'node:crypto';
import {
  KDF_INFO, KID_INFO, KID_LEN, NONCE_LEN, TAG_LEN, associatedData, checkDistinct, concatBytes, forged, fromToken, hex,
  payloadBytes, payloadText, sameBytes, secretBytes, secretsFromText, toToken, unknownKey,
} from './sealtext.js';

export { MIN_SECRET_BYTES, MAX_STATE_TOKEN_BYTES } from './sealtext.js';

/**
 * The key and key id of one secret. RFC 5869's "no salt" is HashLen zero
 * bytes; an empty HMAC key is zero-padded to the same block, so node's empty
 * salt is the same extraction (checked against the gateway's vectors).
 * @param {Uint8Array} secret
 * @returns {{ kid: Uint8Array, key: import('node:crypto').KeyObject }}
 */
function derive(secret) {
  const key = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), KDF_INFO, 32));
  const kid = new Uint8Array(createHash('sha256').update(KID_INFO).update(key).digest().subarray(0, KID_LEN));
  const ring = { kid, key: createSecretKey(key) };
  key.fill(0);
  return ring;
}

export class StateKeys {
  /** @type {{ kid: Uint8Array, key: import('node:crypto').KeyObject }[]} */
  #keys;

  /**
   * Throws StateKeyError (`STATE_KEY_INVALID`): no secret, a secret under 32
   * bytes, or a repeated one.
   * @param {readonly (string | Uint8Array)[]} secrets operator secrets, the sealing one first; a string is taken as its UTF-8 bytes
   */
  constructor(secrets) {
    const keys = secretBytes(secrets).map(derive);
    checkDistinct(keys.map((k) => k.kid));
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
    return new StateKeys(secretsFromText(text));
  }

  /** The sealing key's public fingerprint (8 hex digits: its key id), for start-up messages. */
  get fingerprint() {
    return hex(this.#keys[0].kid);
  }

  /**
   * Encrypts `payload` (as UTF-8) under the first key, with a fresh random
   * nonce: two seals of one payload differ.
   * @param {string} payload what `Toolgate#sealPayload` returned
   * @returns {string} a `tg1.` token
   */
  seal(payload) {
    const data = payloadBytes(payload);
    const { kid, key } = this.#keys[0];
    const nonce = randomBytes(NONCE_LEN);
    const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_LEN });
    cipher.setAAD(associatedData(kid));
    const sealed = Buffer.concat([cipher.update(data), cipher.final()]);
    return toToken(concatBytes(kid, nonce, sealed, cipher.getAuthTag()));
  }

  /**
   * Decrypts a token sealed by any key of the ring. Throws InvalidStateError
   * (`STATE_INVALID`) for anything else (a non-string included): answer
   * every refusal alike, by deciding the call with confirmation `'invalid'`.
   * @param {unknown} token the client's `requestState`
   * @returns {string} the payload, exactly as sealed
   */
  open(token) {
    const { kid, nonce, sealed } = fromToken(token);
    const ring = this.#keys.find((k) => sameBytes(k.kid, kid));
    if (!ring) throw unknownKey();
    let plain;
    try {
      const decipher = createDecipheriv('aes-256-gcm', ring.key, nonce, { authTagLength: TAG_LEN });
      decipher.setAAD(associatedData(ring.kid));
      decipher.setAuthTag(sealed.subarray(sealed.length - TAG_LEN));
      plain = Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - TAG_LEN)), decipher.final()]);
    } catch {
      throw forged();
    }
    return payloadText(plain);
  }
}
