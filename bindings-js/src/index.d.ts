export * from './core.js';
/** The URL of the core module shipped in this package. */
export const coreModuleUrl: URL;
/** Compiles the package's core module (Toolgate.load does it once per process). */
export function compileCoreModule(): Promise<WebAssembly.Module>;
