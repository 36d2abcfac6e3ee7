// Errors are Error subclasses carrying a stable `code`, never strings.

/** Base class of every error this package throws. */
export class ToolgateError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {ErrorOptions} [options]
   */
  constructor(code, message, options) {
    super(message, options);
    this.name = 'ToolgateError';
    /** The stable, upper-case code (e.g. `POLICY_UNKNOWN_KEY`, `ENGINE_TRAP`). */
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
  /** @param {{code: string, message: string, origin: string, path: string, line: number, column: number}} problem */
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
  /** @param {{code: string, message: string, origin: string, path: string, line: number, column: number}} problem */
  constructor(problem) {
    super(problem);
    this.name = 'LoadError';
  }
}

/** The component is not the contract version this package speaks. */
export class ContractVersionError extends ToolgateError {
  /** @param {string} expected @param {string} found */
  constructor(expected, found) {
    super('CONTRACT_VERSION_MISMATCH', `the component implements contract ${JSON.stringify(found)}; this package needs ${JSON.stringify(expected)}`);
    this.name = 'ContractVersionError';
    this.expected = expected;
    this.found = found;
  }
}

/**
 * The engine could not answer (SPEC §7); nothing was decided. `code` is the
 * host fault: `ENGINE_TRAP`, `ENGINE_LIMIT` or `ENGINE_OUT_OF_MEMORY`.
 */
export class EngineFaultError extends ToolgateError {
  /** @param {'ENGINE_TRAP'|'ENGINE_LIMIT'|'ENGINE_OUT_OF_MEMORY'} code @param {string} message @param {unknown} [cause] */
  constructor(code, message, cause) {
    super(code, message, cause === undefined ? undefined : { cause });
    this.name = 'EngineFaultError';
  }
}

/** The component trapped (or the host could not run it); nothing was decided. */
export class EngineTrapError extends EngineFaultError {
  /** @param {string} message @param {unknown} [cause] */
  constructor(message, cause) {
    super('ENGINE_TRAP', message, cause);
    this.name = 'EngineTrapError';
  }
}

/** The call took longer than the host's deadline (`deadlineMs`); its answer was dropped. */
export class EngineLimitError extends EngineFaultError {
  /** @param {string} message */
  constructor(message) {
    super('ENGINE_LIMIT', message);
    this.name = 'EngineLimitError';
  }
}

/** The component's memory went over the host's cap (`maxMemoryBytes`); the instance was replaced. */
export class EngineOutOfMemoryError extends EngineFaultError {
  /** @param {string} message @param {unknown} [cause] */
  constructor(message, cause) {
    super('ENGINE_OUT_OF_MEMORY', message, cause);
    this.name = 'EngineOutOfMemoryError';
  }
}

/** An input over the host's size limit; it never reached the component. */
export class InputTooLargeError extends ToolgateError {
  /** @param {string} what @param {number} bytes @param {number} limit */
  constructor(what, bytes, limit) {
    super('INPUT_TOO_LARGE', `the ${what} is ${bytes} bytes; this host accepts at most ${limit}`);
    this.name = 'InputTooLargeError';
    this.bytes = bytes;
    this.limit = limit;
  }
}
