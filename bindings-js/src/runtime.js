// The runtime: where the compiled core module comes from, instantiating the
// component with one rule set (through src/abi.js), and telling the engine's
// failures apart (a problem, the guest meter, a trap). No Node API is used.
import { CONTRACT_VERSION } from './contract.js';
import { checkedFastPath, fastEvaluate, instantiateComponent } from './abi.js';
import { COMPONENT_SHA256 } from './origin.js';
import { ComponentError, ContractVersionError, EngineLimitError, EngineOutOfMemoryError, EngineTrapError, LoadError } from './errors.js';

/** @typedef {import('./errors.js').Problem} Problem */

const perf = globalThis.performance;
/** A monotonic clock in ms where there is one. */
export const now = typeof perf?.now === 'function' ? () => perf.now() : Date.now;

/** @type {(() => Promise<WebAssembly.Module>) | null} */
let defaultModule = null;

/**
 * Sets how `Toolgate.load` gets the compiled core module when none is given
 * (each runtime entry point sets it once).
 * @param {() => Promise<WebAssembly.Module>} provider
 * @returns {void}
 */
export function setDefaultModule(provider) {
  let cached = /** @type {Promise<WebAssembly.Module> | null} */ (null);
  defaultModule = () => (cached ??= provider().catch((e) => { cached = null; throw e; }));
}

/** The runtime's default core module, or null when no entry point set one. */
export function getDefaultModule() {
  return defaultModule ? defaultModule() : null;
}

/** The custom section a prepared core module names its component in (as the Rust SDK's `PREPARED_FROM`). */
export const PREPARED_FROM = 'toolgate:prepared-from';

/** Modules whose origin was checked: a check per module, not per load. */
const checkedOrigins = new WeakSet();

/**
 * Refuses a prepared core module made from another build's component: its
 * snapshot holds that build's engine state, which this package's glue and
 * contract were not built against. A module without the section (this
 * package's own, or one built from source) is not a prepared one: refused
 * where a prepared one is required (`--prepared DIR`, `prepared: true`), as
 * the Rust SDK refuses it.
 * @param {WebAssembly.Module} module
 * @param {boolean} [mustBePrepared]
 * @returns {void}
 */
export function checkPreparedOrigin(module, mustBePrepared = false) {
  if (mustBePrepared && WebAssembly.Module.customSections(module, PREPARED_FROM).length === 0) {
    throw new ComponentError('not a core module `toolgate prepare` made (it names no component in `toolgate:prepared-from`)');
  }
  if (checkedOrigins.has(module)) return;
  for (const section of WebAssembly.Module.customSections(module, PREPARED_FROM)) {
    const found = Array.from(new Uint8Array(section), (b) => b.toString(16).padStart(2, '0')).join('');
    if (found !== COMPONENT_SHA256) {
      throw new ComponentError(`the core module was prepared from another build's component (sha256 ${found.slice(0, 12) || 'empty'}, this package's is ${COMPONENT_SHA256.slice(0, 12)}): prepare it again with this build`);
    }
  }
  checkedOrigins.add(module);
}

/**
 * Whether a trap is the guest meter's: the component divides by zero when its
 * budget runs out (`i32.div_u` by 0), which Rust-compiled code never does (it
 * checks divisors and panics, an `unreachable`). V8 reports it as a
 * `WebAssembly.RuntimeError` "divide by zero".
 * @param {unknown} e
 */
export function isMeterTrap(e) {
  for (let err = e, depth = 0; err && depth < 4; err = /** @type {any} */ (err).cause, depth++) {
    if (err instanceof WebAssembly.RuntimeError && /divide by zero/i.test(err.message)) return true;
  }
  return false;
}

// Since contract 0.2.0 `problem.origin` and `finding.severity` are WIT enums;
// jco gives each case as its WIT name. The JS API keeps these strings; the
// tables say so explicitly (a case the package does not know stays as jco gave it).
const ORIGINS = Object.freeze({ policy: 'policy', catalog: 'catalog', call: 'call', context: 'context', state: 'state', input: 'input' });
const SEVERITIES = Object.freeze({ error: 'error', warning: 'warning' });

/**
 * The JS API's name of a WIT enum case, from jco's.
 * @param {Readonly<Record<string, string>>} table
 * @param {unknown} value
 * @returns {string}
 */
function enumName(table, value) {
  const name = String(value);
  return Object.hasOwn(table, name) ? table[name] : name;
}

/**
 * A WIT `problem` (jco's object) as this package's Problem.
 * @param {any} p
 * @returns {Problem}
 */
export function problemFromWit(p) {
  return { code: p.code, message: p.message, origin: enumName(ORIGINS, p.origin), path: p.path, line: p.line, column: p.column };
}

/**
 * A WIT `finding` (jco's object) as this package's Finding.
 * @param {any} f
 * @returns {{ severity: string, problem: Problem }}
 */
export function findingFromWit(f) {
  return { severity: enumName(SEVERITIES, f.severity), problem: problemFromWit(f.problem) };
}

/**
 * The `problem` a component call returned as its error (jco throws it as `payload`), or null.
 * @param {unknown} e
 * @returns {Problem | null}
 */
export function problemOf(e) {
  const p = /** @type {any} */ (e)?.payload;
  if (p && typeof p === 'object' && typeof p.code === 'string' && p.origin !== undefined && p.origin !== null) return problemFromWit(p);
  return null;
}

/**
 * One component instance with one rule set loaded.
 * @typedef {object} Engine
 * @property {any} rules jco's `RuleSet` object
 * @property {WebAssembly.Exports} raw the core instance's exports
 * @property {WebAssembly.Memory | null} memory the guest's memory (its size is the memory cap's measure)
 * @property {number} rep the rule set's rep (-1: unknown)
 * @property {(bytes: Uint8Array, context: string) => string} evaluate the fast path when it passed its checks, else jco's wrapper
 * @property {boolean} fastPath whether `evaluate` is the fast path
 * @property {readonly string[]} abiProblems why it is not (empty when it is)
 */

/**
 * What was checked once for a compiled module and holds for every instance of
 * it: its contract version, and that the fast path gives jco's wrapper's bytes
 * on the probes. Both depend on the module's code and this package's bindings,
 * not on the rules or the instance, so each new instance (another rule set, a
 * recovery after a trap) skips the component calls that check them (about
 * 0.5 ms of a prepared seed rule set's 3 ms here). A check that fails is not
 * remembered: it runs again, and fails, on the next instance.
 * @type {WeakMap<WebAssembly.Module, { contract: boolean, fastPath: boolean }>}
 */
const checkedModules = new WeakMap();

/**
 * Instantiates the component and loads the rules into it.
 * @param {WebAssembly.Module} module
 * @param {{ policy: string | undefined, catalog: string, fastPath: boolean, maxMemoryBytes: number, hide?: Iterable<string> }} options
 * @returns {Engine}
 */
export function loadEngine(module, options) {
  const engine = load(module, options, options.fastPath);
  if (!engine.fastPath && engine.probeFailed) {
    // The probe itself failed inside the guest: that instance may be broken.
    const again = load(module, options, false);
    return { ...again, abiProblems: Object.freeze([...engine.abiProblems, ...again.abiProblems]) };
  }
  return engine;
}

/**
 * @param {WebAssembly.Module} module
 * @param {{ policy: string | undefined, catalog: string, maxMemoryBytes: number, hide?: Iterable<string> }} options
 * @param {boolean} fastPath
 * @returns {Engine & { probeFailed: boolean }}
 */
function load(module, options, fastPath) {
  let inst;
  try {
    inst = instantiateComponent(module, { fastPath, hide: options.hide });
  } catch (e) {
    const why = /** @type {any} */ (e)?.message ?? e;
    // Missing imports or exports (a LinkError, or the glue's TypeError on an
    // export it cannot find): a module that is not this package's component.
    // A trap or a failed allocation is the engine's: ENGINE_TRAP, as before.
    if (e instanceof WebAssembly.LinkError || e instanceof WebAssembly.CompileError || e instanceof TypeError) {
      throw new ComponentError(`the core module is not the toolgate component: ${why}`);
    }
    throw new EngineTrapError(`the policy engine could not be instantiated: ${why}`, e);
  }
  let checked = checkedModules.get(module);
  if (!checked) checkedModules.set(module, (checked = { contract: false, fastPath: false }));
  if (!checked.contract) {
    const version = inst.engine.contractVersion();
    if (version !== CONTRACT_VERSION) throw new ContractVersionError(CONTRACT_VERSION, version);
    checked.contract = true;
  }
  const { memory } = inst;
  const over = () => memory !== null && memory.buffer.byteLength > options.maxMemoryBytes;
  const repOf = inst.repOfNextRuleSet();
  let rules;
  try {
    rules = inst.engine.RuleSet.load(options.policy, options.catalog);
  } catch (e) {
    const p = problemOf(e);
    if (p) throw new LoadError(p);
    if (over()) throw new EngineOutOfMemoryError('loading the rules went over maxMemoryBytes', e);
    if (isMeterTrap(e)) throw new EngineLimitError('loading the rules ran out of the compute budget');
    throw new EngineTrapError('the policy engine failed while loading the rules', e);
  }
  if (over()) throw new EngineOutOfMemoryError('loading the rules went over maxMemoryBytes');
  const rep = repOf();
  const viaWrapper = (/** @type {Uint8Array} */ bytes, /** @type {string} */ context) => rules.evaluate(bytes, context);
  const problems = [...inst.problems];
  /** @type {((bytes: Uint8Array, context: string) => string) | null} */
  let fast = null;
  let probeFailed = false;
  if (fastPath && inst.abi && checked.fastPath && rep >= 0) {
    fast = fastEvaluate(inst.abi, rep);
  } else if (fastPath && inst.abi) {
    try {
      const probed = checkedFastPath(inst.abi, rep, viaWrapper);
      fast = probed.fast;
      if (probed.problem) problems.push(probed.problem);
      else checked.fastPath = true;
    } catch (e) {
      probeFailed = true;
      problems.push(`fast path probe failed: ${/** @type {any} */ (e)?.message ?? e}`);
    }
  }
  return {
    rules,
    raw: inst.raw,
    memory,
    rep,
    evaluate: fast ?? viaWrapper,
    fastPath: fast !== null,
    abiProblems: Object.freeze(problems),
    probeFailed,
  };
}
