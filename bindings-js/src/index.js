// Node entry point: the core, with the core module read from this package.
import { readFile } from 'node:fs/promises';
import { setDefaultModule } from './core.js';

/** The URL of the core module shipped in this package. */
export const coreModuleUrl = new URL('../gen/toolgate_policy.core.wasm', import.meta.url);

/**
 * Compiles the package's core module. `Toolgate.load` does it once per process.
 * @returns {Promise<WebAssembly.Module>}
 */
export async function compileCoreModule() {
  return WebAssembly.compile(await readFile(coreModuleUrl));
}

setDefaultModule(compileCoreModule);

export * from './core.js';
// Sealed requestState (node:crypto): Node only, not in the worker entry.
export { StateKeys, MIN_SECRET_BYTES, MAX_STATE_TOKEN_BYTES } from './seal.js';
export { WebStateKeys } from './webseal.js';
