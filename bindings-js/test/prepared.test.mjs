// A prepared engine (`toolgate prepare`, the Rust CLI): its core module loads
// in Node through `Toolgate.load({ module })` and `toolgate eval|list
// --prepared DIR`, the prepared texts decide byte for byte as the package's
// own module (and the Rust CLI) does, other texts load as ever, and a module
// prepared from another build's component is refused. Needs target/release/toolgate (TOOLGATE_REQUIRE_RUST_CLI=1: a
// missing one fails instead of skipping).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Toolgate, LoadError, ComponentError } from '../src/index.js';
import { PREPARED_FROM } from '../src/runtime.js';
import { COMPONENT_SHA256 } from '../src/origin.js';
import { pkgDir, vectorsDir } from './lib/vectors.mjs';

const rustCli = process.env.TOOLGATE_RUST_CLI ? resolve(process.env.TOOLGATE_RUST_CLI) : resolve(pkgDir, '..', 'target', 'release', 'toolgate');
const requireRust = process.env.TOOLGATE_REQUIRE_RUST_CLI === '1';
const bin = join(pkgDir, 'bin', 'toolgate.mjs');
const skip = !existsSync(rustCli) && !requireRust ? `${rustCli} is not built` : false;

const fixtures = join(vectorsDir, 'fixtures');
const policyPath = join(fixtures, 'plans-policy.yaml');
const catalogPath = join(fixtures, 'plans-catalog.json');
const policy = readFileSync(policyPath, 'utf8');
const catalog = readFileSync(catalogPath, 'utf8');
const seedCatalog = readFileSync(join(fixtures, 'seed-catalog.json'), 'utf8');

const calls = [
  { name: 'alterar_plano', arguments: {} },
  { name: 'alterar_plano', arguments: { customer_id: 'c-1', new_plan_id: 'p-2' } },
  { name: 'alterar_plano', arguments: { customer_id: 'c-1', new_plan_id: 'p-2', confirmed: true } },
  { name: 'consultar_plano', arguments: { customer_id: 'c-1' } },
  { name: 'no_such_tool', arguments: {} },
];

/** Every answer a host reads, as bytes. @param {Toolgate} rules */
function answers(rules) {
  const out = [rules.revision, JSON.stringify(rules.findings)];
  for (const context of [{}, { surface: 'direct' }, { scopes: [] }]) {
    out.push(rules.listExposable(context).json);
    for (const call of calls) out.push(rules.evaluate(call, context).json);
  }
  return out;
}

/** Runs `toolgate prepare` into a new directory; returns it. */
function prepareDir() {
  const out = mkdtempSync(join(tmpdir(), 'toolgate-prepared-'));
  const r = spawnSync(rustCli, ['prepare', '--policy', policyPath, '--catalog', catalogPath, '--out', out]);
  assert.equal(r.status, 0, r.stderr.toString());
  assert.deepEqual(r.stdout.toString().trim().split('\n'), [join(out, 'toolgate_policy.wasm'), join(out, 'toolgate_policy.core.wasm')]);
  return out;
}

function prepare() {
  return readFileSync(join(prepareDir(), 'toolgate_policy.core.wasm'));
}

/** A wasm custom section (id 0): LEB128 size, LEB128 name length, name, payload. */
function customSection(/** @type {string} */ name, /** @type {Uint8Array} */ payload) {
  const leb = (/** @type {number} */ n) => { const out = []; do { let b = n & 0x7f; n >>>= 7; if (n) b |= 0x80; out.push(b); } while (n); return out; };
  const nameBytes = new TextEncoder().encode(name);
  const body = [...leb(nameBytes.length), ...nameBytes, ...payload];
  return Uint8Array.from([0, ...leb(body.length), ...body]);
}

test('a prepared core module decides as the package does, for its texts and any other', { skip }, async () => {
  const module = await WebAssembly.compile(prepare());
  const prepared = await Toolgate.load({ module, policy, catalog });
  const shipped = await Toolgate.load({ policy, catalog });
  assert.deepEqual(answers(prepared), answers(shipped));
  // Other texts in the same prepared module: loaded as ever, same bytes.
  const other = await Toolgate.load({ module, catalog: seedCatalog });
  const otherShipped = await Toolgate.load({ catalog: seedCatalog });
  assert.equal(other.revision, otherShipped.revision);
  assert.equal(other.listExposable({}).json, otherShipped.listExposable({}).json);
  // A policy the engine refuses is refused the same way.
  const bad = 'version: 1\nunknown_key: 1\n';
  const refusal = async (/** @type {any} */ options) => {
    try { await Toolgate.load(options); } catch (e) { assert.ok(e instanceof LoadError); return JSON.stringify(e.problem); }
    assert.fail('loaded');
  };
  assert.equal(await refusal({ module, policy: bad, catalog }), await refusal({ policy: bad, catalog }));
});

test('the prepared module names the component this package was built from', { skip }, () => {
  const sections = WebAssembly.Module.customSections(new WebAssembly.Module(prepare()), PREPARED_FROM);
  assert.equal(sections.length, 1);
  assert.equal(Buffer.from(sections[0]).toString('hex'), COMPONENT_SHA256);
  // The package's own module is not a prepared one.
  assert.equal(WebAssembly.Module.customSections(new WebAssembly.Module(readFileSync(join(pkgDir, 'gen', 'toolgate_policy.core.wasm'))), PREPARED_FROM).length, 0);
});

test('a module prepared from another build is refused, by the library and the CLI', { skip }, async () => {
  const dir = prepareDir();
  const core = readFileSync(join(dir, 'toolgate_policy.core.wasm'));
  // A second origin section naming another component: one wrong origin is enough to refuse.
  const other = Buffer.concat([core, customSection(PREPARED_FROM, new Uint8Array(32).fill(7))]);
  await assert.rejects(Toolgate.load({ module: other, policy, catalog }), (e) => e instanceof ComponentError && e.code === 'COMPONENT_INVALID' && /another build/.test(e.message));
  assert.throws(() => Toolgate.fromModule({ module: new WebAssembly.Module(other), policy, catalog }), ComponentError);
  writeFileSync(join(dir, 'toolgate_policy.core.wasm'), other);
  const r = spawnSync(process.execPath, [bin, 'list', '--policy', policyPath, '--catalog', catalogPath, '--prepared', dir]);
  assert.equal(r.status, 2);
  assert.equal(r.stdout.length, 0);
  assert.match(r.stderr.toString(), /prepared from another build's component/);
  // A directory without a prepared engine is an error, never the shipped engine.
  const none = spawnSync(process.execPath, [bin, 'list', '--catalog', catalogPath, '--prepared', join(dir, 'nothing')]);
  assert.equal(none.status, 2);
  assert.equal(none.stdout.length, 0);
  assert.match(none.stderr.toString(), /cannot read .*toolgate_policy\.core\.wasm/);
});

test('a prepared directory, or prepared: true, holds only what toolgate prepare made, as the Rust CLI requires', { skip }, async () => {
  // The package's own core module (a stale deploy's plain module), or bytes that are no module.
  const plain = readFileSync(join(pkgDir, 'gen', 'toolgate_policy.core.wasm'));
  for (const [name, bytes] of /** @type {const} */ ([['plain', plain], ['junk', Buffer.from('not wasm')]])) {
    const dir = mkdtempSync(join(tmpdir(), `toolgate-not-prepared-${name}-`));
    writeFileSync(join(dir, 'toolgate_policy.core.wasm'), bytes);
    writeFileSync(join(dir, 'toolgate_policy.wasm'), bytes);
    const r = spawnSync(process.execPath, [bin, 'list', '--catalog', catalogPath, '--prepared', dir]);
    const native = spawnSync(rustCli, ['list', '--catalog', catalogPath, '--prepared', dir]);
    assert.deepEqual([r.status, native.status], [2, 2], `${name}: ${r.stderr} / ${native.stderr}`);
    assert.equal(r.stdout.length, 0);
    assert.match(r.stderr.toString(), /\(COMPONENT_INVALID\)$/m, name);
    await assert.rejects(Toolgate.load({ module: bytes, catalog, prepared: true }), (e) => e instanceof ComponentError, name);
  }
  // Outside a prepared directory the plain module loads as ever.
  assert.ok((await Toolgate.load({ module: plain, catalog })).listExposable().tools.length > 0);
});

test('eval and list --prepared answer as the Rust CLI --prepared does', { skip }, () => {
  const dir = prepareDir();
  const calls = ['{"name":"alterar_plano","arguments":{}}', '{"name":"consultar_plano","arguments":{"customer_id":"c-1"}}', 'not json', ''].join('\n');
  for (const args of [
    ['eval', '--policy', policyPath, '--catalog', catalogPath],
    ['eval', '--catalog', join(fixtures, 'seed-catalog.json')],
    ['list', '--policy', policyPath, '--catalog', catalogPath, '--surface', 'direct'],
  ]) {
    const withDir = [...args, '--prepared', dir];
    const js = spawnSync(process.execPath, [bin, ...withDir], { input: calls });
    const native = spawnSync(rustCli, withDir, { input: calls });
    const shipped = spawnSync(process.execPath, [bin, ...args], { input: calls });
    assert.equal(js.status, 0, js.stderr.toString());
    assert.equal(native.status, 0, native.stderr.toString());
    assert.ok(js.stdout.length > 0);
    assert.equal(js.stdout.toString(), native.stdout.toString(), args.join(' '));
    assert.equal(js.stdout.toString(), shipped.stdout.toString(), args.join(' '));
  }
});
