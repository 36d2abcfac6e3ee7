// Every tests/vectors/*.json (but host-faults.json) through Node, byte for byte.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { Toolgate } from '../src/index.js';
import { runFile } from './lib/vector-exec.mjs';
import { checkResult, loadVectorFile, validateVectorFile, vectorFiles, vectorsDir } from './lib/vectors.mjs';

const files = vectorFiles();
test(`vector files found in ${vectorsDir}`, (t) => {
  t.diagnostic(`${files.length} vector file(s)`);
  // The shared corpus, not a directory that happens to be empty or missing.
  assert.ok(files.length > 0, `no vector files in ${vectorsDir}`);
  // Only tests/vectors/*.json is enumerated by every runner; a new folder
  // there would be run by nobody unless each runtime learns it.
  const folders = readdirSync(vectorsDir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  assert.deepEqual(folders, ['fixtures', 'seals']);
});

for (const path of files) {
  test(`vectors (node): ${path.split('/').pop()}`, async () => {
    const file = loadVectorFile(path);
    const result = await runFile((rules) => Toolgate.load(rules), file);
    checkResult(file, result, 'node');
  });
}

test('runner rejects unknown fields and malformed files', () => {
  const outcome = { decision: '{}', forward: null, blocked_result: null, digest: null };
  const ok = { spec: '§4', description: 'd', policy: null, catalog: 'c.json', cases: [{ name: 'a', op: 'evaluate', call: { name: 'x' }, expect: '{}', expect_code: null }] };
  validateVectorFile(structuredClone(ok), 'ok');
  validateVectorFile({ ...ok, cases: [
    { name: 'd', op: 'decide', call_text: '{}', context_text: '{}', confirmation: { seal: { payload: 'p', caller: '', now_ms: 1 } }, expect: outcome, expect_code: null },
    { name: 's', op: 'seal_payload', call_hex: '7b7d', caller: 'c', id: 'i', expires_ms: 2, expect: { error: 'CALL_INVALID_VALUE' } },
  ] }, 'ok-pipeline');
  const bad = [
    { ...ok, extra: 1 },
    { ...ok, cases: [{ ...ok.cases[0], surprise: true }] },
    { ...ok, cases: [{ ...ok.cases[0], call_text: '{}' }] },
    { ...ok, cases: [{ name: 'a', op: 'frobnicate', expect: '' }] },
    { ...ok, catalog_text: '{}' },
    { ...ok, policy_text: 'version: 1' },
    { spec: '§1', catalog: 'c.json' },
    { ...ok, cases: undefined, expect_load_error: { code: 'X', hint: 1 } },
    { ...ok, cases: [{ name: 'a', op: 'strip_fields', tool: 't', expect: ['confirmed'] }] },
    { ...ok, cases: [{ name: 'a', op: 'decide', call: { name: 'x' }, expect: '{}' }] },
    { ...ok, cases: [{ name: 'a', op: 'decide', call: { name: 'x' }, confirmation: 'maybe', expect: outcome, expect_code: null }] },
    { ...ok, cases: [{ name: 'a', op: 'decide', call: { name: 'x' }, confirmation: { seal: { payload: 'p', caller: '', now_ms: 1, extra: 1 } }, expect: outcome, expect_code: null }] },
    { ...ok, cases: [{ name: 'a', op: 'decide', call: { name: 'x' }, expect: { ...outcome, extra: null }, expect_code: null }] },
    { ...ok, cases: [{ name: 'a', op: 'decide', call: { name: 'x' }, tool: 't', expect: outcome, expect_code: null }] },
    { ...ok, cases: [{ name: 'a', op: 'seal_payload', call: { name: 'x' }, caller: '', id: 'i', expires_ms: -1, expect: 'p' }] },
    { ...ok, cases: [{ name: 'a', op: 'seal_payload', call: { name: 'x' }, confirmation: 'none', expect: 'p' }] },
    { ...ok, cases: [{ name: 'a', op: 'seal_payload', call: { name: 'x' }, expect: { error: 'X', more: 1 } }] },
    { ...ok, cases: [ok.cases[0], ok.cases[0]] },
    // No hand-written anchor beside the engine-written bytes.
    { ...ok, cases: [{ name: 'a', op: 'evaluate', call: { name: 'x' }, expect: '{}' }] },
    { ...ok, cases: [{ name: 'a', op: 'turn', state: null, input: {}, expect: '{}' }] },
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
    if (c.op === 'decide') assert.equal(JSON.parse(got.output.decision).error?.code ?? null, c.expect_code, c.name);
    if (c.op === 'seal_payload') assert.deepEqual(got.output, c.expect, c.name);
  }
});
