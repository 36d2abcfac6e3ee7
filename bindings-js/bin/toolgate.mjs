#!/usr/bin/env node
// `toolgate` from npm. `eval` and `list` are answered here, in JS, with the
// Rust CLI's flags and byte-identical output:
//   toolgate eval [--policy FILE] --catalog FILE [--surface confirming|direct] [--scopes a,b] [--allow t1,t2] [--prepared DIR]
//                 [--call JSON] [--fail-on-deny]
//   toolgate list (the same flags but --call and --fail-on-deny)
// (--prepared DIR: the core module `toolgate prepare` wrote there.)
// Every other command (proxy, init, pin, check, test, demo, precompile, prepare, help,
// --version, …) is the native Rust binary's: from the platform package
// `@toolgate/<os>-<arch>` npm installed with this one, or `$TOOLGATE_BINARY`
// (bin/native.mjs). Without one, `help` and `--version` are answered here and
// a native command is refused naming the missing package (exit 2).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EX_NO_BINARY, NATIVE_COMMANDS, findNativeBinary, runNative } from './native.mjs';

const JS_COMMANDS = new Set(['eval', 'list']);
const argv = process.argv.slice(2);
if (!JS_COMMANDS.has(/** @type {string} */ (argv[0]))) {
  const native = findNativeBinary();
  if (native.path !== undefined) await runNative(native.path, argv);
  const command = argv[0];
  if (command === '--version' || command === '-V') {
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    process.stdout.write(`toolgate ${version}\n`);
    process.exit(0);
  }
  if (command !== undefined && (NATIVE_COMMANDS.has(command) || (command === 'help' && argv.length > 1 && NATIVE_COMMANDS.has(argv[1])))) {
    process.stderr.write(`toolgate: \`${command}\` needs the native toolgate: ${native.error}\n`);
    process.exit(EX_NO_BINARY);
  }
  // help, --help, nothing or an unknown command: the JS CLI's usage below.
}

const { Toolgate, LoadError } = await import('../src/index.js');

const USAGE = `usage: toolgate eval [--policy FILE] --catalog FILE [--surface confirming|direct] [--scopes a,b] [--allow t1,t2] [--prepared DIR]
                     [--call JSON] [--fail-on-deny]
       toolgate list [--policy FILE] --catalog FILE [--surface confirming|direct] [--scopes a,b] [--allow t1,t2] [--prepared DIR]

eval reads one call per line on stdin ({"name":...,"arguments":{...}}), or the one --call, and prints one
decision per line; --fail-on-deny exits 1 when any decision denies (every decision is still printed).
list prints the tools/list result the context may see.
--prepared DIR uses the engine \`toolgate prepare\` wrote to DIR (its toolgate_policy.core.wasm):
the same decisions, ready at once for the texts it was prepared with.

proxy, init, pin, check, test, demo, precompile, prepare: the native toolgate (the package
@toolgate/<os>-<arch>, installed with this one, or $TOOLGATE_BINARY).
`;

const EX_DENIED = 1;
const EX_USAGE = 64;
const EX_LOAD = 2;

function usageError(/** @type {string} */ message) {
  process.stderr.write(`toolgate: ${message}\n${USAGE}`);
  process.exit(EX_USAGE);
}

// Rust's `char::is_whitespace` (Unicode White_Space), as the Rust CLI trims.
const RUST_WS = '[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const TRIM = new RegExp(`^${RUST_WS}+|${RUST_WS}+$`, 'g');

/** A comma-separated list: items trimmed, empty items skipped (`--scopes ""` is []). */
function list(/** @type {string} */ value) {
  return value.split(',').map((item) => item.replace(TRIM, '')).filter((item) => item !== '');
}

/** @param {string[]} argv */
function parseArgs(argv) {
  // Node has already decoded the command line, writing U+FFFD for bytes that
  // are not UTF-8: such an argument's bytes are lost (a `--call` would be
  // decided as the U+FFFD tool, a scope granted as U+FFFD). Refused as the
  // Rust CLI refuses argv that is not UTF-8; a call holding U+FFFD goes on stdin.
  if (argv.some((arg) => arg.includes('\uFFFD'))) {
    usageError('an argument holds U+FFFD, the mark of bytes that are not UTF-8 in the command line; pass such a call on stdin');
  }
  const [command, ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  if (command !== 'eval' && command !== 'list') usageError(command === undefined ? 'missing command' : `unknown command ${JSON.stringify(command)}`);
  /** @type {Record<string, string>} */
  const flags = {};
  const known = new Set(['--policy', '--catalog', '--surface', '--scopes', '--allow', '--prepared', ...(command === 'eval' ? ['--call'] : [])]);
  // A switch takes no value (as clap's `SetTrue`): `--fail-on-deny=x` is a usage error.
  const switches = new Set(command === 'eval' ? ['--fail-on-deny'] : []);
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === '--help' || arg === '-h') {
      process.stdout.write(USAGE);
      process.exit(0);
    }
    let name = arg;
    let value;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      name = arg.slice(0, eq);
      value = arg.slice(eq + 1);
    }
    if (switches.has(arg)) {
      if (arg in flags) usageError(`${arg} given more than once`);
      flags[arg] = 'true';
      continue;
    }
    if (!known.has(name)) usageError(`unexpected argument ${JSON.stringify(arg)}`);
    if (value === undefined) {
      if (i + 1 >= rest.length) usageError(`${name} needs a value`);
      value = rest[++i];
      // As clap: a separate value may not look like a flag ("-" alone may);
      // `--flag=-x` says it is one.
      if (value.startsWith('-') && value !== '-') usageError(`${name} needs a value (${JSON.stringify(value)} reads as a flag; write ${name}=${value})`);
    }
    if (name in flags) usageError(`${name} given more than once`);
    flags[name] = value;
  }
  if (flags['--catalog'] === undefined) usageError('--catalog FILE is required');
  const surface = flags['--surface'] ?? 'confirming';
  if (surface !== 'confirming' && surface !== 'direct') usageError(`--surface must be confirming or direct, not ${JSON.stringify(surface)}`);
  /** @type {{surface: string, scopes?: string[], allowed_tools?: string[]}} */
  const context = { surface };
  if (flags['--scopes'] !== undefined) context.scopes = list(flags['--scopes']);
  if (flags['--allow'] !== undefined) context.allowed_tools = list(flags['--allow']);
  return {
    command, policyPath: flags['--policy'], catalogPath: flags['--catalog'], preparedDir: flags['--prepared'], context: JSON.stringify(context),
    call: flags['--call'], failOnDeny: flags['--fail-on-deny'] !== undefined,
  };
}

/** How Rust prints the common I/O errors. */
const OS_ERRORS = /** @type {Record<string, string>} */ ({
  ENOENT: 'No such file or directory (os error 2)',
  EACCES: 'Permission denied (os error 13)',
  EISDIR: 'Is a directory (os error 21)',
});

/**
 * How many bytes of `bytes` are well-formed UTF-8 before the first that is
 * not (RFC 3629: no overlong form, surrogate or code point past U+10FFFF),
 * which TextDecoder does not tell.
 * @param {Uint8Array} bytes
 */
function validUtf8Prefix(bytes) {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i];
    const [size, low, high] =
      b < 0x80 ? [1, 0, 0] : b < 0xc2 ? [0, 0, 0] : b < 0xe0 ? [2, 0x80, 0xbf]
        : b === 0xe0 ? [3, 0xa0, 0xbf] : b === 0xed ? [3, 0x80, 0x9f] : b < 0xf0 ? [3, 0x80, 0xbf]
          : b === 0xf0 ? [4, 0x90, 0xbf] : b < 0xf4 ? [4, 0x80, 0xbf] : b === 0xf4 ? [4, 0x80, 0x8f] : [0, 0, 0];
    if (size === 0 || i + size > bytes.length) return i;
    if (size > 1 && (bytes[i + 1] < low || bytes[i + 1] > high)) return i;
    for (let k = 2; k < size; k++) if (bytes[i + k] < 0x80 || bytes[i + k] > 0xbf) return i;
    i += size;
  }
  return i;
}

/**
 * A file's text; failures as the Rust CLI reports them (exit 2: an input
 * could not be read). Bytes that are not UTF-8 are refused where they start,
 * as a load error of `origin` (docs/spec.md §7: a code and a position), as
 * the Rust and Python CLIs say it.
 * @param {string} path @param {'POLICY' | 'CATALOG'} origin
 */
function readText(path, origin) {
  let bytes;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    const err = /** @type {any} */ (e);
    process.stderr.write(`toolgate: cannot read ${path}: ${OS_ERRORS[err.code] ?? err.message}\n`);
    process.exit(EX_LOAD);
  }
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    const before = bytes.subarray(0, validUtf8Prefix(bytes));
    const lineStart = before.lastIndexOf(0x0a) + 1;
    const line = 1 + before.filter((b) => b === 0x0a).length;
    // ignoreBOM: a leading BOM is a character here, as the other CLIs count it.
    const column = 1 + [...new TextDecoder('utf-8', { ignoreBOM: true }).decode(before.subarray(lineStart))].length;
    process.stderr.write(`toolgate: ${path}:${line}:${column}: not valid UTF-8 (${origin}_SYNTAX)\n`);
    process.exit(EX_LOAD);
  }
}

/**
 * The prepared core module in `dir` (a directory \`toolgate prepare\` wrote);
 * one that cannot be read is an error (exit 2), never the shipped engine.
 * @param {string} dir
 */
function readPrepared(dir) {
  const path = join(dir, 'toolgate_policy.core.wasm');
  let bytes;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    const err = /** @type {any} */ (e);
    process.stderr.write(`toolgate: the policy component is unusable: cannot read ${path}: ${OS_ERRORS[err.code] ?? err.message}\n`);
    process.exit(EX_LOAD);
  }
  return { module: bytes, prepared: true };
}

/** Every byte of a line is ASCII whitespace (as Rust's `u8::is_ascii_whitespace`). */
function isBlank(/** @type {Uint8Array} */ line) {
  for (const b of line) {
    if (b !== 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0c && b !== 0x0d) return false;
  }
  return true;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const policy = args.policyPath === undefined ? undefined : readText(args.policyPath, 'POLICY');
  const catalog = readText(args.catalogPath, 'CATALOG');
  const prepared = args.preparedDir === undefined ? {} : readPrepared(args.preparedDir);
  let gate;
  try {
    gate = await Toolgate.load({ policy, catalog, ...prepared });
  } catch (e) {
    if (e instanceof LoadError) {
      const file = e.origin === 'policy' && args.policyPath !== undefined ? args.policyPath : args.catalogPath;
      const at = e.line > 0 ? `:${e.line}:${e.column}` : '';
      const path = e.path ? `${e.path}: ` : '';
      process.stderr.write(`toolgate: ${file}${at}: ${path}${e.problemMessage} (${e.code})\n`);
      process.exit(EX_LOAD);
    }
    const code = /** @type {any} */ (e)?.code;
    process.stderr.write(`toolgate: ${/** @type {Error} */ (e).message}${typeof code === 'string' ? ` (${code})` : ''}\n`);
    process.exit(EX_LOAD);
  }

  if (args.command === 'list') {
    let out;
    try {
      out = gate.listExposable(args.context).json;
    } catch (e) {
      process.stderr.write(`toolgate: ${/** @type {Error} */ (e).message} (${/** @type {any} */ (e).code})\n`);
      process.exit(EX_LOAD);
    }
    process.stdout.write(out + '\n');
    return;
  }

  const context = args.context;
  let denied = false;
  const decide = (/** @type {Uint8Array} */ call) => {
    const decision = gate.evaluate(call, context);
    if (!decision.ok) denied = true;
    return decision.json + '\n';
  };
  const exitCode = () => (denied && args.failOnDeny ? EX_DENIED : 0);
  if (args.call !== undefined) {
    // The one call, its bytes as given (no trimming, a blank one included).
    process.stdout.write(decide(new TextEncoder().encode(args.call)));
    process.exitCode = exitCode();
    return;
  }
  /** @type {Buffer[]} */
  let pending = [];
  const emit = (/** @type {Uint8Array} */ raw) => {
    let line = raw;
    if (line.length > 0 && line[line.length - 1] === 0x0d) line = line.subarray(0, line.length - 1);
    if (isBlank(line)) return '';
    return decide(line);
  };
  for await (const chunk of process.stdin) {
    let start = 0;
    let out = '';
    for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, i);
      const line = pending.length ? Buffer.concat([...pending, piece]) : piece;
      pending = [];
      out += emit(line);
      start = i + 1;
    }
    if (start < chunk.length) pending.push(chunk.subarray(start));
    if (out && !process.stdout.write(out)) await new Promise((r) => process.stdout.once('drain', r));
  }
  if (pending.length) {
    const out = emit(Buffer.concat(pending));
    if (out) process.stdout.write(out);
  }
  process.exitCode = exitCode();
}

process.stdout.on('error', (e) => {
  if (/** @type {any} */ (e).code === 'EPIPE') process.exit(0);
  throw e;
});
await main();
