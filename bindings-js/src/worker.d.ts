export * from './core.js';
/** The compiled core module this entry point imported. */
export const coreModule: WebAssembly.Module;
