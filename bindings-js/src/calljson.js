// The call as the JSON text the engine reads, written so that the engine
// decides on exactly the values the tool's handler gets (security review,
// issue 11 (3)).
//
// JSON.stringify rewrites what JSON cannot say: Infinity and NaN become null,
// -0 becomes 0, undefined / functions / symbols vanish from objects and become
// null in arrays, a Date becomes a string (any toJSON), a Map becomes {}, a
// BigInt throws. An argument the SDK parsed from `1e400` is Infinity; written
// as null it could pass a schema that allows null, and the handler would run
// with Infinity. Here nothing is rewritten:
//
// - finite numbers are written as JSON.stringify writes them, -0 as `-0`
//   (a JSON number the engine reads as the zero it is: same decision as 0,
//   and the text says what the handler gets);
// - Infinity, -Infinity and NaN are written as `1e400`, `-1e400` and `NaN`:
//   the engine's strict JSON reader refuses them, so the decision (BAD_REQUEST,
//   "number out of range" / "expected value") comes from the engine itself;
// - a BigInt is written as its digits when a double holds it exactly
//   (|n| <= 2^53, the number the engine reads is the handler's); otherwise,
//   like every other value JSON cannot carry (undefined, wherever it is, a
//   function, a symbol, an object that is not a plain object or an array: Date,
//   Map, class instances, anything with a prototype of its own), and an own
//   `__proto__` key (the SDK's request schema drops it before the handler,
//   and copying such an object turns it into a prototype), and nesting deeper
//   than MAX_DEPTH (the engine refuses depth past 128 anyway; this also stops a
//   cycle), the bare word `undefined` is written in its place, which the
//   engine refuses as it refuses any text that is not JSON: a deny with the
//   engine's own decision bytes.
//
// Object keys are the own enumerable string keys in Object.keys order, as
// JSON.stringify (and the handler's Object.keys / for-of) sees them. For data
// that JSON.parse produced the text is byte for byte JSON.stringify's, except
// `-0` and the refused values; one walk, one string.

/** The engine's JSON reader refuses this token: a deny decided by the engine. */
export const REFUSED = 'undefined';
/** Nesting deeper than this is written as REFUSED (the engine's limit is lower). */
export const MAX_DEPTH = 200;
const MAX_EXACT = 2n ** 53n;

/**
 * A JSON value written for the engine: see the module comment.
 * @param {unknown} value
 * @returns {string}
 */
export function engineJson(value) {
  return write(value, 0, false);
}

/**
 * `engineJson` with every object's keys sorted: two values that say the same
 * thing in another key order give the same text (used to compare what a
 * handler gets with what the engine forwarded, whose keys it sorts).
 * @param {unknown} value
 * @returns {string}
 */
export function sortedJson(value) {
  return write(value, 0, true);
}

/**
 * The `{"name":…,"arguments":…}` call text for the engine (no `arguments`
 * key when they are undefined, as an MCP request without them). A name that
 * is not a string is written as it is, for the engine to refuse.
 * @param {unknown} name
 * @param {unknown} args
 */
export function callJson(name, args) {
  const nameJson = write(name, 1, false);
  if (args === undefined) return `{"name":${nameJson}}`;
  return `{"name":${nameJson},"arguments":${write(args, 1, false)}}`;
}

/**
 * @param {unknown} v
 * @param {number} depth
 * @param {boolean} sorted
 * @returns {string}
 */
function write(v, depth, sorted) {
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'number':
      if (v - v === 0) return v === 0 && 1 / v < 0 ? '-0' : `${v}`; // finite
      return v > 0 ? '1e400' : v < 0 ? '-1e400' : 'NaN';
    case 'boolean':
      return v ? 'true' : 'false';
    case 'bigint':
      return v <= MAX_EXACT && v >= -MAX_EXACT ? `${v}` : REFUSED;
    case 'object': {
      if (v === null) return 'null';
      if (depth >= MAX_DEPTH) return REFUSED;
      if (Array.isArray(v)) {
        const n = v.length;
        if (n === 0) return '[]';
        let s = `[${write(v[0], depth + 1, sorted)}`;
        for (let i = 1; i < n; i++) s += `,${write(v[i], depth + 1, sorted)}`;
        return `${s}]`;
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return REFUSED;
      const o = /** @type {Record<string, unknown>} */ (v);
      const keys = sorted ? Object.keys(o).sort() : Object.keys(o);
      const n = keys.length;
      if (n === 0) return '{}';
      let s = '{';
      for (let i = 0; i < n; i++) {
        const k = keys[i];
        if (k === '__proto__') return REFUSED;
        s += `${i === 0 ? '' : ','}${JSON.stringify(k)}:${write(o[k], depth + 1, sorted)}`;
      }
      return `${s}}`;
    }
    default: // undefined, function, symbol
      return REFUSED;
  }
}
