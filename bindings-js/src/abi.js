// Every assumption this package makes about jco's instantiation internals and
// the canonical ABI of the toolgate component, in one place:
//
//   - the core modules jco asks for (the main one, and the two tiny helper
//     modules wit-component adds for the resource destructor, implemented
//     here in JS; scripts/build.mjs checks their shape at build time);
//   - the import the main core instance gets for a new rule-set resource
//     (`[resource-new]rule-set` of the exported interface), hooked to learn
//     the rule set's rep;
//   - the core exports the `evaluate` fast path calls: `memory`,
//     `cabi_realloc`, the lowered `[method]rule-set.evaluate` and its
//     `cabi_post_` post-return, with the arities of their core signatures.
//
// Every one is checked when a component is instantiated (and the fast path is
// then run once against jco's wrapper on a probe call). If any check fails (a
// jco or wit-bindgen change), `abi` is null and the runtime calls jco's
// generated wrapper for everything, with the same results, only slower.
// TOOLGATE_JS_FASTPATH=0 (or `fastPath: false`) forces the wrapper path.
import { instantiate } from '../gen/toolgate_policy.js';
import { CONTRACT_VERSION } from './contract.js';
import { ContextBytesCache } from './cache.js';

/** The exported WIT interface, named from the one contract version constant. */
export const INTERFACE = `toolgate:policy/engine@${CONTRACT_VERSION}`;
/** What jco names the import object of the exported interface's resource intrinsics. */
export const EXPORT_IMPORTS = `[export]${INTERFACE}`;
export const RESOURCE_NEW = '[resource-new]rule-set';
export const MEMORY = 'memory';
export const REALLOC = 'cabi_realloc';
export const EVALUATE = `${INTERFACE}#[method]rule-set.evaluate`;
export const EVALUATE_POST = `cabi_post_${EVALUATE}`;

/**
 * Core signatures the fast path lowers to (flattened canonical ABI):
 * realloc(old, old-size, align, new-size) -> ptr;
 * evaluate(self: borrow<rule-set>, call: list<u8> (ptr, len), context: string (ptr, len)) -> retptr;
 * post-return(retptr).
 */
const ARITY = Object.freeze({ [REALLOC]: 4, [EVALUATE]: 5, [EVALUATE_POST]: 1 });

export const CORE = 'toolgate_policy.core.wasm';
const SHIM_TABLE = 'toolgate_policy.core2.wasm';
const SHIM_FILL = 'toolgate_policy.core3.wasm';

/**
 * TOOLGATE_JS_FASTPATH=0 (or the older TOOLGATE_JCO_EVALUATE=1) forces jco's
 * wrapper for every call. Read once; absent outside Node.
 */
export const FASTPATH_BY_ENV = (() => {
  const env = /** @type {any} */ (globalThis).process?.env;
  if (!env) return true;
  return env.TOOLGATE_JS_FASTPATH !== '0' && env.TOOLGATE_JCO_EVALUATE !== '1';
})();

/** Test hook (an option key): names of core exports or imports to hide from the ABI check, simulating a jco change. */
export const kHideFromAbi = Symbol.for('toolgate.test.hideFromAbi');

/**
 * What the fast path uses, once checked.
 * @typedef {{
 *   memory: WebAssembly.Memory,
 *   realloc: (oldPtr: number, oldSize: number, align: number, size: number) => number,
 *   evaluate: (rep: number, callPtr: number, callLen: number, ctxPtr: number, ctxLen: number) => number,
 *   post: (retptr: number) => void,
 * }} Abi
 */

/**
 * One instantiated component.
 * @typedef {{
 *   engine: any,
 *   raw: WebAssembly.Exports,
 *   memory: WebAssembly.Memory | null,
 *   repOfNextRuleSet: () => () => number,
 *   abi: Abi | null,
 *   problems: string[],
 * }} Instantiated
 */

/**
 * Checks the core exports the fast path needs; returns the problems (none: it can be used).
 * @param {Record<string, unknown>} exports
 * @param {ReadonlySet<string>} hidden
 * @returns {{ abi: Abi | null, problems: string[] }}
 */
export function checkExports(exports, hidden) {
  /** @type {string[]} */
  const problems = [];
  const get = (/** @type {string} */ name) => (hidden.has(name) ? undefined : exports[name]);
  const memory = get(MEMORY);
  if (!(memory instanceof WebAssembly.Memory)) problems.push(`no core export ${MEMORY} (a WebAssembly.Memory)`);
  for (const [name, arity] of Object.entries(ARITY)) {
    const f = get(name);
    if (typeof f !== 'function') problems.push(`no core export ${name}`);
    else if (f.length !== arity) problems.push(`core export ${name} takes ${f.length} parameters, not ${arity}`);
  }
  if (problems.length > 0) return { abi: null, problems };
  return {
    abi: /** @type {Abi} */ ({ memory, realloc: get(REALLOC), evaluate: get(EVALUATE), post: get(EVALUATE_POST) }),
    problems,
  };
}

/** The first exported memory (the cap on it is checked whether or not the fast path is used). */
function findMemory(/** @type {Record<string, unknown>} */ exports) {
  if (exports[MEMORY] instanceof WebAssembly.Memory) return exports[MEMORY];
  for (const v of Object.values(exports)) if (v instanceof WebAssembly.Memory) return v;
  return null;
}

/**
 * Instantiates the component synchronously from its compiled core module,
 * through jco's generated `instantiate`, and checks the ABI assumptions.
 * @param {WebAssembly.Module} coreModule
 * @param {{ fastPath: boolean, hide?: Iterable<string> }} options
 * @returns {Instantiated}
 */
export function instantiateComponent(coreModule, options) {
  const hidden = new Set(options.hide ?? []);
  /** @type {string[]} */
  const problems = [];
  /** @type {((rep: number) => void) | null} */
  let dtor = null;
  /** @type {WebAssembly.Exports | null} */
  let raw = null;
  let hooked = false;
  const reps = { last: -1 };
  const getCoreModule = (/** @type {string} */ name) => {
    if (name === CORE) return coreModule;
    if (name === SHIM_TABLE || name === SHIM_FILL) return name;
    throw new Error(`jco output changed: unexpected core module ${name} (rebuild gen/ with scripts/build.mjs)`);
  };
  const instantiateCore = (/** @type {any} */ module, /** @type {any} */ imports) => {
    if (module === SHIM_TABLE) {
      // Run by jco's FinalizationRegistry too, where a throw ends the Node
      // process: a destructor that traps (an instance left broken by a fault)
      // frees nothing a decision depends on.
      const drop = (/** @type {number} */ rep) => {
        try {
          if (dtor) dtor(rep);
        } catch {
          // the instance is discarded after a fault anyway
        }
      };
      return { exports: { 0: drop, $imports: null } };
    }
    if (module === SHIM_FILL) {
      dtor = imports[''][0];
      return { exports: {} };
    }
    // Record the rep the guest gives each new rule-set (the fast path passes
    // it, as jco does for a borrow of the component's own resource).
    const iface = imports?.[EXPORT_IMPORTS];
    const resourceNew = hidden.has(RESOURCE_NEW) ? undefined : iface?.[RESOURCE_NEW];
    let coreImports = imports;
    if (typeof resourceNew === 'function') {
      const recording = Object.assign((/** @type {number} */ rep) => { reps.last = rep; return resourceNew(rep); }, resourceNew);
      coreImports = { ...imports, [EXPORT_IMPORTS]: { ...iface, [RESOURCE_NEW]: recording } };
      hooked = true;
    } else {
      problems.push(`no core import ${EXPORT_IMPORTS} ${RESOURCE_NEW}`);
    }
    const instance = new WebAssembly.Instance(module, coreImports);
    raw = instance.exports;
    return instance;
  };
  const root = /** @type {any} */ (instantiate(/** @type {any} */ (getCoreModule), {}, /** @type {any} */ (instantiateCore)));
  if (typeof root?.then === 'function') throw new Error('the component did not instantiate synchronously');
  if (!raw) throw new Error('jco output changed: the core instance was not created through instantiateCore');
  const exports = /** @type {Record<string, unknown>} */ (/** @type {unknown} */ (raw));
  let abi = null;
  if (options.fastPath) {
    const checked = checkExports(exports, hidden);
    problems.push(...checked.problems);
    if (problems.length === 0 && hooked) abi = checked.abi;
  } else {
    problems.push('fast path off');
  }
  return {
    engine: root.engine,
    raw,
    memory: findMemory(exports),
    // Call before creating a rule set; the returned function gives its rep (-1: unknown).
    repOfNextRuleSet: () => { reps.last = -1; return () => reps.last; },
    abi,
    problems,
  };
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * `evaluate` through the canonical ABI directly. jco's wrapper spends about as
 * long on its task bookkeeping (which a component with no imports and no
 * async never needs) as the engine spends deciding; this does exactly what
 * the wrapper does for this one signature: copy the call bytes and the
 * context's UTF-8 into guest memory, call, read the returned string,
 * post-return.
 * @param {Abi} abi
 * @param {number} rep the rule set's rep
 * @returns {(bytes: Uint8Array, context: string) => string}
 */
export function fastEvaluate(abi, rep) {
  const { memory, realloc, evaluate, post } = abi;
  const contexts = new ContextBytesCache(encoder);
  return (bytes, context) => {
    // One length for the allocation, the copy and the guest (a view over a
    // growable buffer could change between reads).
    const n = bytes.length;
    const callPtr = realloc(0, 0, 1, n);
    new Uint8Array(memory.buffer, callPtr, n).set(bytes.subarray(0, n));
    const ctx = contexts.bytes(context);
    const ctxPtr = ctx.length === 0 ? 1 : realloc(0, 0, 1, ctx.length);
    if (ctx.length > 0) new Uint8Array(memory.buffer, ctxPtr, ctx.length).set(ctx);
    const ret = evaluate(rep, callPtr, n, ctxPtr, ctx.length);
    const view = new DataView(memory.buffer);
    const ptr = view.getUint32(ret, true);
    const len = view.getUint32(ret + 4, true);
    const out = decoder.decode(new Uint8Array(memory.buffer, ptr, len));
    post(ret);
    return out;
  };
}

/**
 * Probe calls the fast path must answer exactly as jco's wrapper does before
 * it is used. Each answer depends on what it probes arriving byte for byte,
 * whatever rules are loaded: the first echoes the call's non-ASCII name (an
 * unknown tool's `metadata.tool`), the second the context's non-ASCII key (an
 * unknown key's INVALID_CONTEXT; a context lost or misread answers NOT_FOUND
 * or names another key), the third is the empty call and context.
 */
const PROBES = /** @type {const} */ ([
  ['{"name":"toolgate-abi-probe-é€😀","arguments":{"é":"€😀"}}', '{"surface":"direct"}'],
  ['{"name":"toolgate-abi-probe-é€😀","arguments":{}}', '{"surface":"direct","toolgate-abi-probe-é€😀":1}'],
  ['', ''],
]);

/**
 * Builds the fast path for a rule set, or explains why not: the rep must be
 * known and the fast path must give jco's wrapper's bytes on the probes.
 * A probe that throws is rethrown (the instance may be broken: the caller
 * instantiates again without the fast path).
 * @param {Abi | null} abi
 * @param {number} rep
 * @param {(bytes: Uint8Array, context: string) => string} viaWrapper
 * @returns {{ fast: ((bytes: Uint8Array, context: string) => string) | null, problem: string | null }}
 */
export function checkedFastPath(abi, rep, viaWrapper) {
  if (!abi) return { fast: null, problem: 'ABI check failed' };
  if (!(rep >= 0)) return { fast: null, problem: `${RESOURCE_NEW} was not called for the rule set` };
  const fast = fastEvaluate(abi, rep);
  for (const [call, context] of PROBES) {
    const bytes = encoder.encode(call);
    const want = viaWrapper(bytes, context);
    const got = fast(bytes, context);
    if (got !== want) return { fast: null, problem: `fast path probe differs from jco's wrapper: ${JSON.stringify(got.slice(0, 80))}` };
  }
  return { fast: fastEvaluate(abi, rep), problem: null };
}

/**
 * Test hook: a real trap of this instance, not an allocation failure. The
 * guest is handed a call that lies past the end of its memory; reading it is
 * an out-of-bounds access. Without the fast path's exports, an allocation the
 * guest cannot satisfy aborts it.
 * @param {WebAssembly.Exports} raw
 * @param {number} rep
 */
export function injectTrap(raw, rep) {
  const r = /** @type {any} */ (raw);
  if (rep >= 0 && typeof r[EVALUATE] === 'function') r[EVALUATE](rep, 0xfffffff0, 16, 1, 0);
  else if (typeof r[REALLOC] === 'function') r[REALLOC](0, 0, 8, 0xfffffff0);
  else throw new WebAssembly.RuntimeError('injected trap');
}
