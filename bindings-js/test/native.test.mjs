// bin/toolgate.mjs hands every command but eval/list to the native binary
// (TOOLGATE_BINARY here; the platform package when installed, see
// scripts/test-packed.sh): argv as given, stdio inherited, exit status and
// death by signal propagated, SIGTERM forwarded; without one, a clear error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pkgDir } from './lib/vectors.mjs';

const bin = join(pkgDir, 'bin', 'toolgate.mjs');
const dir = mkdtempSync(join(tmpdir(), 'toolgate-native-'));
const fake = join(dir, 'toolgate');
// A stand-in for the native binary: prints its argv and stdin, exits or dies as told.
writeFileSync(fake, `#!/bin/sh
printf '%s\\n' "$@" > "${dir}/argv"
case "$1" in
  exit) exit "$2" ;;
  die) kill -"$2" $$ ;;
  wait) trap 'echo got-term > "${dir}/term"; exit 7' TERM; echo ready > "${dir}/ready"; while :; do sleep 0.05; done ;;
  cat) cat ;;
esac
`);
chmodSync(fake, 0o755);
const env = { ...process.env, TOOLGATE_BINARY: fake };
const run = (/** @type {string[]} */ args, /** @type {Record<string, string | undefined>} */ e = env, input = '') =>
  spawnSync(process.execPath, [bin, ...args], { env: e, input, cwd: pkgDir });

test('native commands get argv as given, stdin/stdout inherited, the exit status', { skip: process.platform === 'win32' }, () => {
  const r = run(['proxy', '--policy', 'p.yaml', '--', 'npx', '-y', 'server', 'a b']);
  assert.equal(r.status, 0, r.stderr.toString());
  assert.equal(readFileSync(join(dir, 'argv'), 'utf8'), 'proxy\n--policy\np.yaml\n--\nnpx\n-y\nserver\na b\n');
  assert.equal(run(['cat'], env, 'bytes\u00e9\n').stdout.toString(), 'bytes\u00e9\n');
  for (const code of [1, 2, 64, 101]) assert.equal(run(['exit', String(code)]).status, code);
  for (const args of [['--version'], ['help'], ['init', '--out', 'x'], ['check'], ['pin'], ['test'], ['frob'], []]) {
    assert.equal(run(args).status, 0, args.join(' '));
    assert.equal(readFileSync(join(dir, 'argv'), 'utf8'), args.length ? args.map((a) => `${a}\n`).join('') : '\n'); // printf of no argument: one newline
  }
});

test('eval and list stay in JS even with a native binary', { skip: process.platform === 'win32' }, () => {
  writeFileSync(join(dir, 'argv'), '');
  const r = run(['list', '--catalog', join(pkgDir, 'examples/seed-server/seed-catalog.json'), '--surface', 'direct']);
  assert.equal(r.status, 0, r.stderr.toString());
  assert.ok(JSON.parse(r.stdout.toString()).tools.length > 0);
  assert.equal(readFileSync(join(dir, 'argv'), 'utf8'), '', 'the native binary did not run');
});

test('a child killed by a signal: the bin dies of the same signal', { skip: process.platform === 'win32' }, () => {
  const r = run(['die', 'TERM']);
  assert.equal(r.signal, 'SIGTERM');
  const k = run(['die', 'KILL']);
  assert.ok(k.signal === 'SIGKILL' || k.status === 128 + 9, `${k.signal} ${k.status}`);
});

test('SIGTERM to the bin is forwarded to the child, its status propagated', { skip: process.platform === 'win32' }, async () => {
  const child = spawn(process.execPath, [bin, 'wait'], { env, stdio: 'ignore' });
  const deadline = Date.now() + 10_000;
  while (!existsSync(join(dir, 'ready')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  child.kill('SIGTERM');
  const [code] = await new Promise((r) => child.on('exit', (...a) => r(a)));
  assert.equal(code, 7);
  assert.equal(readFileSync(join(dir, 'term'), 'utf8'), 'got-term\n');
});

test('without a native binary: native commands name the missing package, exit 2; help and --version still answer', () => {
  const bare = { ...process.env, TOOLGATE_BINARY: undefined, NODE_PATH: undefined };
  delete bare.TOOLGATE_BINARY;
  const installed = (() => { try { return existsSync(resolve(pkgDir, 'node_modules/@toolgate')); } catch { return false; } })();
  if (installed) return; // a published platform package is installed here: covered by test-packed.sh
  for (const cmd of ['proxy', 'init', 'check', 'pin', 'test']) {
    const r = run([cmd, '--policy', 'x'], bare);
    assert.equal(r.status, 2, cmd);
    const said = r.stderr.toString();
    assert.match(said, new RegExp(`@toolgate/${process.platform}-${process.arch}|no native toolgate is published for`), said);
    assert.match(said, new RegExp(`${process.platform}-${process.arch}`), said);
  }
  const v = run(['--version'], bare);
  assert.equal(v.status, 0);
  assert.equal(v.stdout.toString(), `toolgate ${JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')).version}\n`);
  assert.equal(run(['--help'], bare).status, 0);
  assert.equal(run(['frob'], bare).status, 64);
  const bad = run(['proxy'], { ...bare, TOOLGATE_BINARY: join(dir, 'missing') });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr.toString(), /TOOLGATE_BINARY=.*missing is not an executable file/);
});
