// The compute budget is the component's own (the guest meter, compiled in by
// component-build), so a runaway call is interrupted inside the guest in Node
// too — not run to the end and judged afterwards by the deadline — and gets
// the same ENGINE_LIMIT as in the Rust and Python hosts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HOST_FAULTS, Toolgate } from '../src/index.js';
import { vectorsDir } from './lib/vectors.mjs';

const vector = JSON.parse(readFileSync(join(vectorsDir, 'budget-exponential-anyof.json'), 'utf8'));
const runaway = vector.cases.find((/** @type {any} */ c) => c.component_only).call_text;
const kRaw = Symbol.for('toolgate.test.rawExports');

// The timeout is a hang guard (without the meter the call runs for years), not a measure.
test('a runaway call is interrupted by the guest meter: ENGINE_LIMIT, with no deadline at all', { timeout: 300_000 }, async () => {
  // deadlineMs: Infinity — only the meter can stop the call. The call would
  // try 2^48 failing branches (years); the budget stops it within seconds.
  const gate = await Toolgate.load({ catalog: vector.catalog_text, deadlineMs: Infinity });
  const decision = gate.evaluate(runaway);
  assert.equal(decision.json, HOST_FAULTS.ENGINE_LIMIT);
  // The instance was replaced; the next call is served normally.
  assert.equal(gate.recoveries, 1);
  assert.equal(gate.evaluate({ name: 'deep', arguments: { a: 1 } }).ok, true);
});

test('the meter trap on a value-returning call is ENGINE_LIMIT on the jco path too', async () => {
  const gate = await Toolgate.load({ catalog: vector.catalog_text, deadlineMs: Infinity, fastPath: false });
  assert.equal(gate.evaluate(runaway).json, HOST_FAULTS.ENGINE_LIMIT);
  assert.ok(gate.evaluate({ name: 'shallow', arguments: { a: 2 } }).ok);
});

test('every entry starts with a full budget: the meter global is reset per call', async () => {
  const gate = await Toolgate.load({ catalog: vector.catalog_text });
  gate.evaluate({ name: 'shallow', arguments: { a: 2 } });
  const raw = /** @type {any} */ (gate)[kRaw];
  const after = raw.toolgate_meter_budget.value;
  gate.evaluate({ name: 'shallow', arguments: { a: 2 } });
  // The last entry of each call is the same post-return: the same units left.
  assert.equal(raw.toolgate_meter_budget.value, after);
  assert.ok(after > 0n);
});
