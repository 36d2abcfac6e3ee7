/** A problem the component reported (SPEC: WIT `problem`). */
export interface Problem {
  code: string;
  message: string;
  /** `policy`, `catalog`, `call`, `context`, `state` or `input`. */
  origin: string;
  path: string;
  /** 1-based; 0 when the input has no position. */
  line: number;
  column: number;
}

/** Base class of every error this package throws; `code` is stable. */
export class ToolgateError extends Error {
  constructor(code: string, message: string, options?: ErrorOptions);
  readonly code: string;
}
/** The component refused an input (a `problem`). */
export class ProblemError extends ToolgateError {
  constructor(problem: Problem);
  /** The component's message, without the origin/position prefix. */
  readonly problemMessage: string;
  readonly origin: string;
  readonly path: string;
  readonly line: number;
  readonly column: number;
}
/** Loading the policy or catalog failed (`POLICY_*`, `CATALOG_*`). */
export class LoadError extends ProblemError {}
/** The component does not implement this package's contract version. */
export class ContractVersionError extends ToolgateError {
  constructor(expected: string, found: string);
  readonly code: 'CONTRACT_VERSION_MISMATCH';
  readonly expected: string;
  readonly found: string;
}
/** The engine could not answer; nothing was decided (SPEC §7). */
export class EngineFaultError extends ToolgateError {
  constructor(code: 'ENGINE_TRAP' | 'ENGINE_LIMIT' | 'ENGINE_OUT_OF_MEMORY', message: string, cause?: unknown);
  readonly code: 'ENGINE_TRAP' | 'ENGINE_LIMIT' | 'ENGINE_OUT_OF_MEMORY';
}
/** The component trapped; nothing was decided (code `ENGINE_TRAP`). */
export class EngineTrapError extends EngineFaultError {
  constructor(message: string, cause?: unknown);
  readonly code: 'ENGINE_TRAP';
}
/** The call ran past the host's deadline; its answer was dropped (code `ENGINE_LIMIT`). */
export class EngineLimitError extends EngineFaultError {
  constructor(message: string);
  readonly code: 'ENGINE_LIMIT';
}
/** The component's memory went over the host's cap (code `ENGINE_OUT_OF_MEMORY`). */
export class EngineOutOfMemoryError extends EngineFaultError {
  constructor(message: string, cause?: unknown);
  readonly code: 'ENGINE_OUT_OF_MEMORY';
}
/** An input over the host's limit; it never reached the component. */
export class InputTooLargeError extends ToolgateError {
  constructor(what: string, bytes: number, limit: number);
  readonly code: 'INPUT_TOO_LARGE';
  readonly bytes: number;
  readonly limit: number;
}
