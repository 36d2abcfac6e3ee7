// Decisions this host builds itself when the component cannot decide
// (SPEC §7). Exactly the bytes of tests/vectors/host-faults.json; a test
// compares them with that file.

/** @typedef {'ENGINE_TRAP' | 'ENGINE_LIMIT' | 'ENGINE_OUT_OF_MEMORY' | 'INPUT_TOO_LARGE' | 'STORE_UNAVAILABLE'} HostFaultCode */

// BEGIN faults: generated from component-build/src by
// `cargo run --release --locked --bin component-build -- --write-limits`; do not edit.
/**
 * The decisions a host builds itself (docs/spec.md §7), exact bytes.
 * @type {Readonly<Record<HostFaultCode, string>>}
 */
export const HOST_FAULTS = Object.freeze({
  ENGINE_TRAP: '{"ok":false,"error":{"code":"ENGINE_TRAP","message":"The policy engine failed on this call; it was not allowed. Report it if it repeats.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}',
  ENGINE_LIMIT: '{"ok":false,"error":{"code":"ENGINE_LIMIT","message":"The policy engine ran out of its time budget on this call; it was not allowed. Send a smaller call.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}',
  ENGINE_OUT_OF_MEMORY: '{"ok":false,"error":{"code":"ENGINE_OUT_OF_MEMORY","message":"The policy engine ran out of memory on this call; it was not allowed. Send a smaller call.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}',
  INPUT_TOO_LARGE: '{"ok":false,"error":{"code":"INPUT_TOO_LARGE","message":"The call is larger than this host accepts; it was not allowed. Send a smaller call.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}',
  STORE_UNAVAILABLE: '{"ok":false,"error":{"code":"STORE_UNAVAILABLE","message":"The store that makes a confirmation single-use could not be reached, so the call was not run. Try again shortly.","retryable":true,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}',
});
// END faults

// BEGIN limits: generated from component-build/src by
// `cargo run --release --locked --bin component-build -- --write-limits`; do not edit.
/** Calls and contexts over this many bytes never reach the component. */
export const MAX_INPUT_BYTES = 4194304;
// END limits
