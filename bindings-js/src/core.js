// The runtime-neutral core: the public `Toolgate` API over the toolgate
// component. No Node API is used here, so this file runs unchanged in Node
// and in workerd. Its parts, one job each:
//   contract.js  the WIT contract version;
//   abi.js       every jco-internals / canonical-ABI assumption, checked at
//                instantiation, and the `evaluate` fast path (jco's wrapper
//                is used instead when a check fails);
//   runtime.js   the default core module, instantiating and loading rules,
//                telling failures apart;
//   cache.js     the hot path's context-bytes cache;
//   inputs.js    call bytes, context text, options, size checks;
//   results.js   Decision, CallOutcome, ToolList, TurnState, the host's
//                fault answers.
import { HOST_FAULTS, MAX_INPUT_BYTES } from './faults.js';
import { CONTRACT_VERSION } from './contract.js';
import { FASTPATH_BY_ENV, injectTrap, kHideFromAbi } from './abi.js';
import { checkPreparedOrigin, findingFromWit, getDefaultModule, isMeterTrap, loadEngine, now, problemOf, setDefaultModule } from './runtime.js';
import { callBytes, contextJson, limitOption, optionsOf, u64, utf8Length, wellFormed, witConfirmation } from './inputs.js';
import { engineJson } from './calljson.js';
import { CallOutcome, Decision, ToolList, TurnState, engineFault, faultDecision, faultOutcome } from './results.js';
import { ComponentError, EngineTrapError, InputTooLargeError, ProblemError, ToolgateError } from './errors.js';

// BEGIN limits: generated from component-build/src by
// `cargo run --release --locked --bin component-build -- --write-limits`; do not edit.
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

const OPTION_KEYS = /** @type {const} */ (['policy', 'catalog', 'module', 'fastPath', 'maxMemoryBytes', 'deadlineMs', 'prepared']);

/**
 * The load options (see `optionsOf`).
 * @param {unknown} options
 * @returns {Partial<LoadOptions>}
 */
function ownOptions(options) {
  return /** @type {Partial<LoadOptions>} */ (optionsOf(options, OPTION_KEYS));
}

const kInjectTrap = Symbol.for('toolgate.test.injectTrap');
const kRawExports = Symbol.for('toolgate.test.rawExports');
const kFastPath = Symbol.for('toolgate.test.fastPath');

/** @typedef {import('./results.js').EngineFaultCode} EngineFaultCode */
/** @typedef {import('./results.js').Outcome} Outcome */
/** @typedef {import('./results.js').DecisionErrorBody} DecisionErrorBody */
/** @typedef {import('./results.js').DecisionMetadata} DecisionMetadata */
/** @typedef {import('./results.js').DecisionValue} DecisionValue */
/** @typedef {import('./results.js').ListedTool} ListedTool */
/** @typedef {import('./inputs.js').Surface} Surface */
/** @typedef {import('./inputs.js').Context} Context */
/** @typedef {import('./inputs.js').CallInput} CallInput */
/** @typedef {import('./inputs.js').ContextInput} ContextInput */
/** @typedef {import('./inputs.js').Confirmation} Confirmation */
/** @typedef {import('./inputs.js').OpenedSeal} OpenedSeal */
/** @typedef {import('./faults.js').HostFaultCode} HostFaultCode */
/** @typedef {import('./errors.js').Problem} Problem */
/**
 * A lint on the loaded rules.
 * @typedef {object} Finding
 * @property {'error' | 'warning' | (string & {})} severity
 * @property {Problem} problem
 */
/**
 * @typedef {object} RulesText
 * @property {string | null} [policy] The policy (tool_policies.yaml) text; absent/null: legacy, the catalog decides.
 * @property {string} catalog The catalog text (tools/list JSON, published catalog, or tools.yaml).
 * @property {boolean} [fastPath] false: every call goes through jco's generated wrapper instead of the canonical-ABI fast path (as when an ABI check fails, or TOOLGATE_JS_FASTPATH=0).
 * @property {number} [maxMemoryBytes] Cap on the component's linear memory, bytes (default 1 GiB; Infinity: none). Checked after every call: over it, ENGINE_OUT_OF_MEMORY and a new instance.
 * @property {number} [deadlineMs] Per-call deadline, ms (default 5000; Infinity: none). Checked when the call returns: a later answer is dropped, ENGINE_LIMIT.
 * @property {boolean} [prepared] true: the module must be one `toolgate prepare` made (it names its component in the custom section `toolgate:prepared-from`); another is refused, COMPONENT_INVALID.
 * Options are read from the object's own properties only: a key inherited (a polluted `Object.prototype`) is no option.
 */
/**
 * @typedef {RulesText & { module?: WebAssembly.Module | PromiseLike<WebAssembly.Module> | BufferSource }} LoadOptions
 * `module`: the compiled core module (`toolgate/core.wasm`), a promise of it, or its bytes. Default: the runtime's.
 */

/** Loaded rules: one component instance with one rule set. Immutable. */
export class Toolgate {
  /** @type {WebAssembly.Module} */
  #module;
  /** @type {string | undefined} */
  #policy;
  /** @type {string} */
  #catalog;
  /** @type {import('./runtime.js').Engine | null} */
  #engine = null;
  #injectTrap = false;
  #closed = false;
  #fastPath = FASTPATH_BY_ENV;
  /** @type {string[]} */
  #hide = [];
  #recoveries = 0;
  /** The `policy_revision` every decision carries. @readonly @type {string} */
  revision;
  /** Lints on the loaded rules. @readonly @type {readonly Finding[]} */
  findings;
  /** The cap on the component's memory, bytes; checked after every call (may be changed). */
  maxMemoryBytes = DEFAULT_MAX_MEMORY_BYTES;
  /** The per-call deadline, ms; checked when a call returns (may be changed). */
  deadlineMs = DEFAULT_DEADLINE_MS;

  /**
   * Loads rules synchronously from an already compiled core module. Throws LoadError.
   * @param {WebAssembly.Module} module
   * @param {RulesText} rules
   */
  constructor(module, rules) {
    const given = ownOptions(rules);
    if (given.fastPath === false) this.#fastPath = false;
    if (!(module instanceof WebAssembly.Module)) throw new TypeError('module must be a WebAssembly.Module (the compiled toolgate_policy.core.wasm)');
    if (typeof given.catalog !== 'string') throw new TypeError('catalog must be a string (the catalog text)');
    if (given.policy !== undefined && given.policy !== null && typeof given.policy !== 'string') throw new TypeError('policy must be a string, null or undefined');
    // UTF-8 cannot carry a lone surrogate: loading U+FFFD in its place would
    // load rules the host was never given (Python refuses the text too).
    for (const [which, text] of /** @type {const} */ ([['catalog', given.catalog], ['policy', given.policy]])) {
      if (typeof text === 'string' && !wellFormed(text)) throw new TypeError(`the ${which} text holds a lone surrogate, which UTF-8 cannot carry`);
    }
    const hide = Object.hasOwn(rules, kHideFromAbi) ? /** @type {any} */ (rules)[kHideFromAbi] : undefined;
    if (Array.isArray(hide)) this.#hide = hide.map(String);
    this.maxMemoryBytes = limitOption(given.maxMemoryBytes, 'maxMemoryBytes', DEFAULT_MAX_MEMORY_BYTES);
    this.deadlineMs = limitOption(given.deadlineMs, 'deadlineMs', DEFAULT_DEADLINE_MS);
    checkPreparedOrigin(module, given.prepared === true);
    this.#module = module;
    this.#policy = given.policy ?? undefined;
    this.#catalog = given.catalog;
    const engine = this.#instantiate();
    this.revision = engine.rules.revision();
    this.findings = Object.freeze(engine.rules.findings().map(findingFromWit));
  }

  /**
   * Loads rules synchronously from a compiled core module (workers: the
   * imported `toolgate_policy.core.wasm`).
   * @param {RulesText & { module: WebAssembly.Module }} options
   * @returns {Toolgate}
   */
  static fromModule(options) {
    return new Toolgate(/** @type {WebAssembly.Module} */ (ownOptions(options).module), options);
  }

  /**
   * Loads rules; rejects with LoadError / ContractVersionError. `module` is
   * the compiled core module, a promise of it, or its bytes; without it, the
   * runtime's default (Node: the package's `gen/toolgate_policy.core.wasm`,
   * compiled once per process; workerd: the module imported by `toolgate/worker`).
   * @param {LoadOptions} options
   * @returns {Promise<Toolgate>}
   */
  static async load(options) {
    if (!options || typeof options !== 'object') throw new TypeError('load needs { catalog, policy?, module? }');
    let module = await ownOptions(options).module;
    if (module === undefined || module === null) {
      const fallback = getDefaultModule();
      if (!fallback) throw new TypeError('no default core module in this runtime: pass `module` (the compiled toolgate_policy.core.wasm)');
      module = await fallback;
    } else if (!(module instanceof WebAssembly.Module)) {
      try {
        module = await WebAssembly.compile(/** @type {BufferSource} */ (module));
      } catch (e) {
        throw new ComponentError(`the core module could not be compiled: ${/** @type {Error} */ (e)?.message ?? e}`);
      }
    }
    return new Toolgate(/** @type {WebAssembly.Module} */ (module), options);
  }

  /** How many times the instance was replaced after a trap. */
  get recoveries() { return this.#recoveries; }

  #instantiate() {
    this.#engine = null;
    const engine = loadEngine(this.#module, {
      policy: this.#policy, catalog: this.#catalog, fastPath: this.#fastPath, maxMemoryBytes: this.maxMemoryBytes, hide: this.#hide,
    });
    this.#engine = engine;
    return engine;
  }

  /** After a trap the instance cannot be re-entered: replace it, reload the rules. */
  #recover() {
    try {
      this.#instantiate();
      this.#recoveries += 1;
      return true;
    } catch {
      return false; // still broken: every call denies until a later retry works
    }
  }

  /** @returns {import('./runtime.js').Engine} */
  #beforeCall() {
    if (this.#closed) throw new ToolgateError('CLOSED', 'this Toolgate was closed');
    if (!this.#engine && !this.#recover()) throw new EngineTrapError('the policy engine is not available');
    const engine = /** @type {import('./runtime.js').Engine} */ (this.#engine);
    if (this.#injectTrap) {
      this.#injectTrap = false;
      injectTrap(engine.raw, engine.rep);
    }
    return engine;
  }

  /**
   * After the component threw (a trap): classify, replace the instance.
   * @param {unknown} e
   * @returns {EngineFaultCode}
   */
  #fault(e) {
    const code = this.#memoryOver() ? 'ENGINE_OUT_OF_MEMORY' : isMeterTrap(e) ? 'ENGINE_LIMIT' : 'ENGINE_TRAP';
    // No instance: the call failed in `#beforeCall`'s own re-instantiation,
    // which the next call retries; trying again here would pay for two.
    if (this.#engine !== null) {
      this.#engine = null;
      this.#recover();
    }
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
      this.#engine = null;
      this.#recover();
      return 'ENGINE_OUT_OF_MEMORY';
    }
    if (now() - start > this.deadlineMs) return 'ENGINE_LIMIT';
    return null;
  }

  #memoryOver() {
    const memory = this.#engine?.memory ?? null;
    return memory !== null && memory.buffer.byteLength > this.maxMemoryBytes;
  }

  /**
   * Decides one `tools/call`. Never throws for a bad call or a failing
   * engine: every failure is a deny decision with its own code.
   * @param {CallInput} call `{name, arguments}`, its JSON text, or its bytes
   * @param {ContextInput} [context] `{surface, scopes, allowedTools}` or its JSON text
   * @returns {Decision}
   */
  evaluate(call, context) {
    const bytes = callBytes(call);
    if (bytes.length > MAX_INPUT_BYTES) return faultDecision('INPUT_TOO_LARGE');
    const ctx = contextJson(context);
    if (utf8Length(ctx) > MAX_INPUT_BYTES) return faultDecision('INPUT_TOO_LARGE');
    if (this.#closed) throw new ToolgateError('CLOSED', 'this Toolgate was closed');
    let json;
    const start = now();
    try {
      json = this.#beforeCall().evaluate(bytes, ctx);
    } catch (e) {
      return faultDecision(this.#fault(e));
    }
    const fault = this.#afterCall(start);
    return fault ? faultDecision(fault) : new Decision(json);
  }

  /**
   * The `tools/list` result this context may see. Throws ProblemError (bad
   * context), EngineFaultError (EngineTrapError, EngineLimitError,
   * EngineOutOfMemoryError), InputTooLargeError.
   * @param {ContextInput} [context]
   * @returns {ToolList}
   */
  listExposable(context) {
    const ctx = contextJson(context);
    const n = utf8Length(ctx);
    if (n > MAX_INPUT_BYTES) throw new InputTooLargeError('context', n, MAX_INPUT_BYTES);
    return new ToolList(this.#guarded((rules) => rules.listExposable(ctx)));
  }

  /**
   * One turn of the transactional runtime (SPEC §6). The state may be the
   * previous `TurnState` itself; the input's context is written as `decide`
   * writes one (`allowedTools` or `allowed_tools`).
   * @param {TurnState | Record<string, unknown> | string | null} state the previous state (the TurnState, its JSON text, an object, or null for a new conversation)
   * @param {Record<string, unknown> | string} input this turn's input (object or JSON text)
   * @returns {TurnState}
   */
  turn(state, input) {
    // Written as the engine reads calls (calljson.js): a proposed argument
    // JSON cannot carry (Infinity, undefined, a Date) is refused by the
    // engine, as from Python and Rust, not rewritten to null and decided.
    const s = typeof state === 'string' ? state : state instanceof TurnState ? state.json : engineJson(state ?? null);
    const i = typeof input === 'string' ? input : turnInputJson(input);
    // UTF-8 cannot carry a lone surrogate: the engine would decide on U+FFFD
    // in its place, a name or an argument nobody sent.
    if (!wellFormed(s)) throw new TypeError('the turn state holds a lone surrogate, which UTF-8 cannot carry');
    if (!wellFormed(i)) throw new TypeError('the turn input holds a lone surrogate, which UTF-8 cannot carry');
    const ns = utf8Length(s);
    if (ns > MAX_INPUT_BYTES) throw new InputTooLargeError('state', ns, MAX_INPUT_BYTES);
    const ni = utf8Length(i);
    if (ni > MAX_INPUT_BYTES) throw new InputTooLargeError('input', ni, MAX_INPUT_BYTES);
    return new TurnState(this.#guarded((rules) => rules.turn(s, i)));
  }

  /**
   * The call pipeline (docs/spec.md §8): decides one `tools/call` given how
   * the host obtained its confirmation, and says what to do: forward
   * `forward` (exactly these arguments) when allowed; answer with
   * `blockedResult` (the MCP `CallToolResult`) when denied; when denied with
   * no blocked result (`NOT_FOUND`), answer as the server answers a tool it
   * does not have. The host never adds, removes or reads the confirmation
   * fields itself. Never throws for a bad call or a failing engine: a fault
   * is a deny with its code and the blocked result every host gives.
   * @param {CallInput} call `{name, arguments}`, its JSON text, or its bytes
   * @param {ContextInput} [context] `{surface, scopes, allowedTools}` or its JSON text
   * @param {Confirmation} [confirmation] how the confirmation was obtained (default `'none'`)
   * @returns {CallOutcome}
   */
  decide(call, context, confirmation = 'none') {
    const bytes = callBytes(call);
    const ctx = contextJson(context);
    const wit = witConfirmation(confirmation);
    if (bytes.length > MAX_INPUT_BYTES || utf8Length(ctx) > MAX_INPUT_BYTES) return faultOutcome('INPUT_TOO_LARGE');
    if (this.#closed) throw new ToolgateError('CLOSED', 'this Toolgate was closed');
    let out;
    const start = now();
    try {
      out = this.#beforeCall().rules.decide(bytes, ctx, wit);
    } catch (e) {
      return faultOutcome(this.#fault(e));
    }
    const fault = this.#afterCall(start);
    if (fault) return faultOutcome(fault);
    const decision = new Decision(out.decision);
    const forward = out.forward ?? null;
    // An allow must come with the call to forward, a deny without; anything
    // else from the engine is a fault, and faults deny (as toolgate).
    if (decision.ok !== (forward !== null) || decision.code === 'ENGINE_TRAP') return faultOutcome('ENGINE_TRAP');
    return new CallOutcome(decision, forward, out.blockedResult ?? null, out.digest ?? null);
  }

  /**
   * The payload a host seals (encrypts or MACs with its own key) to carry a
   * pending confirmation of `call` through the client (docs/spec.md §8):
   * contract version, tool, call digest, policy revision, caller, id and
   * expiry. Throws ProblemError (`CALL_INVALID_VALUE`: an unreadable call, a
   * tool these rules do not have, non-object arguments, an id that is not 16
   * to 128 base64url characters), InputTooLargeError, EngineFaultError.
   * @param {CallInput} call
   * @param {string} caller the authenticated caller's subject, or ''
   * @param {string} id a fresh id, 16 to 128 characters of A-Z a-z 0-9 _ -
   * @param {number | bigint} expiresMs expiry, ms since the Unix epoch
   * @returns {string}
   */
  sealPayload(call, caller, id, expiresMs) {
    const bytes = callBytes(call);
    if (typeof caller !== 'string') throw new TypeError('caller must be a string');
    if (typeof id !== 'string') throw new TypeError('id must be a string');
    // UTF-8 cannot carry a lone surrogate (it would be sealed as U+FFFD).
    if (!wellFormed(caller) || !wellFormed(id)) throw new TypeError('caller and id must not hold a lone surrogate');
    const expires = u64(expiresMs, 'expiresMs');
    if (bytes.length > MAX_INPUT_BYTES) throw new InputTooLargeError('call', bytes.length, MAX_INPUT_BYTES);
    const n = utf8Length(caller);
    if (n > MAX_INPUT_BYTES) throw new InputTooLargeError('caller', n, MAX_INPUT_BYTES);
    return this.#guarded((rules) => rules.sealPayload(bytes, caller, id, expires));
  }

  /**
   * @template T
   * @param {(rules: any) => T} fn
   * @returns {T}
   */
  #guarded(fn) {
    const start = now();
    let result;
    try {
      result = fn(this.#beforeCall().rules);
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
    const r = this.#engine?.rules;
    this.#closed = true;
    this.#engine = null;
    this.#module = /** @type {any} */ (null);
    if (r && typeof r[Symbol.dispose] === 'function') {
      try {
        r[Symbol.dispose]();
      } catch {
        // a rule set whose instance a fault left broken: closed all the same
      }
    }
  }

  [Symbol.dispose]() { this.close(); }

  /** @internal Test hook: the next call traps for real inside the component. */
  [kInjectTrap]() { this.#injectTrap = true; }

  /** @internal Test hook: the raw core exports of the current instance. */
  get [kRawExports]() { return this.#engine?.raw ?? null; }

  /** @internal Test hook: whether `evaluate` uses the fast path, and why not. */
  get [kFastPath]() {
    const e = this.#engine;
    return { active: e?.fastPath ?? false, problems: e?.abiProblems ?? [] };
  }
}

export { CONTRACT_VERSION, setDefaultModule, contextJson, Decision, CallOutcome, ToolList, TurnState, faultDecision, faultOutcome, HOST_FAULTS, MAX_INPUT_BYTES };
export * from './errors.js';

/**
 * The same class under the name every toolgate SDK uses for loaded rules
 * (Rust `toolgate::RuleSet`, Python `toolgate.RuleSet`).
 */
export const RuleSet = Toolgate;

/**
 * A turn input object as the engine reads it, written as the engine reads
 * calls (`engineJson`: a value JSON cannot carry, `undefined` included, is
 * refused by the engine rather than dropped), with the context's
 * `allowedTools` spelled as the engine's `allowed_tools`, as `decide` takes it.
 * @param {unknown} input
 * @returns {string}
 */
function turnInputJson(input) {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) return engineJson(input ?? null);
  const given = /** @type {Record<string, unknown>} */ (input);
  const context = given.context;
  if (context === null || typeof context !== 'object' || Array.isArray(context) || !('allowedTools' in context)) {
    return engineJson(input);
  }
  const { allowedTools, ...rest } = /** @type {Record<string, unknown>} */ (context);
  if ('allowed_tools' in rest) throw new TypeError('context has both allowedTools and allowed_tools');
  return engineJson({ ...given, context: { ...rest, allowed_tools: allowedTools } });
}
