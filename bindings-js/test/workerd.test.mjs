// The same package files inside workerd (npm `workerd`): every vector file
// evaluated in the worker, byte for byte; a trap there; the example worker.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Toolgate, HOST_FAULTS, StateKeys, InvalidStateError } from '../src/index.js';
import { startWorkerd } from '../scripts/workerd.mjs';
import { checkResult, loadVectorFile, pkgDir, vectorFiles, vectorsDir } from './lib/vectors.mjs';

const fixtures = join(vectorsDir, 'fixtures');
const GATE_TOKEN = 'a-host-token';
/** @type {Awaited<ReturnType<typeof startWorkerd>>} */
let vectorsWorker;
/** @type {Awaited<ReturnType<typeof startWorkerd>>} */
let exampleWorker;

before(async () => {
  [vectorsWorker, exampleWorker] = await Promise.all([
    startWorkerd({ entry: join(pkgDir, 'test/worker/vectors-worker.mjs'), extraModules: [join(pkgDir, 'test/lib/vector-exec.mjs')] }),
    startWorkerd({ entry: join(pkgDir, 'examples/worker/worker.mjs'), bindings: { CATALOG: join(fixtures, 'seed-catalog.json'), GATE_TOKEN: gateTokenFile() }, probe: '/health' }),
  ]);
});
after(async () => {
  await vectorsWorker?.stop();
  await exampleWorker?.stop();
});

function gateTokenFile() {
  const file = join(mkdtempSync(join(tmpdir(), 'toolgate-gate-')), 'token');
  writeFileSync(file, `${GATE_TOKEN}\n`); // as an editor saves it
  return file;
}

async function post(/** @type {string} */ url, /** @type {unknown} */ body, /** @type {string} */ token = GATE_TOKEN) {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } });
  assert.equal(r.status, 200, await r.clone().text());
  return r.json();
}

for (const path of vectorFiles()) {
  test(`vectors (workerd): ${path.split('/').pop()}`, async () => {
    const file = loadVectorFile(path);
    const result = await post(`${vectorsWorker.url}/run-file`, { policy_text: file.policy_text, catalog_text: file.catalog_text, cases: file.cases });
    checkResult(file, result, 'workerd');
  });
}

test('workerd and Node give the same bytes for the sample file', async () => {
  const file = loadVectorFile(join(pkgDir, 'test/fixtures/sample-vectors.json'));
  const inWorker = await post(`${vectorsWorker.url}/run-file`, { policy_text: file.policy_text, catalog_text: file.catalog_text, cases: file.cases });
  const { runFile } = await import('./lib/vector-exec.mjs');
  const inNode = await runFile((rules) => Toolgate.load(rules), file);
  assert.deepEqual(inWorker, inNode);
  assert.ok(inWorker.cases.length > 0);
});

test('workerd: no run-time wasm compile needed (the core module is imported), no nodejs_compat', async () => {
  // Rules loaded and decided in the isolate first (a load, the fast path's probe, a trap's recovery).
  const file = loadVectorFile(join(pkgDir, 'test/fixtures/sample-vectors.json'));
  const ran = await post(`${vectorsWorker.url}/run-file`, { policy_text: file.policy_text, catalog_text: file.catalog_text, cases: file.cases });
  assert.ok(ran.cases.length > 0);
  const r = await (await fetch(`${vectorsWorker.url}/runtime`, { method: 'POST', body: '{}' })).json();
  assert.equal(r.hasProcess, false);
  // Whatever the runtime allows, the package never compiled wasm bytes there.
  assert.equal(typeof r.compileAllowed, 'boolean');
  assert.equal(r.compiles, 0);
});

test('workerd: a real trap denies with ENGINE_TRAP and the next call is served', async () => {
  const call = { name: 'consultar_plano', arguments: { customer_id: '1' } };
  const r = await post(`${vectorsWorker.url}/trap`, {
    policy: readFileSync(join(fixtures, 'plans-policy.yaml'), 'utf8'), catalog: readFileSync(join(fixtures, 'plans-catalog.json'), 'utf8'), call,
  });
  assert.equal(r.trapped, HOST_FAULTS.ENGINE_TRAP);
  assert.equal(r.faultBytes, HOST_FAULTS.ENGINE_TRAP);
  assert.equal(r.after, r.before);
  assert.equal(JSON.parse(r.after).ok, true);
  assert.equal(r.recoveries, 1);
});

test('the example worker decides as the Node binding does, for hosts that hold its token only', async () => {
  const gate = await Toolgate.load({ catalog: readFileSync(join(fixtures, 'seed-catalog.json'), 'utf8') });
  const health = await (await fetch(`${exampleWorker.url}/health`)).json();
  assert.equal(health.revision, gate.revision);
  const calls = [
    [{ name: 'get_capabilities', arguments: {} }, { scopes: ['mcp:read'] }],
    [{ name: 'send_whatsapp', arguments: { to: 'x', text: 'y', idempotency_key: 'abcdefgh' } }, { scopes: ['mcp:read', 'mcp:write'] }],
    // The model's own yes does not count: held for the person.
    [{ name: 'send_whatsapp', arguments: { to: 'x', text: 'y', idempotency_key: 'abcdefgh', confirmed: true } }, { scopes: ['mcp:read', 'mcp:write'] }],
    [{ name: 'send_whatsapp', arguments: {} }, { surface: 'direct' }],
    [{ name: 'no_such_tool', arguments: {} }, {}],
  ];
  const codes = [];
  for (const [call, context] of calls) {
    const answer = await post(`${exampleWorker.url}/decide`, { call, context });
    const o = gate.decide(call, context, 'none');
    assert.deepEqual(answer, {
      decision: JSON.parse(o.decision.json), forward: o.forwardJson && JSON.parse(o.forwardJson), blocked_result: o.blockedResultJson && JSON.parse(o.blockedResultJson),
    });
    codes.push(o.decision.code);
  }
  assert.equal(codes[0], null);
  assert.equal(codes[2], 'CONFIRMATION_REQUIRED');
  assert.equal(codes[4], 'NOT_FOUND');
  // The host asked the person about that very call: it says so, the model's fields never do.
  const [held, scopes] = /** @type {[any, any]} */ (calls[2]);
  for (const confirmation of ['person', 'argument']) {
    const answer = await post(`${exampleWorker.url}/decide`, { call: held, context: scopes, confirmation });
    const o = gate.decide(held, scopes, confirmation === 'person' ? 'person' : 'none');
    assert.deepEqual(answer.decision, JSON.parse(o.decision.json), confirmation);
    assert.equal(answer.decision.ok, confirmation === 'person', confirmation);
  }
  // The scheme's case is not the token's.
  const lower = await fetch(`${exampleWorker.url}/list`, { method: 'POST', body: '{"context":{}}', headers: { authorization: `bearer ${GATE_TOKEN}` } });
  assert.equal(lower.status, 200);
  const list = await post(`${exampleWorker.url}/list`, { context: { surface: 'direct' } });
  assert.deepEqual(list, JSON.parse(gate.listExposable({ surface: 'direct' }).json));
  const bad = await fetch(`${exampleWorker.url}/list`, { method: 'POST', body: JSON.stringify({ context: { surface: 'x' } }), headers: { authorization: `Bearer ${GATE_TOKEN}` } });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.code, 'CONTEXT_INVALID_VALUE');
  // Whoever cannot show the token gets no decision and no listing.
  for (const authorization of [undefined, 'Bearer wrong-token', `Basic ${GATE_TOKEN}`, `Bearer ${GATE_TOKEN}x`]) {
    for (const path of ['/decide', '/list']) {
      const r = await fetch(`${exampleWorker.url}${path}`, { method: 'POST', body: JSON.stringify({ call: calls[0]?.[0], context: {} }), headers: authorization ? { authorization } : {} });
      assert.equal(r.status, 401, `${path} with ${authorization}`);
    }
  }
});

test('workerd: WebStateKeys opens and refuses the gateway\'s tokens as Node does, and Node opens what it seals', async () => {
  const doc = JSON.parse(readFileSync(join(vectorsDir, 'seals', 'request-state.json'), 'utf8'));
  const keys = new StateKeys(doc.secrets);
  const own = keys.seal('{"id":"x"}');
  const tokens = [...doc.cases.map((/** @type {any} */ c) => c.token), own, `${own}=`, own.slice(0, -1), `tg2.${own.slice(4)}`, ''];
  const expected = tokens.map((token) => {
    try {
      return { payload: keys.open(token) };
    } catch (e) {
      if (!(e instanceof InvalidStateError)) throw e;
      return { refused: e.reason };
    }
  });
  const payload = doc.cases[0].payload;
  const r = await post(`${vectorsWorker.url}/seals`, { secrets: doc.secrets, tokens, payload });
  assert.deepEqual(r.answers, expected);
  assert.ok(expected.some((a) => 'refused' in a) && expected.some((a) => 'payload' in a));
  assert.equal(r.fingerprint, keys.fingerprint);
  assert.equal(keys.open(r.sealed), payload);
});
