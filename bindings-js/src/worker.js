// workerd / edge entry point: the core module is imported precompiled (a
// worker may not compile wasm at run time). Bundlers and workerd configs map
// `.wasm` imports to a WebAssembly.Module.
import coreModule from '../gen/toolgate_policy.core.wasm';
import { setDefaultModule } from './core.js';

setDefaultModule(async () => coreModule);

/** The compiled core module this entry point imported. */
export { coreModule };
export * from './core.js';
