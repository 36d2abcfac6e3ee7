// Runs a module worker in workerd (npm `workerd`) with this package's files
// as modules: no bundler, the core wasm imported as a compiled module.
//   node scripts/workerd.mjs examples/worker/worker.mjs [--port 8787] [--catalog FILE] [--policy FILE]
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const q = (/** @type {string} */ s) => JSON.stringify(s);

/** Entry points that are not runtime-neutral (Node's, the MCP middleware's, the worker's own). */
const NOT_IN_WORKER = new Set(['index.js', 'mcp.js', 'worker.js']);

/** Every runtime-neutral module of src/ (core.js and what it imports). */
function runtimeNeutralSources() {
  return readdirSync(join(pkgDir, 'src')).filter((f) => f.endsWith('.js') && !NOT_IN_WORKER.has(f)).sort().map((f) => `src/${f}`);
}

/** The package's modules, named by their path in the package, plus the public entry points. */
function packageModules(/** @type {(f: string) => string} */ embed) {
  const at = (/** @type {string} */ p) => embed(join(pkgDir, p));
  return [
    ...[...runtimeNeutralSources(), 'gen/toolgate_policy.js'].map((p) => `(name = ${q(`toolgate/${p}`)}, esModule = embed ${q(at(p))})`),
    `(name = "toolgate/gen/toolgate_policy.core.wasm", wasm = embed ${q(at('gen/toolgate_policy.core.wasm'))})`,
    `(name = "toolgate/core", esModule = "export * from './src/core.js';")`,
    `(name = "toolgate/core.wasm", esModule = "export { default } from './gen/toolgate_policy.core.wasm';")`,
  ];
}

/**
 * @param {{ entry: string, extraModules?: string[], port: number, bindings?: Record<string, string>, configDir: string }} opts
 *   bindings: name -> text file to bind as a text binding
 */
export function workerdConfig({ entry, extraModules = [], port, bindings = {}, configDir }) {
  // workerd embeds files by paths relative to the config file.
  const embed = (/** @type {string} */ f) => relative(configDir, resolve(f));
  const modules = [
    `(name = ${q(basename(entry))}, esModule = embed ${q(embed(entry))})`,
    ...extraModules.map((m) => `(name = ${q(basename(m))}, esModule = embed ${q(embed(m))})`),
    ...packageModules(embed),
  ];
  const binds = Object.entries(bindings).map(([name, file]) => `(name = ${q(name)}, text = embed ${q(embed(file))})`);
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "main", worker = .worker) ],
  sockets = [ (name = "http", address = ${q(`127.0.0.1:${port}`)}, http = (), service = "main") ],
);
const worker :Workerd.Worker = (
  modules = [
    ${modules.join(',\n    ')}
  ],
  bindings = [ ${binds.join(', ')} ],
  compatibilityDate = "2025-09-01",
);
`;
}

export async function freePort() {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {import('node:net').AddressInfo} */ (srv.address());
      srv.close(() => res(port));
    });
  });
}

/**
 * Starts workerd; resolves once it answers on its port.
 * @param {{ entry: string, extraModules?: string[], bindings?: Record<string, string>, port?: number, probe?: string }} opts
 */
export async function startWorkerd(opts) {
  const port = opts.port ?? await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'toolgate-workerd-'));
  const config = join(dir, 'config.capnp');
  writeFileSync(config, workerdConfig({ ...opts, port, configDir: dir }));
  const workerd = /** @type {any} */ (await import('workerd')).default;
  const bin = workerd.default ?? workerd; // the platform binary's path (npm `workerd`)
  const child = spawn(bin, ['serve', config], { stdio: ['ignore', 'inherit', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; process.stderr.write(d); });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`workerd exited (${child.exitCode}): ${stderr}`);
    try {
      await fetch(url + (opts.probe ?? '/'), { signal: AbortSignal.timeout(1000) });
      break;
    } catch {
      if (Date.now() > deadline) { child.kill(); throw new Error(`workerd did not answer on ${url}: ${stderr}`); }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { url, port, stop: () => new Promise((r) => { if (child.exitCode !== null) return r(undefined); child.once('exit', r); child.kill('SIGTERM'); }) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [entry = join(pkgDir, 'examples/worker/worker.mjs')] = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !(all[i - 1] ?? '').startsWith('--'));
  const arg = (/** @type {string} */ n) => { const i = process.argv.indexOf(n); return i > 0 ? process.argv[i + 1] : undefined; };
  const bindings = /** @type {Record<string, string>} */ ({ CATALOG: arg('--catalog') ?? join(pkgDir, 'examples/seed-server/seed-catalog.json') });
  if (arg('--policy')) bindings.POLICY = /** @type {string} */ (arg('--policy'));
  if (arg('--gate-token')) bindings.GATE_TOKEN = /** @type {string} */ (arg('--gate-token'));
  const w = await startWorkerd({ entry, bindings, port: Number(arg('--port') ?? 8787), probe: '/health' });
  process.stderr.write(`worker on ${w.url} (POST /decide, POST /list, GET /health); Ctrl-C stops\n`);
}
