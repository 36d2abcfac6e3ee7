// What callers pass, turned into what the engine takes: call bytes, context
// text, option values; and the size checks made before the engine is called.
import { MAX_INPUT_BYTES } from './faults.js';
import { engineJson } from './calljson.js';

/** @typedef {'confirming' | 'direct'} Surface */
/**
 * Per-call context. Absent `scopes`: no scope check; absent allowlist: every tool.
 * @typedef {object} Context
 * @property {Surface | null} [surface]
 * @property {readonly string[] | null} [scopes]
 * @property {readonly string[] | null} [allowedTools]
 * @property {readonly string[] | null} [allowed_tools] The wire name; same as `allowedTools`.
 */
/** A context object, or its JSON text (passed to the engine as is). @typedef {Context | string | null | undefined} ContextInput */
/** A call: `{name, arguments}`, its JSON text, or its raw bytes (sent as is). @typedef {{ name: string, arguments?: Record<string, unknown> | null } | string | Uint8Array | ArrayBuffer | ArrayBufferView} CallInput */

const encoder = new TextEncoder();

/**
 * Byte length of a string's UTF-8 form, computed only when it could matter.
 * @param {string} s
 */
export function utf8Length(s) {
  if (s.length * 3 <= MAX_INPUT_BYTES) return s.length; // a lower bound well under the limit
  return encoder.encode(s).length;
}

/**
 * The context JSON the engine gets for a context input. Written as a call's
 * arguments are (engineJson), not by JSON.stringify: `{ scopes: token?.scopes }`
 * without a token would lose its key and read as "no scope check"; a key left
 * undefined is refused by the engine instead (`INVALID_CONTEXT`), so "no
 * check" is spelled by leaving the key out or writing null.
 * @param {ContextInput} context
 * @returns {string}
 */
export function contextJson(context) {
  if (context === undefined || context === null) return '{}';
  if (typeof context === 'string') return wellFormed(context) ? context : UNSENDABLE_CONTEXT;
  if (typeof context !== 'object') throw new TypeError('context must be an object, a JSON string or undefined');
  const c = /** @type {Record<string, unknown>} */ (context);
  if ('allowedTools' in c) {
    if ('allowed_tools' in c) throw new TypeError('context has both allowedTools and allowed_tools');
    const { allowedTools, ...rest } = c;
    return engineJson({ ...rest, allowed_tools: allowedTools });
  }
  return engineJson(c);
}

// A JS string may hold lone surrogates, which UTF-8 cannot carry; TextEncoder
// would write U+FFFD in their place, and the engine would decide on a text
// the host was never given. Written as Python's binding writes them, so that
// both runtimes decide alike: in a call's text (bytes), as their three-byte
// form (WTF-8: invalid UTF-8, which the engine refuses, BAD_REQUEST); in a
// call object, as JSON.stringify's `\uXXXX` escape (refused too); a context
// text (a WIT string, UTF-8 only) holding one is sent as UNSENDABLE_CONTEXT.
/**
 * A JSON text the engine always refuses (INVALID_CONTEXT), sent for a context
 * text holding a lone surrogate: an escape in the surrogate's place could
 * complete a backslash before it into valid JSON, which would be decided.
 */
const UNSENDABLE_CONTEXT = '"\\ud800"';
const LONE_SURROGATES = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const LONE_SURROGATE = new RegExp(LONE_SURROGATES.source);

/**
 * Whether every code unit of `s` is part of a character UTF-8 can write.
 * @param {string} s
 */
export function wellFormed(s) {
  // String.prototype.isWellFormed (ES2024: Node 20+, workerd) where there is one.
  const native = /** @type {{ isWellFormed?: () => boolean }} */ (/** @type {unknown} */ (s)).isWellFormed;
  return typeof native === 'function' ? native.call(s) : !LONE_SURROGATE.test(s);
}

/**
 * UTF-8, with each lone surrogate as the three bytes its code unit would take.
 * @param {string} s
 * @returns {Uint8Array}
 */
function wtf8(s) {
  /** @type {Uint8Array[]} */
  const parts = [];
  let last = 0;
  for (const match of s.matchAll(LONE_SURROGATES)) {
    const at = /** @type {number} */ (match.index);
    const unit = s.charCodeAt(at);
    parts.push(encoder.encode(s.slice(last, at)), Uint8Array.of(0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)));
    last = at + 1;
  }
  parts.push(encoder.encode(s.slice(last)));
  return concatBytes(...parts);
}

/** @param {Uint8Array[]} parts */
export function concatBytes(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * @param {unknown} call
 * @returns {Uint8Array}
 */
export function callBytes(call) {
  if (call instanceof Uint8Array) return call;
  if (typeof call === 'string') return wellFormed(call) ? encoder.encode(call) : wtf8(call);
  if (call instanceof ArrayBuffer) return new Uint8Array(call);
  if (ArrayBuffer.isView(call)) return new Uint8Array(call.buffer, call.byteOffset, call.byteLength);
  if (call && typeof call === 'object') return encoder.encode(engineJson(call));
  throw new TypeError('call must be an object ({name, arguments}), a JSON string or bytes');
}

/**
 * The options `keys` an options object gives, as a host spells them: own
 * properties, a prototype's (a class's getters, `Object.create(defaults)`),
 * a Proxy's. A key that `Object.prototype` itself has is prototype pollution
 * (an inherited `policy` would load rules nobody gave, an inherited
 * `confirmation` would take the model's word): refused with a TypeError,
 * whatever the options object says, rather than read or silently dropped.
 * @param {unknown} options
 * @param {readonly string[]} keys
 * @returns {Record<string, unknown>}
 */
export function optionsOf(options, keys) {
  for (const key of keys) {
    if (Object.hasOwn(Object.prototype, key)) {
      throw new TypeError(`Object.prototype has a property \`${key}\` (prototype pollution?): no option is read while it does`);
    }
  }
  /** @type {Record<string, unknown>} */
  const given = Object.create(null);
  if (options === null || typeof options !== 'object') return given;
  for (const key of keys) {
    const value = Reflect.get(options, key);
    if (value !== undefined) given[key] = value;
  }
  return given;
}

/**
 * A positive limit (Infinity: none) from the options, or the default.
 * @param {unknown} value
 * @param {string} name
 * @param {number} fallback
 */
export function limitOption(value, name, fallback) {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !(value > 0)) throw new TypeError(`${name} must be a positive number (Infinity: no limit)`);
  return value;
}

/**
 * How the host obtained the confirmation for a call (WIT `confirmation`,
 * docs/spec.md §8): `'none'` (nothing but the call: confirmation fields the
 * model wrote never count), `'argument'` (the model's literal
 * `confirmed: true` counts), `'person'` (the host asked the person about this
 * very call and they accepted), `'invalid'` (a seal the host could not
 * accept), or a seal the host opened and authenticated with its own key:
 * `{ seal: { payload, caller, nowMs } }` (`nowMs`: the host's clock, ms since
 * the Unix epoch, a number or a bigint).
 * @typedef {'none' | 'argument' | 'person' | 'invalid' | { seal: OpenedSeal }} Confirmation
 */
/**
 * @typedef {object} OpenedSeal
 * @property {string} payload the payload as `sealPayload` wrote it, after the host verified its authenticity
 * @property {string} caller the authenticated caller now calling, or ''
 * @property {number | bigint} nowMs
 */

const U64_MAX = 2n ** 64n - 1n;

/**
 * A u64 from a number (a non-negative safe integer) or a bigint.
 * @param {unknown} value
 * @param {string} name
 * @returns {bigint}
 */
export function u64(value, name) {
  if (typeof value === 'bigint') {
    if (value >= 0n && value <= U64_MAX) return value;
  } else if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) {
    return BigInt(value);
  }
  throw new TypeError(`${name} must be a non-negative integer (a number up to 2^53 - 1, or a bigint up to 2^64 - 1)`);
}

const SIMPLE = Object.freeze({
  none: Object.freeze({ tag: 'none' }),
  argument: Object.freeze({ tag: 'argument' }),
  person: Object.freeze({ tag: 'person' }),
  invalid: Object.freeze({ tag: 'invalid' }),
});

/**
 * The WIT `confirmation` variant (jco's `{tag, val}`) for a Confirmation.
 * @param {unknown} confirmation
 * @returns {{ tag: 'none' | 'argument' | 'person' | 'invalid' } | { tag: 'seal', val: { payload: string, caller: string, nowMs: bigint } }}
 */
export function witConfirmation(confirmation) {
  if (typeof confirmation === 'string' && Object.hasOwn(SIMPLE, confirmation)) return SIMPLE[/** @type {keyof typeof SIMPLE} */ (confirmation)];
  const seal = confirmation && typeof confirmation === 'object' ? /** @type {any} */ (confirmation).seal : undefined;
  if (seal && typeof seal === 'object' && Object.keys(/** @type {object} */ (confirmation)).length === 1) {
    if (typeof seal.payload !== 'string') throw new TypeError('confirmation.seal.payload must be a string');
    if (typeof seal.caller !== 'string') throw new TypeError('confirmation.seal.caller must be a string');
    // A WIT string is UTF-8: a lone surrogate would reach the engine as
    // U+FFFD, and a seal made for 'alice\uD800' would hold for 'alice\uFFFD'
    // (Python refuses such a string too).
    if (!wellFormed(seal.payload) || !wellFormed(seal.caller)) throw new TypeError('confirmation.seal.payload and caller must not hold a lone surrogate');
    return { tag: 'seal', val: { payload: seal.payload, caller: seal.caller, nowMs: u64(seal.nowMs, 'confirmation.seal.nowMs') } };
  }
  throw new TypeError("confirmation must be 'none', 'argument', 'person', 'invalid' or { seal: { payload, caller, nowMs } }");
}
