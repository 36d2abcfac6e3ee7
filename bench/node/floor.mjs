#!/usr/bin/env node
// The floor for the Node benchmark: target/bench/floor.wasm (the same WIT
// world as toolgate's component, no engine) made into a copy of the installed
// `toolgate` npm package whose gen/ is the floor's, so the floor runs through
// exactly the code a user of the package runs: bindings-js's own build script
// (jco transpile with bindings-js's jco, the same patches and shim checks),
// the package's src/ unchanged (instantiation, the canonical-ABI fast path of
// `evaluate`, the Decision object).
//
//   node bench/node/floor.mjs      prepare target/bench/node-floor (idempotent)
//
// Layout of target/bench/node-floor: src/ and package.json copied from
// bench/node/node_modules/toolgate, scripts/build.mjs copied from bindings-js,
// node_modules -> ../../../bindings-js/node_modules (for jco), gen/ built.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const repoDir = resolve(here, '..', '..');
export const floorDir = join(repoDir, 'target', 'bench', 'node-floor');
export const floorComponent = join(repoDir, 'target', 'bench', 'floor.wasm');
const installed = join(here, 'node_modules', 'toolgate');
const bindingsJs = join(repoDir, 'bindings-js');

/**
 * Prepares target/bench/node-floor; returns the path of its src/index.js.
 * Quiet unless it has to transpile.
 * @param {{ log?: (msg: string) => void }} [options]
 */
export function prepareFloor(options = {}) {
  const log = options.log ?? ((/** @type {string} */ m) => process.stderr.write(`floor: ${m}\n`));
  if (!existsSync(floorComponent)) {
    throw new Error(`${floorComponent} is missing: build it with\n  cargo run --release -q --bin component-build -- --package toolgate-floor target/bench/floor.wasm`);
  }
  if (!existsSync(join(installed, 'package.json'))) throw new Error(`${installed} is missing: run bench/node/setup.sh`);
  const jco = join(bindingsJs, 'node_modules', '@bytecodealliance', 'jco', 'package.json');
  if (!existsSync(jco)) throw new Error(`bindings-js has no node_modules (jco): run bench/node/setup.sh`);
  mkdirSync(join(floorDir, 'scripts'), { recursive: true });
  // The installed package's JS, every time (cheap), so the floor never runs stale code.
  rmSync(join(floorDir, 'src'), { recursive: true, force: true });
  cpSync(join(installed, 'src'), join(floorDir, 'src'), { recursive: true });
  cpSync(join(installed, 'package.json'), join(floorDir, 'package.json'));
  cpSync(join(bindingsJs, 'scripts', 'build.mjs'), join(floorDir, 'scripts', 'build.mjs'));
  const link = join(floorDir, 'node_modules');
  let linked = false;
  try { linked = lstatSync(link).isSymbolicLink(); } catch { /* absent */ }
  if (!linked) {
    rmSync(link, { recursive: true, force: true });
    symlinkSync(relative(floorDir, join(bindingsJs, 'node_modules')), link);
  }
  // bindings-js's build script: skips when gen/BUILD.json matches the
  // component, jco and the script; else transpiles and patches.
  const out = execFileSync(process.execPath, [join(floorDir, 'scripts', 'build.mjs')], {
    env: { ...process.env, TOOLGATE_COMPONENT: floorComponent },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (out.trim()) log(out.trim());
  const stamp = JSON.parse(readFileSync(join(floorDir, 'gen', 'BUILD.json'), 'utf8'));
  if (typeof stamp.component_sha256 !== 'string') throw new Error('node-floor/gen/BUILD.json is not what build.mjs writes');
  return join(floorDir, 'src', 'index.js');
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  prepareFloor();
}
