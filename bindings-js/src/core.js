// The runtime-neutral core: the jco-generated bindings of the toolgate
// component, instantiated from one compiled core module. No Node API is used
// here, so this file runs unchanged in Node and in workerd.
import { instantiate } from '../gen/toolgate_policy.js';
import { HOST_FAULTS, MAX_INPUT_BYTES } from './faults.js';
import { engineJson } from './calljson.js';
import {
  ContractVersionError, EngineLimitError, EngineOutOfMemoryError, EngineTrapError, InputTooLargeError, LoadError,
  ProblemError, ToolgateError,
} from './errors.js';

/** The WIT contract version this package speaks; checked on every load. */
export const CONTRACT_VERSION = '0.1.0';

// BEGIN limits: generated from component-build/src/limits.rs by
// `cargo run --release --locked -p component-build -- --write-limits`; do not edit.
/**
 * Default cap on the component's linear memory, per Toolgate, in bytes. Plain
 * WebAssembly cannot refuse the guest's `memory.grow` here (the memory is the
 * core module's own, with no maximum), so the cap is checked after each call:
 * over it, the call is denied `ENGINE_OUT_OF_MEMORY` and the instance replaced.
 */
export const DEFAULT_MAX_MEMORY_BYTES = 1073741824;
/** The guest meter's budget per call, compiled into the component (for reference). */
export const CALL_BUDGET = 50000000000;
// END limits
/**
 * Default per-call deadline in milliseconds, a wall-clock backstop only. What
 * stops a runaway call is the component's own compute budget (the guest meter,
 * compiled in by component-build: the same units in V8 as in wasmtime): the
 * call traps inside the guest when the budget runs out and is denied
 * `ENGINE_LIMIT`, exactly as in the Rust and Python hosts. The deadline is
 * checked when a call returns (a later answer is dropped, `ENGINE_LIMIT`); the
 * heaviest calls under the budget take well under it (a 3.6 MB context ~0.25 s,
 * a runaway call stops after 1-4 s here), so it decides only on a machine
 * many times slower. `Infinity` turns it off, making decisions independent of
 * wall time.
 */
export const DEFAULT_DEADLINE_MS = 5000;

/**
 * Whether a trap is the guest meter's: the component divides by zero when its
 * budget runs out (`i32.div_u` by 0), which Rust-compiled code never does (it
 * checks divisors and panics, an `unreachable`). V8 reports it as a
 * `WebAssembly.RuntimeError` "divide by zero".
 * @param {unknown} e
 */
function isMeterTrap(e) {
  for (let err = e, depth = 0; err && depth < 4; err = /** @type {any} */ (err).cause, depth++) {
    if (err instanceof WebAssembly.RuntimeError && /divide by zero/i.test(err.message)) return true;
  }
  return false;
}

const perf = globalThis.performance;
const now = typeof perf?.now === 'function' ? () => perf.now() : Date.now;

const CORE = 'toolgate_policy.core.wasm';
// wit-component adds two tiny helper modules for the resource destructor (a
// one-entry funcref table and the module that fills it); scripts/build.mjs
// checks their shape. They are implemented here in JS, so a host needs only
// the one core module, which a worker can import precompiled.
const SHIM_TABLE = 'toolgate_policy.core2.wasm';
const SHIM_FILL = 'toolgate_policy.core3.wasm';

const encoder = new TextEncoder();

/** @type {(() => Promise<WebAssembly.Module>) | null} */
let defaultModule = null;

/**
 * Sets how `Toolgate.load` gets the compiled core module when none is given
 * (each runtime entry point sets it once).
 * @param {() => Promise<WebAssembly.Module>} provider
 */
export function setDefaultModule(provider) {
  let cached = /** @type {Promise<WebAssembly.Module> | null} */ (null);
  defaultModule = () => (cached ??= provider().catch((e) => { cached = null; throw e; }));
}
const kInjectTrap = Symbol.for('toolgate.test.injectTrap');
const kRawExports = Symbol.for('toolgate.test.rawExports');

/**
 * Instantiates the component synchronously from its compiled core module.
 * @param {WebAssembly.Module} coreModule
 */
function instantiateComponent(coreModule) {
  /** @type {((rep: number) => void) | null} */
  let dtor = null;
  /** @type {WebAssembly.Exports | null} */
  let raw = null;
  const reps = { last: -1 };
  const getCoreModule = (/** @type {string} */ name) => {
    if (name === CORE) return coreModule;
    if (name === SHIM_TABLE || name === SHIM_FILL) return name;
    throw new ToolgateError('ENGINE_TRAP', `unexpected core module ${name}`);
  };
  const instantiateCore = (/** @type {any} */ module, /** @type {any} */ imports) => {
    if (module === SHIM_TABLE) {
      return { exports: { 0: (/** @type {number} */ rep) => { if (dtor) dtor(rep); }, $imports: null } };
    }
    if (module === SHIM_FILL) {
      dtor = imports[''][0];
      return { exports: {} };
    }
    // Record the rep the guest gives each new rule-set (the evaluate fast path
    // passes it, as jco does for a borrow of the component's own resource).
    const iface = imports?.['[export]toolgate:policy/engine@0.1.0'];
    const resourceNew = iface?.['[resource-new]rule-set'];
    if (typeof resourceNew !== 'function') throw new ToolgateError('ENGINE_TRAP', 'jco output changed: no [resource-new]rule-set import');
    const recording = Object.assign((/** @type {number} */ rep) => { reps.last = rep; return resourceNew(rep); }, resourceNew);
    const instance = new WebAssembly.Instance(module, { ...imports, '[export]toolgate:policy/engine@0.1.0': { ...iface, '[resource-new]rule-set': recording } });
    raw = instance.exports;
    return instance;
  };
  const root = /** @type {any} */ (instantiate(/** @type {any} */ (getCoreModule), {}, /** @type {any} */ (instantiateCore)));
  if (typeof root?.then === 'function') throw new ToolgateError('ENGINE_TRAP', 'the component did not instantiate synchronously');
  const engine = root.engine;
  const version = engine.contractVersion();
  if (version !== CONTRACT_VERSION) throw new ContractVersionError(CONTRACT_VERSION, version);
  return { engine, raw: /** @type {WebAssembly.Exports} */ (/** @type {unknown} */ (raw)), reps };
}

const EVALUATE = 'toolgate:policy/engine@0.1.0#[method]rule-set.evaluate';
const EVALUATE_POST = 'cabi_post_toolgate:policy/engine@0.1.0#[method]rule-set.evaluate';
const decoder = new TextDecoder();

/**
 * The hot path: `evaluate` through the canonical ABI directly. jco's wrapper
 * spends about as long on its task bookkeeping (which a component with no
 * imports and no async never needs) as the engine spends deciding; this does
 * exactly what the wrapper does for this one signature: copy the call bytes
 * and the context's UTF-8 into guest memory, call, read the returned string,
 * post-return. The vectors run through it, byte for byte; set
 * TOOLGATE_JCO_EVALUATE=1 (or `fastPath: false`) to use jco's wrapper instead.
 * @param {any} raw the core instance's exports
 * @param {number} rep the rule set's rep
 */
function fastEvaluate(raw, rep) {
  const realloc = raw.cabi_realloc;
  const memory = /** @type {WebAssembly.Memory} */ (raw.memory);
  const call = raw[EVALUATE];
  const post = raw[EVALUATE_POST];
  if (typeof realloc !== 'function' || typeof call !== 'function' || typeof post !== 'function' || !(memory instanceof WebAssembly.Memory) || rep < 0) return null;
  // A host passes the same context for many calls (one per session or
  // request): its UTF-8 is kept while the text is the same (up to 4 KiB of
  // text), instead of being encoded again for every call (~1 µs of a call).
  let lastContext = '';
  let lastContextBytes = new Uint8Array(0);
  return (/** @type {Uint8Array} */ bytes, /** @type {string} */ context) => {
    const callPtr = realloc(0, 0, 1, bytes.length);
    new Uint8Array(memory.buffer, callPtr, bytes.length).set(bytes);
    let ctx = lastContextBytes;
    if (context !== lastContext) {
      ctx = encoder.encode(context);
      if (context.length <= 4096) {
        lastContext = context;
        lastContextBytes = ctx;
      }
    }
    const ctxPtr = ctx.length === 0 ? 1 : realloc(0, 0, 1, ctx.length);
    if (ctx.length > 0) new Uint8Array(memory.buffer, ctxPtr, ctx.length).set(ctx);
    const ret = call(rep, callPtr, bytes.length, ctxPtr, ctx.length);
    const view = new DataView(memory.buffer);
    const ptr = view.getUint32(ret, true);
    const len = view.getUint32(ret + 4, true);
    const out = decoder.decode(new Uint8Array(memory.buffer, ptr, len));
    post(ret);
    return out;
  };
}

const useJcoEvaluate = typeof globalThis.process !== 'undefined' && globalThis.process?.env?.TOOLGATE_JCO_EVALUATE === '1';

/** @param {unknown} e */
function problemOf(e) {
  const p = /** @type {any} */ (e)?.payload;
  if (p && typeof p === 'object' && typeof p.code === 'string' && typeof p.origin === 'string') return p;
  return null;
}

/** Byte length of a string's UTF-8 form, computed only when it could matter. */
function utf8Length(/** @type {string} */ s) {
  if (s.length * 3 <= MAX_INPUT_BYTES) return s.length; // a lower bound well under the limit
  return encoder.encode(s).length;
}

/**
 * @param {unknown} context
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
function callBytes(call) {
  if (call instanceof Uint8Array) return call;
  if (typeof call === 'string') return encoder.encode(call);
  if (call instanceof ArrayBuffer) return new Uint8Array(call);
  if (ArrayBuffer.isView(call)) return new Uint8Array(call.buffer, call.byteOffset, call.byteLength);
  if (call && typeof call === 'object') return encoder.encode(engineJson(call));
  throw new TypeError('call must be an object ({name, arguments}), a JSON string or bytes');
}

/** A decision: the engine's canonical JSON (`json`, exact bytes) and its parsed form. */
export class Decision {
  /** @type {any} */
  #value;
  /** @param {string} json */
  constructor(json) {
    /** The canonical decision JSON exactly as the engine wrote it. */
    this.json = json;
  }
  /** The parsed decision object. */
  get value() { return this.#value ??= JSON.parse(this.json); }
  /**
   * Whether the call is allowed. SPEC §5: the canonical writer puts `ok` first
   * (`{"ok":true,` / `{"ok":false,`), so it is read from the bytes without
   * parsing them (a parse is ~15 % of a decision in Node); anything else is parsed.
   */
  get ok() {
    if (this.#value === undefined) {
      if (this.json.startsWith('{"ok":true,')) return true;
      if (this.json.startsWith('{"ok":false,')) return false;
    }
    return this.value.ok === true;
  }
  get error() { return this.value.error; }
  get metadata() { return this.value.metadata; }
  /** The error code, or null when the call is allowed. */
  get code() { return this.value.error?.code ?? null; }
  get tool() { return this.value.metadata?.tool ?? null; }
  get retryable() { return this.value.error?.retryable ?? false; }
  toString() { return this.json; }
  toJSON() { return this.value; }
}

/** The `tools/list` result a context may see. */
export class ToolList {
  /** @type {any} */
  #value;
  /** @param {string} json */
  constructor(json) { this.json = json; }
  get value() { return this.#value ??= JSON.parse(this.json); }
  /** @returns {any[]} */
  get tools() { return this.value.tools; }
  /** @returns {string[]} */
  get names() { return this.tools.map((/** @type {any} */ t) => t.name); }
  toString() { return this.json; }
  toJSON() { return this.value; }
}

/** The transactional runtime's state after a turn (SPEC §6). */
export class TurnState {
  /** @type {any} */
  #value;
  /** @param {string} json */
  constructor(json) { this.json = json; }
  get value() { return this.#value ??= JSON.parse(this.json); }
  toString() { return this.json; }
  toJSON() { return this.value; }
}

const FAULT_DECISIONS = Object.freeze({
  ENGINE_TRAP: new Decision(HOST_FAULTS.ENGINE_TRAP),
  ENGINE_LIMIT: new Decision(HOST_FAULTS.ENGINE_LIMIT),
  ENGINE_OUT_OF_MEMORY: new Decision(HOST_FAULTS.ENGINE_OUT_OF_MEMORY),
  INPUT_TOO_LARGE: new Decision(HOST_FAULTS.INPUT_TOO_LARGE),
});

/** @typedef {'ENGINE_TRAP' | 'ENGINE_LIMIT' | 'ENGINE_OUT_OF_MEMORY'} EngineFaultCode */

/** The typed error for a fault on a call that returns a value (list, turn, stripFields). */
function engineFault(/** @type {EngineFaultCode} */ code, /** @type {unknown} */ cause) {
  if (code === 'ENGINE_OUT_OF_MEMORY') return new EngineOutOfMemoryError('the policy engine went over its memory cap on this request; it was not served', cause);
  if (code === 'ENGINE_LIMIT') return new EngineLimitError('the policy engine ran out of its compute budget (or deadline) on this request; it was not served');
  return new EngineTrapError('the policy engine failed on this request; it was not served', cause);
}

/** A positive limit (Infinity: none) from the options, or the default. */
function limitOption(/** @type {unknown} */ value, /** @type {string} */ name, /** @type {number} */ fallback) {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !(value > 0)) throw new TypeError(`${name} must be a positive number (Infinity: no limit)`);
  return value;
}

/**
 * @typedef {{ policy?: string | null, catalog: string }} RulesText
 */

/** Loaded rules: one component instance with one rule set. Immutable. */
export class Toolgate {
  #module;
  #policy;
  #catalog;
  /** @type {any} */
  #engine = null;
  /** @type {any} */
  #rules = null;
  /** @type {WebAssembly.Exports | null} */
  #raw = null;
  /** @type {Map<string, readonly string[]>} */
  #strip = new Map();
  #injectTrap = false;
  #closed = false;
  /** @type {((bytes: Uint8Array, context: string) => string) | null} */
  #fast = null;
  #fastPath = !useJcoEvaluate;
  /** @type {string} */
  revision;
  /** @type {readonly {severity: string, problem: {code: string, message: string, origin: string, path: string, line: number, column: number}}[]} */
  findings;
  /** How many times the instance was replaced after a trap. */
  recoveries = 0;
  /** The cap on the component's memory, bytes; checked after every call (may be changed). */
  maxMemoryBytes = DEFAULT_MAX_MEMORY_BYTES;
  /** The per-call deadline, ms; checked when a call returns (may be changed). */
  deadlineMs = DEFAULT_DEADLINE_MS;
  /** @type {WebAssembly.Memory | null} */
  #memory = null;
  #rep = -1;

  /**
   * Loads rules synchronously from an already compiled core module.
   * @param {WebAssembly.Module} module
   * @param {RulesText} rules
   */
  constructor(module, rules) {
    if (rules && /** @type {any} */ (rules).fastPath === false) this.#fastPath = false;
    if (!(module instanceof WebAssembly.Module)) throw new TypeError('module must be a WebAssembly.Module (the compiled toolgate_policy.core.wasm)');
    if (!rules || typeof rules.catalog !== 'string') throw new TypeError('catalog must be a string (the catalog text)');
    if (rules.policy !== undefined && rules.policy !== null && typeof rules.policy !== 'string') throw new TypeError('policy must be a string, null or undefined');
    const options = /** @type {{ maxMemoryBytes?: unknown, deadlineMs?: unknown }} */ (rules);
    this.maxMemoryBytes = limitOption(options.maxMemoryBytes, 'maxMemoryBytes', DEFAULT_MAX_MEMORY_BYTES);
    this.deadlineMs = limitOption(options.deadlineMs, 'deadlineMs', DEFAULT_DEADLINE_MS);
    this.#module = module;
    this.#policy = rules.policy ?? undefined;
    this.#catalog = rules.catalog;
    this.#instantiate();
    this.revision = this.#rules.revision();
    this.findings = Object.freeze(this.#rules.findings());
  }

  /**
   * Loads rules synchronously from a compiled core module (workers: the
   * imported `toolgate_policy.core.wasm`).
   * @param {{ module: WebAssembly.Module } & RulesText} options
   */
  static fromModule(options) {
    return new Toolgate(options.module, options);
  }

  /**
   * Loads rules. `module` is the compiled core module, a promise of it, or
   * its bytes; without it, the runtime's default (Node: the package's
   * `gen/toolgate_policy.core.wasm`, compiled once per process; workerd: the
   * module imported by `toolgate/worker`).
   * @param {{ module?: WebAssembly.Module | PromiseLike<WebAssembly.Module> | BufferSource } & RulesText} options
   */
  static async load(options) {
    if (!options || typeof options !== 'object') throw new TypeError('load needs { catalog, policy?, module? }');
    let module = await options.module;
    if (module === undefined || module === null) {
      if (!defaultModule) throw new TypeError('no default core module in this runtime: pass `module` (the compiled toolgate_policy.core.wasm)');
      module = await defaultModule();
    } else if (!(module instanceof WebAssembly.Module)) {
      module = await WebAssembly.compile(/** @type {BufferSource} */ (module));
    }
    return new Toolgate(/** @type {WebAssembly.Module} */ (module), options);
  }

  #instantiate() {
    this.#engine = null;
    this.#rules = null;
    this.#raw = null;
    this.#fast = null;
    this.#memory = null;
    const { engine, raw, reps } = instantiateComponent(this.#module);
    const memory = raw.memory instanceof WebAssembly.Memory ? raw.memory : null;
    const over = () => memory !== null && memory.buffer.byteLength > this.maxMemoryBytes;
    let rules;
    try {
      reps.last = -1;
      rules = engine.RuleSet.load(this.#policy, this.#catalog);
    } catch (e) {
      const p = problemOf(e);
      if (p) throw new LoadError(p);
      if (over()) throw new EngineOutOfMemoryError('loading the rules went over maxMemoryBytes', e);
      if (isMeterTrap(e)) throw new EngineLimitError('loading the rules ran out of the compute budget');
      throw new EngineTrapError('the policy engine failed while loading the rules', e);
    }
    if (over()) throw new EngineOutOfMemoryError('loading the rules went over maxMemoryBytes');
    this.#memory = memory;
    this.#rep = reps.last;
    this.#engine = engine;
    this.#rules = rules;
    this.#raw = raw;
    this.#fast = this.#fastPath ? fastEvaluate(raw, reps.last) : null;
  }

  /** After a trap the instance cannot be re-entered: replace it, reload the rules. */
  #recover() {
    this.#strip.clear();
    try {
      this.#instantiate();
      this.recoveries += 1;
      return true;
    } catch {
      return false; // still broken: every call denies until a later retry works
    }
  }

  #beforeCall() {
    if (this.#closed) throw new ToolgateError('CLOSED', 'this Toolgate was closed');
    if (!this.#rules && !this.#recover()) throw new EngineTrapError('the policy engine is not available');
    if (this.#injectTrap) {
      this.#injectTrap = false;
      // A real trap of this instance, and not an allocation failure: the
      // guest is handed a call that lies past the end of its memory, and
      // reading it is an out-of-bounds access.
      const raw = /** @type {any} */ (this.#raw);
      if (this.#rep >= 0 && typeof raw[EVALUATE] === 'function') raw[EVALUATE](this.#rep, 0xfffffff0, 16, 1, 0);
      else raw.cabi_realloc(0, 0, 8, 0xfffffff0); // no rep: an allocation the guest cannot satisfy aborts it
    }
  }

  /**
   * After the component threw (a trap): classify, replace the instance.
   * @param {unknown} e
   */
  #fault(e) {
    /** @type {EngineFaultCode} */
    const code = this.#memoryOver() ? 'ENGINE_OUT_OF_MEMORY' : isMeterTrap(e) ? 'ENGINE_LIMIT' : 'ENGINE_TRAP';
    this.#rules = null;
    this.#recover();
    return code;
  }

  /**
   * After the component returned: over the memory cap (the instance is
   * replaced: wasm memory never shrinks), or past the deadline?
   * @param {number} start
   * @returns {EngineFaultCode | null}
   */
  #afterCall(start) {
    if (this.#memoryOver()) {
      this.#rules = null;
      this.#recover();
      return 'ENGINE_OUT_OF_MEMORY';
    }
    if (now() - start > this.deadlineMs) return 'ENGINE_LIMIT';
    return null;
  }

  #memoryOver() {
    const memory = this.#memory;
    return memory !== null && memory.buffer.byteLength > this.maxMemoryBytes;
  }

  /**
   * Decides one `tools/call`. Never throws for a bad call or a failing
   * engine: every failure is a deny decision with its own code.
   * @param {unknown} call `{name, arguments}`, its JSON text, or its bytes
   * @param {unknown} [context] `{surface, scopes, allowedTools}` or its JSON text
   * @returns {Decision}
   */
  evaluate(call, context) {
    const bytes = callBytes(call);
    if (bytes.length > MAX_INPUT_BYTES) return FAULT_DECISIONS.INPUT_TOO_LARGE;
    const ctx = contextJson(context);
    if (utf8Length(ctx) > MAX_INPUT_BYTES) return FAULT_DECISIONS.INPUT_TOO_LARGE;
    if (this.#closed) throw new ToolgateError('CLOSED', 'this Toolgate was closed');
    let json;
    const start = now();
    try {
      this.#beforeCall();
      json = this.#fast ? this.#fast(bytes, ctx) : this.#rules.evaluate(bytes, ctx);
    } catch (e) {
      return FAULT_DECISIONS[this.#fault(e)];
    }
    const fault = this.#afterCall(start);
    return fault ? FAULT_DECISIONS[fault] : new Decision(json);
  }

  /**
   * The `tools/list` result this context may see.
   * @param {unknown} [context]
   * @returns {ToolList}
   */
  listExposable(context) {
    const ctx = contextJson(context);
    const n = utf8Length(ctx);
    if (n > MAX_INPUT_BYTES) throw new InputTooLargeError('context', n, MAX_INPUT_BYTES);
    return new ToolList(this.#guarded(() => this.#rules.listExposable(ctx)));
  }

  /**
   * One turn of the transactional runtime (SPEC §6).
   * @param {unknown} state the previous state (object, JSON text, or null for a new conversation)
   * @param {unknown} input this turn's input (object or JSON text)
   * @returns {TurnState}
   */
  turn(state, input) {
    const s = typeof state === 'string' ? state : JSON.stringify(state ?? null);
    const i = typeof input === 'string' ? input : JSON.stringify(input ?? null);
    const ns = utf8Length(s);
    if (ns > MAX_INPUT_BYTES) throw new InputTooLargeError('state', ns, MAX_INPUT_BYTES);
    const ni = utf8Length(i);
    if (ni > MAX_INPUT_BYTES) throw new InputTooLargeError('input', ni, MAX_INPUT_BYTES);
    return new TurnState(this.#guarded(() => this.#rules.turn(s, i)));
  }

  /**
   * The engine fields (`confirmed`, `confirmation`) to remove from a call's
   * arguments before forwarding it to this tool's handler.
   * @param {string} tool
   * @returns {readonly string[]}
   */
  stripFields(tool) {
    let fields = this.#strip.get(tool);
    if (!fields) {
      fields = Object.freeze(this.#guarded(() => this.#rules.stripFields(tool)));
      if (this.#strip.size < 4096) this.#strip.set(tool, fields);
    }
    return fields;
  }

  /**
   * @template T
   * @param {() => T} fn
   * @returns {T}
   */
  #guarded(fn) {
    const start = now();
    let result;
    try {
      this.#beforeCall();
      result = fn();
    } catch (e) {
      if (e instanceof ToolgateError) throw e;
      const p = problemOf(e);
      if (!p) throw engineFault(this.#fault(e), e);
      const fault = this.#afterCall(start);
      if (fault) throw engineFault(fault, undefined);
      throw new ProblemError(p);
    }
    const fault = this.#afterCall(start);
    if (fault) throw engineFault(fault, undefined);
    return result;
  }

  /** Frees the component's rule set. The object must not be used after. */
  close() {
    const r = this.#rules;
    this.#closed = true;
    this.#rules = null;
    this.#engine = null;
    this.#raw = null;
    this.#fast = null;
    this.#memory = null;
    this.#module = /** @type {any} */ (null);
    if (r && typeof r[Symbol.dispose] === 'function') r[Symbol.dispose]();
  }

  [Symbol.dispose]() { this.close(); }

  /** Test hook: the next call traps for real inside the component. */
  [kInjectTrap]() { this.#injectTrap = true; }

  /** Test hook: the raw core exports of the current instance. */
  get [kRawExports]() { return this.#raw; }
}

/** The decisions this host builds itself (SPEC §7), as Decision objects. */
export function faultDecision(/** @type {keyof typeof HOST_FAULTS} */ code) {
  return new Decision(HOST_FAULTS[code]);
}

export { HOST_FAULTS, MAX_INPUT_BYTES };
export * from './errors.js';
