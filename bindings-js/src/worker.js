// workerd / edge entry point: the core module is imported precompiled (a
// worker may not compile wasm at run time). Bundlers and workerd configs map
// `.wasm` imports to a WebAssembly.Module.
// @ts-ignore: a .wasm import is a WebAssembly.Module in workerd and bundlers (typed below)
import wasm from '../gen/toolgate_policy.core.wasm';
import { setDefaultModule } from './core.js';

/**
 * The compiled core module this entry point imported.
 * @type {WebAssembly.Module}
 */
export const coreModule = wasm;

setDefaultModule(async () => coreModule);
export * from './core.js';
// Sealed requestState with WebCrypto (no node:crypto in a worker).
export { WebStateKeys, MIN_SECRET_BYTES, MAX_STATE_TOKEN_BYTES } from './webseal.js';
