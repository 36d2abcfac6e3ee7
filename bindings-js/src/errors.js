// Errors are Error subclasses carrying a stable `code`, never strings.

/**
 * A problem the component reported (SPEC: WIT `problem`).
 * @typedef {object} Problem
 * @property {string} code
 * @property {string} message
 * @property {string} origin `policy`, `catalog`, `call`, `context`, `state` or `input`.
 * @property {string} path
 * @property {number} line 1-based; 0 when the input has no position.
 * @property {number} column
 */

/**
 * Base class of every error this package throws; `code` is stable.
 * @template {string} [C=string]
 */
export class ToolgateError extends Error {
  /**
   * The stable, upper-case code (e.g. `POLICY_UNKNOWN_KEY`, `ENGINE_TRAP`).
   * @readonly @type {C}
   */
  code;
  /**
   * @param {C} code
   * @param {string} message
   * @param {ErrorOptions} [options]
   */
  constructor(code, message, options) {
    super(message, options);
    this.name = 'ToolgateError';
    this.code = code;
  }
}

/**
 * The component refused an input: it returned a `problem`. `origin` says
 * which input (`policy`, `catalog`, `context`, `state`, `input`); `line` and
 * `column` are 1-based, 0 when the input has no position (then `path` may
 * name the JSON path).
 */
export class ProblemError extends ToolgateError {
  /** The component's message, without the origin/position prefix. @readonly @type {string} */
  problemMessage;
  /** Which input: `policy`, `catalog`, `call`, `context`, `state` or `input`. @readonly @type {string} */
  origin;
  /** @readonly @type {string} */
  path;
  /** 1-based; 0 when the input has no position. @readonly @type {number} */
  line;
  /** @readonly @type {number} */
  column;
  /** @param {Problem} problem */
  constructor(problem) {
    const where = problem.line > 0 ? `${problem.line}:${problem.column}: ` : '';
    super(problem.code, `${problem.origin}: ${where}${problem.message}`);
    this.name = 'ProblemError';
    this.problemMessage = problem.message;
    this.origin = problem.origin;
    this.path = problem.path;
    this.line = problem.line;
    this.column = problem.column;
  }
}

/** Loading the policy or the catalog failed. */
export class LoadError extends ProblemError {
  /** @param {Problem} problem */
  constructor(problem) {
    super(problem);
    this.name = 'LoadError';
  }
}

/**
 * The component does not implement this package's contract version.
 * @extends {ToolgateError<'CONTRACT_VERSION_MISMATCH'>}
 */
export class ContractVersionError extends ToolgateError {
  /** @readonly @type {string} */
  expected;
  /** @readonly @type {string} */
  found;
  /** @param {string} expected @param {string} found */
  constructor(expected, found) {
    super('CONTRACT_VERSION_MISMATCH', `the component implements contract ${JSON.stringify(found)}; this package needs ${JSON.stringify(expected)}`);
    this.name = 'ContractVersionError';
    this.expected = expected;
    this.found = found;
  }
}

/**
 * The core module is not one this package can use: a prepared one
 * (`toolgate prepare`) made from another build's component.
 * @extends {ToolgateError<'COMPONENT_INVALID'>}
 */
export class ComponentError extends ToolgateError {
  /** @param {string} message */
  constructor(message) {
    super('COMPONENT_INVALID', message);
    this.name = 'ComponentError';
  }
}

/**
 * The engine could not answer (SPEC §7); nothing was decided. `code` is the
 * host fault: `ENGINE_TRAP`, `ENGINE_LIMIT` or `ENGINE_OUT_OF_MEMORY`.
 * @template {'ENGINE_TRAP' | 'ENGINE_LIMIT' | 'ENGINE_OUT_OF_MEMORY'} [C='ENGINE_TRAP' | 'ENGINE_LIMIT' | 'ENGINE_OUT_OF_MEMORY']
 * @extends {ToolgateError<C>}
 */
export class EngineFaultError extends ToolgateError {
  /** @param {C} code @param {string} message @param {unknown} [cause] */
  constructor(code, message, cause) {
    super(code, message, cause === undefined ? undefined : { cause });
    this.name = 'EngineFaultError';
  }
}

/**
 * The component trapped (or the host could not run it); nothing was decided.
 * @extends {EngineFaultError<'ENGINE_TRAP'>}
 */
export class EngineTrapError extends EngineFaultError {
  /** @param {string} message @param {unknown} [cause] */
  constructor(message, cause) {
    super('ENGINE_TRAP', message, cause);
    this.name = 'EngineTrapError';
  }
}

/**
 * The call took longer than the host's deadline (`deadlineMs`); its answer was dropped.
 * @extends {EngineFaultError<'ENGINE_LIMIT'>}
 */
export class EngineLimitError extends EngineFaultError {
  /** @param {string} message */
  constructor(message) {
    super('ENGINE_LIMIT', message);
    this.name = 'EngineLimitError';
  }
}

/**
 * The component's memory went over the host's cap (`maxMemoryBytes`); the instance was replaced.
 * @extends {EngineFaultError<'ENGINE_OUT_OF_MEMORY'>}
 */
export class EngineOutOfMemoryError extends EngineFaultError {
  /** @param {string} message @param {unknown} [cause] */
  constructor(message, cause) {
    super('ENGINE_OUT_OF_MEMORY', message, cause);
    this.name = 'EngineOutOfMemoryError';
  }
}

/**
 * An input over the host's size limit; it never reached the component.
 * @extends {ToolgateError<'INPUT_TOO_LARGE'>}
 */
export class InputTooLargeError extends ToolgateError {
  /** @readonly @type {number} */
  bytes;
  /** @readonly @type {number} */
  limit;
  /** @param {string} what @param {number} bytes @param {number} limit */
  constructor(what, bytes, limit) {
    super('INPUT_TOO_LARGE', `the ${what} is ${bytes} bytes; this host accepts at most ${limit}`);
    this.name = 'InputTooLargeError';
    this.bytes = bytes;
    this.limit = limit;
  }
}

/**
 * A sealed `requestState` token that `StateKeys#open` refused (`STATE_INVALID`).
 * Answer every one alike: decide the retried call with confirmation
 * `'invalid'` (`CONFIRMATION_INVALID`). `reason` is for the log only:
 * `malformed` (not a `tg1.` token in the canonical spelling, too long, too
 * short), `unknown-key` (sealed with a key the ring does not hold) or
 * `forged` (altered, or sealed under another key with the same id).
 * @extends {ToolgateError<'STATE_INVALID'>}
 */
export class InvalidStateError extends ToolgateError {
  /** Which check failed; for the log only. @readonly @type {'malformed' | 'unknown-key' | 'forged'} */
  reason;
  /** @param {'malformed' | 'unknown-key' | 'forged'} reason @param {string} message */
  constructor(reason, message) {
    super('STATE_INVALID', message);
    this.name = 'InvalidStateError';
    this.reason = reason;
  }
}

/**
 * A key ring for sealed `requestState` could not be built
 * (`STATE_KEY_INVALID`): no secret, a secret shorter than 32 bytes, or one
 * that repeats an earlier one. `index` is the secret's position (-1 for none).
 * @extends {ToolgateError<'STATE_KEY_INVALID'>}
 */
export class StateKeyError extends ToolgateError {
  /** @readonly @type {'empty' | 'too-short' | 'duplicate'} */
  reason;
  /** @readonly @type {number} */
  index;
  /** @param {'empty' | 'too-short' | 'duplicate'} reason @param {number} index @param {string} message */
  constructor(reason, index, message) {
    super('STATE_KEY_INVALID', message);
    this.name = 'StateKeyError';
    this.reason = reason;
    this.index = index;
  }
}
