// Every tests/vectors/*.json (but host-faults.json) through Node, byte for byte.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Toolgate } from '../src/index.js';
import { runFile } from './lib/vector-exec.mjs';
import { checkResult, loadVectorFile, validateVectorFile, vectorFiles, vectorsDir } from './lib/vectors.mjs';

const files = vectorFiles();
test(`vector files found in ${vectorsDir}`, (t) => {
  t.diagnostic(`${files.length} vector file(s)`);
  assert.ok(Array.isArray(files));
});

for (const path of files) {
  test(`vectors (node): ${path.split('/').pop()}`, async () => {
    const file = loadVectorFile(path);
    const result = await runFile((rules) => Toolgate.load(rules), file);
    checkResult(file, result, 'node');
  });
}

test('runner rejects unknown fields and malformed files', () => {
  const ok = { spec: '§4', description: 'd', policy: null, catalog: 'c.json', cases: [{ name: 'a', op: 'evaluate', call: { name: 'x' }, expect: '{}' }] };
  validateVectorFile(structuredClone(ok), 'ok');
  const bad = [
    { ...ok, extra: 1 },
    { ...ok, cases: [{ ...ok.cases[0], surprise: true }] },
    { ...ok, cases: [{ ...ok.cases[0], call_text: '{}' }] },
    { ...ok, cases: [{ name: 'a', op: 'frobnicate', expect: '' }] },
    { ...ok, catalog_text: '{}' },
    { ...ok, policy_text: 'version: 1' },
    { spec: '§1', catalog: 'c.json' },
    { ...ok, cases: undefined, expect_load_error: { code: 'X', hint: 1 } },
    { ...ok, cases: [{ name: 'a', op: 'strip_fields', tool: 't', expect: 'confirmed' }] },
    { ...ok, cases: [ok.cases[0], ok.cases[0]] },
  ];
  for (const [i, v] of bad.entries()) {
    assert.throws(() => validateVectorFile(JSON.parse(JSON.stringify(v)), `bad${i}`), /bad\d+: /, `bad${i} must be rejected`);
  }
  validateVectorFile({ policy: 'p.yaml', catalog: 'c.json', expect_load_error: { code: 'POLICY_SYNTAX', line: 1, column: 2 } }, 'load-error');
});

test('the runner itself on a sample file (plumbing; expect_code/expect_names are by hand)', async () => {
  const sample = new URL('./fixtures/sample-vectors.json', import.meta.url);
  const raw = JSON.parse(readFileSync(sample, 'utf8'));
  validateVectorFile(raw, 'sample');
  const file = loadVectorFile(sample.pathname);
  const result = await runFile((rules) => Toolgate.load(rules), file);
  for (const [i, c] of file.cases.entries()) {
    const got = result.cases[i];
    assert.ok(!got.error, `${c.name}: ${got.error?.message}`);
    if (c.op === 'evaluate') assert.equal(JSON.parse(got.output).error?.code ?? null, c.expect_code, c.name);
    if (c.op === 'list') assert.deepEqual(JSON.parse(got.output).tools.map((t) => t.name), c.expect_names, c.name);
    if (c.op === 'strip_fields') assert.deepEqual(got.output, c.expect, c.name);
  }
});
