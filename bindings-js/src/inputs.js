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
 * The context JSON the engine gets for a context input.
 * @param {ContextInput} context
 * @returns {string}
 */
export function contextJson(context) {
  if (context === undefined || context === null) return '{}';
  if (typeof context === 'string') return context;
  if (typeof context !== 'object') throw new TypeError('context must be an object, a JSON string or undefined');
  const c = /** @type {Record<string, unknown>} */ (context);
  if ('allowedTools' in c) {
    if ('allowed_tools' in c) throw new TypeError('context has both allowedTools and allowed_tools');
    const { allowedTools, ...rest } = c;
    return JSON.stringify({ ...rest, allowed_tools: allowedTools });
  }
  return JSON.stringify(c);
}

/**
 * @param {unknown} call
 * @returns {Uint8Array}
 */
export function callBytes(call) {
  if (call instanceof Uint8Array) return call;
  if (typeof call === 'string') return encoder.encode(call);
  if (call instanceof ArrayBuffer) return new Uint8Array(call);
  if (ArrayBuffer.isView(call)) return new Uint8Array(call.buffer, call.byteOffset, call.byteLength);
  if (call && typeof call === 'object') return encoder.encode(engineJson(call));
  throw new TypeError('call must be an object ({name, arguments}), a JSON string or bytes');
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
