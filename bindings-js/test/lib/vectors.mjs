// Node side of the conformance vectors (format: tests/vectors/README.md):
// finds the files, validates them strictly (unknown fields are errors),
// resolves policy/catalog paths to text, and checks outputs byte for byte.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The repo's shared vectors, read in place at test time. */
export const vectorsDir = process.env.TOOLGATE_VECTORS_DIR ? resolve(process.env.TOOLGATE_VECTORS_DIR) : resolve(pkgDir, '..', 'tests', 'vectors');

const FILE_KEYS = new Set(['spec', 'description', 'policy', 'policy_text', 'catalog', 'catalog_text', 'expect_load_error', 'cases']);
/** Each op's hand-written expectation, required beside `expect`. */
const HAND_WRITTEN = { evaluate: 'expect_code', decide: 'expect_code', list: 'expect_names', turn: 'expect_status' };
const LOAD_ERROR_KEYS = new Set(['code', 'line', 'column']);
const CASE_KEYS = {
  // component_only: a case the native engine (no guest meter) does not run.
  evaluate: new Set(['name', 'op', 'expect', 'context', 'context_text', 'call', 'call_text', 'call_hex', 'expect_code', 'component_only']),
  list: new Set(['name', 'op', 'expect', 'context', 'expect_names']),
  turn: new Set(['name', 'op', 'expect', 'state', 'input', 'expect_status']),
  decide: new Set(['name', 'op', 'expect', 'context', 'context_text', 'call', 'call_text', 'call_hex', 'confirmation', 'expect_code', 'component_only']),
  seal_payload: new Set(['name', 'op', 'expect', 'call', 'call_text', 'call_hex', 'caller', 'id', 'expires_ms']),
};
const OUTCOME_KEYS = ['decision', 'forward', 'blocked_result', 'digest'];
const CONFIRMATIONS = new Set(['none', 'argument', 'person', 'invalid']);
const SEAL_KEYS = new Set(['payload', 'caller', 'now_ms']);
const isU64 = (/** @type {unknown} */ n) => Number.isSafeInteger(n) && /** @type {number} */ (n) >= 0;

/** Every vector file: `tests/vectors/*.json` but host-faults.json. */
export function vectorFiles() {
  if (!existsSync(vectorsDir)) return [];
  return readdirSync(vectorsDir)
    .filter((f) => f.endsWith('.json') && f !== 'host-faults.json')
    .sort()
    .map((f) => join(vectorsDir, f));
}

const isObject = (/** @type {unknown} */ v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * Validates one parsed vector file; throws naming the first problem.
 * @param {any} v
 * @param {string} where
 */
export function validateVectorFile(v, where) {
  const fail = (/** @type {string} */ m) => { throw new Error(`${where}: ${m}`); };
  if (!isObject(v)) fail('not a JSON object');
  for (const k of Object.keys(v)) if (!FILE_KEYS.has(k)) fail(`unknown field ${JSON.stringify(k)}`);
  if ('policy' in v && 'policy_text' in v) fail('both policy and policy_text');
  if ('policy' in v && v.policy !== null && typeof v.policy !== 'string') fail('policy must be a path or null');
  if ('policy_text' in v && typeof v.policy_text !== 'string') fail('policy_text must be a string');
  if (('catalog' in v) === ('catalog_text' in v)) fail('exactly one of catalog and catalog_text');
  if ('catalog' in v && typeof v.catalog !== 'string') fail('catalog must be a path');
  if ('catalog_text' in v && typeof v.catalog_text !== 'string') fail('catalog_text must be a string');
  for (const k of ['spec', 'description']) if (k in v && typeof v[k] !== 'string') fail(`${k} must be a string`);
  if ('expect_load_error' in v) {
    const e = v.expect_load_error;
    if (!isObject(e)) fail('expect_load_error must be an object');
    for (const k of Object.keys(e)) if (!LOAD_ERROR_KEYS.has(k)) fail(`expect_load_error: unknown field ${JSON.stringify(k)}`);
    if (typeof e.code !== 'string') fail('expect_load_error.code must be a string');
    for (const k of ['line', 'column']) if (k in e && !Number.isInteger(e[k])) fail(`expect_load_error.${k} must be an integer`);
    if ('cases' in v && (!Array.isArray(v.cases) || v.cases.length > 0)) fail('cases with expect_load_error');
  } else if (!Array.isArray(v.cases)) {
    fail('cases is required (an array) unless expect_load_error is given');
  }
  const names = new Set();
  for (const [i, c] of (v.cases ?? []).entries()) {
    const at = `case ${i}${isObject(c) && typeof c.name === 'string' ? ` (${c.name})` : ''}`;
    if (!isObject(c)) fail(`${at}: not an object`);
    if (typeof c.name !== 'string' || c.name === '') fail(`${at}: name must be a non-empty string`);
    if (names.has(c.name)) fail(`${at}: duplicate case name`);
    names.add(c.name);
    const keys = CASE_KEYS[/** @type {keyof typeof CASE_KEYS} */ (c.op)];
    if (!keys) fail(`${at}: unknown op ${JSON.stringify(c.op)}`);
    for (const k of Object.keys(c)) if (!keys.has(k)) fail(`${at}: unknown field ${JSON.stringify(k)} for op ${c.op}`);
    if (!('expect' in c)) fail(`${at}: expect is required`);
    // The hand-written anchor beside the engine-written bytes (`vectors --write`
    // rewrites `expect`): a wrong engine cannot bless itself.
    const anchor = HAND_WRITTEN[/** @type {keyof typeof HAND_WRITTEN} */ (c.op)];
    if (anchor && !(anchor in c)) fail(`${at}: ${anchor} is required (written by hand)`);
    if ('context' in c && !isObject(c.context)) fail(`${at}: context must be an object`);
    if (['evaluate', 'decide', 'seal_payload'].includes(c.op)) {
      const n = ['call', 'call_text', 'call_hex'].filter((k) => k in c).length;
      if (n !== 1) fail(`${at}: exactly one of call, call_text, call_hex`);
      if ('call_text' in c && typeof c.call_text !== 'string') fail(`${at}: call_text must be a string`);
      if ('call_hex' in c && (typeof c.call_hex !== 'string' || !/^([0-9a-fA-F]{2})*$/.test(c.call_hex))) fail(`${at}: call_hex must be hex bytes`);
      if ('context_text' in c && typeof c.context_text !== 'string') fail(`${at}: context_text must be a string`);
      if ('context_text' in c && 'context' in c) fail(`${at}: at most one of context, context_text`);
      if ('expect_code' in c && c.expect_code !== null && typeof c.expect_code !== 'string') fail(`${at}: expect_code must be a string or null`);
      if ('component_only' in c && typeof c.component_only !== 'boolean') fail(`${at}: component_only must be a boolean`);
    }
    switch (c.op) {
      case 'evaluate':
        if (typeof c.expect !== 'string') fail(`${at}: expect must be a string`);
        break;
      case 'decide': {
        const e = c.expect;
        if (!isObject(e)) fail(`${at}: expect must be an object`);
        for (const k of Object.keys(e)) if (!OUTCOME_KEYS.includes(k)) fail(`${at}: expect: unknown field ${JSON.stringify(k)}`);
        if (typeof e.decision !== 'string') fail(`${at}: expect.decision must be a string`);
        for (const k of OUTCOME_KEYS.slice(1)) if (!(k in e) || (e[k] !== null && typeof e[k] !== 'string')) fail(`${at}: expect.${k} must be a string or null`);
        if ('confirmation' in c) {
          const k = c.confirmation;
          if (typeof k === 'string') {
            if (!CONFIRMATIONS.has(k)) fail(`${at}: unknown confirmation ${JSON.stringify(k)}`);
          } else {
            if (!isObject(k) || Object.keys(k).length !== 1 || !isObject(k.seal)) fail(`${at}: confirmation must be none, argument, person, invalid or {"seal": {...}}`);
            for (const f of Object.keys(k.seal)) if (!SEAL_KEYS.has(f)) fail(`${at}: confirmation.seal: unknown field ${JSON.stringify(f)}`);
            if (typeof k.seal.payload !== 'string' || typeof k.seal.caller !== 'string' || !isU64(k.seal.now_ms)) fail(`${at}: confirmation.seal needs payload, caller (strings) and now_ms (an integer >= 0)`);
          }
        }
        break;
      }
      case 'seal_payload':
        if (typeof c.expect !== 'string' && !(isObject(c.expect) && Object.keys(c.expect).join() === 'error' && typeof c.expect.error === 'string')) {
          fail(`${at}: expect must be the payload string or {"error": CODE}`);
        }
        for (const k of ['caller', 'id']) if (k in c && typeof c[k] !== 'string') fail(`${at}: ${k} must be a string`);
        if ('expires_ms' in c && !isU64(c.expires_ms)) fail(`${at}: expires_ms must be an integer >= 0`);
        break;
      case 'list':
        if (typeof c.expect !== 'string') fail(`${at}: expect must be a string`);
        if ('expect_names' in c && (!Array.isArray(c.expect_names) || c.expect_names.some((/** @type {unknown} */ n) => typeof n !== 'string'))) fail(`${at}: expect_names must be an array of strings`);
        break;
      case 'turn':
        if (typeof c.expect !== 'string') fail(`${at}: expect must be a string`);
        if (!('state' in c) || (c.state !== null && !isObject(c.state))) fail(`${at}: state must be an object or null`);
        if ('expect_status' in c && typeof c.expect_status !== 'string') fail(`${at}: expect_status must be a string`);
        if (!('input' in c) || !isObject(c.input)) fail(`${at}: input must be an object`);
        break;
    }
  }
  return v;
}

/**
 * Reads, validates and resolves one vector file.
 * @param {string} path
 */
export function loadVectorFile(path) {
  const dir = dirname(path);
  const v = validateVectorFile(JSON.parse(readFileSync(path, 'utf8')), path);
  const text = (/** @type {string} */ rel) => readFileSync(resolve(dir, rel), 'utf8');
  return {
    path,
    policy_path: typeof v.policy === 'string' ? resolve(dir, v.policy) : null,
    catalog_path: typeof v.catalog === 'string' ? resolve(dir, v.catalog) : null,
    policy_text: 'policy_text' in v ? v.policy_text : typeof v.policy === 'string' ? text(v.policy) : null,
    catalog_text: 'catalog_text' in v ? v.catalog_text : text(v.catalog),
    expect_load_error: v.expect_load_error ?? null,
    cases: v.cases ?? [],
  };
}

/**
 * Checks what a runtime produced (runFile's result) against the file.
 * @param {ReturnType<typeof loadVectorFile>} file
 * @param {any} result
 * @param {string} runtime
 */
export function checkResult(file, result, runtime) {
  const where = `${runtime}: ${file.path}`;
  if (file.expect_load_error) {
    const want = file.expect_load_error;
    assert.ok(result.load_error, `${where}: loading must fail with ${want.code}`);
    assert.equal(result.load_error.name, 'LoadError', `${where}: ${result.load_error.message}`);
    assert.equal(result.load_error.code, want.code, `${where}: load error code`);
    if ('line' in want) assert.equal(result.load_error.line, want.line, `${where}: load error line`);
    if ('column' in want) assert.equal(result.load_error.column, want.column, `${where}: load error column`);
    return;
  }
  assert.ok(!result.load_error, `${where}: load failed: ${result.load_error?.message}`);
  assert.equal(result.cases.length, file.cases.length);
  for (const [i, c] of file.cases.entries()) {
    const got = result.cases[i];
    const at = `${where} case ${JSON.stringify(c.name)}`;
    assert.equal(got.name, c.name);
    assert.ok(!got.error, `${at}: ${got.error?.name} ${got.error?.code}: ${got.error?.message}`);
    if (c.op === 'decide' || c.op === 'seal_payload') {
      // Every field a string (exact bytes) or null; the error a code.
      assert.deepEqual(got.output, c.expect, `${at}: output differs`);
    } else {
      assert.equal(got.output, c.expect, `${at}: bytes differ`);
    }
    if ((c.op === 'evaluate' || c.op === 'decide') && 'expect_code' in c) {
      const decision = JSON.parse(c.op === 'decide' ? got.output.decision : got.output);
      assert.equal(decision.error?.code ?? null, c.expect_code, `${at}: expect_code`);
      assert.equal(decision.ok, decision.error === null, `${at}: ok disagrees with error`);
    }
    if (c.op === 'turn' && 'expect_status' in c) {
      assert.equal(JSON.parse(got.output).transaction_status, c.expect_status, `${at}: expect_status`);
    }
    if (c.op === 'list' && 'expect_names' in c) {
      assert.deepEqual(JSON.parse(got.output).tools.map((/** @type {any} */ t) => t.name), c.expect_names, `${at}: expect_names`);
    }
  }
}
