// Cold start in workerd (#17): a fresh `workerd serve` process running the
// package's example worker (bindings-js/examples/worker/worker.mjs: the core
// module imported precompiled, the rules loaded once per isolate), from spawn
// to the answer of its first request, a decision on the mix's first call with
// the seed rules; against the same for a worker that answers at once.
//
//   node bench/node/workerd-cold.mjs --data target/bench-data [--smoke]
//
// Prints `cold workerd MS` and `cold workerd-bare MS` (median of 5 fresh
// processes, 1 with --smoke). Their difference is what toolgate adds to a
// cold isolate: evaluating its modules, compiling the core module, loading
// the rules and the first decision. Cloudflare documents a 1 s limit on a
// Worker's start-up (parsing and running its global scope); this worker does
// its loading in the first request, so the whole difference counts here.
// Figures are printed, never asserted; a wrong answer exits 1.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

// bindings-js's workerd config writer (its modules, as its own tests run them);
// imported by URL so this project's type check does not pull in its untyped
// `workerd` import.
const helpers = new URL('../../bindings-js/scripts/workerd.mjs', import.meta.url).href;
const { freePort, pkgDir, workerdConfig } = /** @type {{ freePort: () => Promise<number>, pkgDir: string,
  workerdConfig: (o: { entry: string, bindings: Record<string, string>, port: number, configDir: string }) => string }} */ (
  await import(helpers));

const args = process.argv.slice(2);
const dataAt = args.indexOf('--data');
if (dataAt < 0 || !args[dataAt + 1]) {
  process.stderr.write('usage: node bench/node/workerd-cold.mjs --data DIR [--smoke]\n');
  process.exit(2);
}
const data = /** @type {string} */ (args[dataAt + 1]);
const rounds = args.includes('--smoke') ? 1 : 5;
const first = JSON.parse(readFileSync(join(data, 'mix.json'), 'utf8')).calls[0];
const body = JSON.stringify({ call: first.call, context: JSON.parse(first.context_json) });
// npm `workerd` is bindings-js's dev dependency (bench/node/setup.sh installs it there).
const workerdEntry = createRequire(join(pkgDir, 'package.json')).resolve('workerd');
const workerd = /** @type {any} */ (await import(pathToFileURL(workerdEntry).href)).default;
const bin = workerd.default ?? workerd;
const work = mkdtempSync(join(tmpdir(), 'toolgate-workerd-cold-'));
const bare = join(work, 'bare.mjs');
writeFileSync(bare, "export default { fetch() { return new Response('{\"ok\":true}'); } };\n");

/**
 * Milliseconds from spawning workerd to its first answer on /decide.
 * @param {string} entry @param {Record<string, string>} bindings
 */
async function coldStart(entry, bindings) {
  const port = await freePort();
  const dir = mkdtempSync(join(work, 'run-'));
  const config = join(dir, 'config.capnp');
  writeFileSync(config, workerdConfig({ entry, bindings, port, configDir: dir }));
  const started = performance.now();
  const child = spawn(bin, ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`workerd exited (${child.exitCode}): ${stderr}`);
      if (performance.now() - started > 30_000) throw new Error(`workerd did not answer: ${stderr}`);
      let answer;
      try {
        answer = await fetch(`http://127.0.0.1:${port}/decide`, { method: 'POST', body, headers: { authorization: `Bearer ${GATE_TOKEN}` } });
      } catch {
        await new Promise((r) => setTimeout(r, 2)); // not listening yet
        continue;
      }
      const took = performance.now() - started;
      const text = await answer.text();
      const decision = entry === bare ? JSON.parse(text) : JSON.parse(text).decision;
      if (typeof decision?.ok !== 'boolean' || (entry !== bare && decision.ok !== first.expect_allowed)) {
        throw new Error(`not the expected decision: ${text}`);
      }
      return took;
    }
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
  }
}

/** @param {number[]} xs */
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

const GATE_TOKEN = 'bench-host';
const tokenFile = join(work, 'gate-token');
writeFileSync(tokenFile, GATE_TOKEN);
const gate = { CATALOG: join(data, '34', 'catalog.json'), POLICY: join(data, 'policy.yaml'), GATE_TOKEN: tokenFile };
const cold = [];
const bareCold = [];
try {
  for (let i = 0; i < rounds; i++) {
    cold.push(await coldStart(join(pkgDir, 'examples/worker/worker.mjs'), gate));
    bareCold.push(await coldStart(bare, {}));
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
console.log(`cold workerd ${median(cold).toFixed(1)}`);
console.log(`cold workerd-bare ${median(bareCold).toFixed(1)}`);
