// A prepared engine (`toolgate prepare`, the Rust CLI): its core module loads
// in Node through `Toolgate.load({ module })`, the prepared texts decide
// byte for byte as the package's own module does, and other texts load as
// ever. Needs target/release/toolgate (TOOLGATE_REQUIRE_RUST_CLI=1: a
// missing one fails instead of skipping).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Toolgate, LoadError } from '../src/index.js';
import { pkgDir, vectorsDir } from './lib/vectors.mjs';

const rustCli = process.env.TOOLGATE_RUST_CLI ? resolve(process.env.TOOLGATE_RUST_CLI) : resolve(pkgDir, '..', 'target', 'release', 'toolgate');
const requireRust = process.env.TOOLGATE_REQUIRE_RUST_CLI === '1';
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

function prepare() {
  const out = mkdtempSync(join(tmpdir(), 'toolgate-prepared-'));
  const r = spawnSync(rustCli, ['prepare', '--policy', policyPath, '--catalog', catalogPath, '--out', out]);
  assert.equal(r.status, 0, r.stderr.toString());
  assert.deepEqual(r.stdout.toString().trim().split('\n'), [join(out, 'toolgate_policy.wasm'), join(out, 'toolgate_policy.core.wasm')]);
  return readFileSync(join(out, 'toolgate_policy.core.wasm'));
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
