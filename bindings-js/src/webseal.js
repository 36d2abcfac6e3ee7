// Sealed `requestState` (MCP 2026-07-28) with WebCrypto, for edge workers
// (workerd, Deno, browsers) where node:crypto is not there: the same tokens
// as StateKeys (seal.js) and the Rust gateway, the same rules (sealtext.js);
// only the cryptography differs, and WebCrypto's is asynchronous.
import {
  KDF_INFO, KID_INFO, KID_LEN, NONCE_LEN, TAG_LEN, associatedData, checkDistinct, concatBytes, forged, fromToken, hex,
  payloadBytes, payloadText, sameBytes, secretBytes, secretsFromText, toToken, unknownKey,
} from './sealtext.js';

export { MIN_SECRET_BYTES, MAX_STATE_TOKEN_BYTES } from './sealtext.js';

/** @returns {SubtleCrypto} */
function subtle() {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new TypeError('WebStateKeys needs WebCrypto (globalThis.crypto.subtle)');
  return s;
}

/**
 * The key and key id of one secret (HKDF-SHA256 with no salt: WebCrypto's
 * empty salt is RFC 5869's HashLen zero bytes, as in the gateway).
 * @param {Uint8Array} secret
 * @returns {Promise<{ kid: Uint8Array, key: CryptoKey }>}
 */
async function derive(secret) {
  const s = subtle();
  const base = await s.importKey('raw', Uint8Array.from(secret), 'HKDF', false, ['deriveBits']);
  const bits = new Uint8Array(await s.deriveBits({ name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(0), info: KDF_INFO }, base, 256));
  const kid = new Uint8Array(await s.digest('SHA-256', concatBytes(KID_INFO, bits))).slice(0, KID_LEN);
  const key = await s.importKey('raw', bits, 'AES-GCM', false, ['encrypt', 'decrypt']);
  bits.fill(0);
  return { kid, key };
}

/** Only the factories build a ring (derivation is asynchronous). */
const FACTORY = Symbol('WebStateKeys');

/**
 * StateKeys for runtimes with WebCrypto and without node:crypto: the first
 * secret seals, every secret opens; `seal` and `open` return promises.
 * Build one with `await WebStateKeys.create(secrets)` or
 * `await WebStateKeys.fromText(env.TOOLGATE_STATE_SECRET)`.
 */
export class WebStateKeys {
  /** @type {{ kid: Uint8Array, key: CryptoKey }[]} */
  #keys;

  /**
   * @param {symbol} factory
   * @param {{ kid: Uint8Array, key: CryptoKey }[]} keys
   */
  constructor(factory, keys) {
    if (factory !== FACTORY) throw new TypeError('use `await WebStateKeys.create(secrets)`');
    this.#keys = keys;
  }

  /**
   * Rejects with StateKeyError (`STATE_KEY_INVALID`): no secret, a secret
   * under 32 bytes, or a repeated one; TypeError for a secret that is not a
   * string or bytes.
   * @param {readonly (string | Uint8Array)[]} secrets operator secrets, the sealing one first; a string is taken as its UTF-8 bytes
   * @returns {Promise<WebStateKeys>}
   */
  static async create(secrets) {
    const keys = await Promise.all(secretBytes(secrets).map(derive));
    checkDistinct(keys.map((k) => k.kid));
    return new WebStateKeys(FACTORY, keys);
  }

  /**
   * A ring from the gateway's secret text (`TOOLGATE_STATE_SECRET`): one
   * secret per line or `,`-separated, trimmed, `#` comments skipped.
   * @param {string} text
   * @returns {Promise<WebStateKeys>}
   */
  static async fromText(text) {
    return WebStateKeys.create(secretsFromText(text));
  }

  /** The sealing key's public fingerprint (8 hex digits: its key id). */
  get fingerprint() {
    return hex(/** @type {{ kid: Uint8Array }} */ (this.#keys[0]).kid);
  }

  /**
   * Encrypts `payload` (as UTF-8) under the first key with a fresh random nonce.
   * @param {string} payload what `Toolgate#sealPayload` returned
   * @returns {Promise<string>} a `tg1.` token
   */
  async seal(payload) {
    const data = payloadBytes(payload);
    const { kid, key } = /** @type {{ kid: Uint8Array, key: CryptoKey }} */ (this.#keys[0]);
    const nonce = globalThis.crypto.getRandomValues(new Uint8Array(NONCE_LEN));
    const sealed = new Uint8Array(await subtle().encrypt({ name: 'AES-GCM', iv: nonce, additionalData: associatedData(kid), tagLength: TAG_LEN * 8 }, key, data));
    return toToken(concatBytes(kid, nonce, sealed));
  }

  /**
   * Decrypts a token sealed by any key of the ring (here, in Node or by the
   * gateway). Rejects with InvalidStateError (`STATE_INVALID`) for anything
   * else: answer every refusal alike, with confirmation `'invalid'`.
   * @param {unknown} token the client's `requestState`
   * @returns {Promise<string>} the payload, exactly as sealed
   */
  async open(token) {
    const { kid, nonce, sealed } = fromToken(token);
    const ring = this.#keys.find((k) => sameBytes(k.kid, kid));
    if (!ring) throw unknownKey();
    let plain;
    try {
      plain = new Uint8Array(await subtle().decrypt({ name: 'AES-GCM', iv: Uint8Array.from(nonce), additionalData: associatedData(ring.kid), tagLength: TAG_LEN * 8 }, ring.key, Uint8Array.from(sealed)));
    } catch {
      throw forged();
    }
    return payloadText(plain);
  }
}
