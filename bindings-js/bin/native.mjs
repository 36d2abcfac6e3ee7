// The native `toolgate` (the Rust CLI and gateway) for the commands the JS
// CLI does not implement (proxy, init, pin, check, test, demo, precompile,
// help, --version): found in the platform package npm installed
// (`@toolgate/<os>-<arch>`, an optionalDependency of `toolgate`, as esbuild
// and biome ship theirs), or at `$TOOLGATE_BINARY`; run with the same argv,
// stdio inherited, signals forwarded and its exit status propagated.
import { spawn } from 'node:child_process';
import { accessSync, constants as fsConstants, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { constants as osConstants } from 'node:os';

const require = createRequire(import.meta.url);

/** Exit status when no native binary can be found or started (an input could not be loaded). */
export const EX_NO_BINARY = 2;

/** The platform packages this version is published with, by `${process.platform}-${process.arch}`. */
export const PLATFORM_PACKAGES = /** @type {Record<string, string>} */ ({
  'linux-x64': '@toolgate/linux-x64',
  'linux-arm64': '@toolgate/linux-arm64',
  'darwin-x64': '@toolgate/darwin-x64',
  'darwin-arm64': '@toolgate/darwin-arm64',
  'win32-x64': '@toolgate/win32-x64',
});

/** The subcommands of the Rust CLI that only the native binary has. */
export const NATIVE_COMMANDS = new Set(['proxy', 'init', 'pin', 'check', 'test', 'demo', 'precompile', 'prepare']);

/** True on Linux with a C library other than glibc (musl: Alpine). */
function isMuslLinux() {
  if (process.platform !== 'linux') return false;
  try {
    const report = /** @type {any} */ (process.report?.getReport());
    return !report?.header?.glibcVersionRuntime;
  } catch {
    return false;
  }
}

/** `linux-x64`, `darwin-arm64`, `win32-x64`, …; `linux-x64-musl` on a musl libc. */
export function platformKey() {
  return `${process.platform}-${process.arch}${isMuslLinux() ? '-musl' : ''}`;
}

/**
 * Where the native binary is: `{ path }`, or `{ error }` saying what is
 * missing (the package and the platform).
 * @returns {{ path: string, error?: undefined } | { path?: undefined, error: string }}
 */
export function findNativeBinary() {
  const override = process.env.TOOLGATE_BINARY;
  if (override) {
    try {
      accessSync(override, process.platform === 'win32' ? fsConstants.F_OK : fsConstants.X_OK);
    } catch {
      return { error: `TOOLGATE_BINARY=${override} is not an executable file` };
    }
    return { path: override };
  }
  const key = platformKey();
  const pkg = PLATFORM_PACKAGES[key];
  if (!pkg) {
    return {
      error: `no native toolgate is published for ${key} (there are: ${Object.keys(PLATFORM_PACKAGES).join(', ')}); ` +
        'build it from the repository (cargo build --release) and set TOOLGATE_BINARY=/path/to/toolgate',
    };
  }
  const exe = process.platform === 'win32' ? 'toolgate.exe' : 'toolgate';
  let path;
  try {
    path = require.resolve(`${pkg}/bin/${exe}`);
  } catch {
    return {
      error: `the native toolgate for ${key} is not installed: the package ${pkg} (an optional dependency of toolgate) is missing. ` +
        `Reinstall without --no-optional / --omit=optional (npm install toolgate ${pkg}), or set TOOLGATE_BINARY=/path/to/toolgate`,
    };
  }
  try {
    const installed = JSON.parse(readFileSync(require.resolve(`${pkg}/package.json`), 'utf8')).version;
    const ours = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;
    if (installed !== ours) {
      return { error: `${pkg} is version ${installed}, toolgate is ${ours}: install the same version of both (npm install toolgate@${ours} ${pkg}@${ours})` };
    }
  } catch { /* no package.json to compare: use the binary */ }
  return { path };
}

// Signals a parent sends to stop or resize the gateway; passed to the child
// (SIGINT from a terminal reaches the whole process group anyway).
const FORWARDED = /** @type {NodeJS.Signals[]} */ (
  process.platform === 'win32' ? ['SIGINT', 'SIGTERM', 'SIGBREAK'] : ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGWINCH', 'SIGUSR2']
);

/**
 * Runs the native binary with `args`, stdio inherited; never returns: this
 * process exits with the child's status, or dies of the child's signal
 * (exit 128+n where a signal cannot be re-raised).
 * @param {string} path
 * @param {string[]} args
 * @returns {Promise<never>}
 */
export function runNative(path, args) {
  return new Promise(() => {
    const child = spawn(path, args, { stdio: 'inherit', windowsHide: false });
    /** @type {Map<NodeJS.Signals, () => void>} */
    const handlers = new Map();
    for (const sig of FORWARDED) {
      const h = () => { try { child.kill(sig); } catch { /* gone */ } };
      handlers.set(sig, h);
      process.on(sig, h);
    }
    child.on('error', (err) => {
      process.stderr.write(`toolgate: cannot run ${path}: ${err.message}\n`);
      process.exit(EX_NO_BINARY);
    });
    child.on('exit', (code, signal) => {
      for (const [sig, h] of handlers) process.off(sig, h);
      if (signal) {
        const n = osConstants.signals[signal] ?? 0;
        // Die of the same signal, so our parent sees what happened to the child.
        if (process.platform !== 'win32' && signal !== 'SIGKILL' && signal !== 'SIGSTOP') {
          try { process.kill(process.pid, signal); } catch { /* fall through */ }
          // The default action of a few signals is not to terminate; give it a moment.
          setTimeout(() => process.exit(128 + n), 100);
          return;
        }
        process.exit(128 + n);
      }
      process.exit(code ?? 1);
    });
  });
}
