// The small caches of the hot path, each bounded.

/**
 * The UTF-8 of the last context, kept while the text is the same. A host
 * passes the same context for many calls (one per session or request); this
 * saves encoding it again for every call (~1 µs of a call). Texts over
 * `maxChars` are encoded every time and not kept.
 */
export class ContextBytesCache {
  #encoder;
  #maxChars;
  #text = '';
  #bytes = new Uint8Array(0);

  /** @param {TextEncoder} encoder @param {number} [maxChars] */
  constructor(encoder, maxChars = 4096) {
    this.#encoder = encoder;
    this.#maxChars = maxChars;
  }

  /** @param {string} text @returns {Uint8Array} */
  bytes(text) {
    if (text === this.#text) return this.#bytes;
    const bytes = this.#encoder.encode(text);
    if (text.length <= this.#maxChars) {
      this.#text = text;
      this.#bytes = bytes;
    }
    return bytes;
  }
}

/**
 * A map that stops taking new keys at `max` entries (the answers it keeps
 * never change for an instance; `clear` when the instance is replaced).
 * @template K, V
 */
export class BoundedCache {
  /** @type {Map<K, V>} */
  #map = new Map();
  #max;

  /** @param {number} max */
  constructor(max) { this.#max = max; }

  /** @param {K} key @returns {V | undefined} */
  get(key) { return this.#map.get(key); }

  /** @param {K} key @param {V} value */
  set(key, value) {
    if (this.#map.size < this.#max) this.#map.set(key, value);
  }

  clear() { this.#map.clear(); }

  get size() { return this.#map.size; }
}
