#!/usr/bin/env node
// Benchmark (not a test): ns per decision in Node on the seed catalog, load
// time, list time. `npm run bench` (after `npm run build`).
//   node scripts/bench.mjs [--iterations N]
import { readFileSync, statSync } from 'node:fs';
import { Toolgate, compileCoreModule, coreModuleUrl } from '../src/index.js';

const arg = (/** @type {string} */ n, /** @type {number} */ d) => { const i = process.argv.indexOf(n); return i > 0 ? Number(process.argv[i + 1]) : d; };
const N = arg('--iterations', 50_000);
const catalog = readFileSync(new URL('../examples/seed-server/seed-catalog.json', import.meta.url), 'utf8');
const ms = (/** @type {bigint} */ ns) => (Number(ns) / 1e6).toFixed(1);

let t = process.hrtime.bigint();
const module = await compileCoreModule();
const tCompile = process.hrtime.bigint() - t;
t = process.hrtime.bigint();
const gate = Toolgate.fromModule({ module, catalog });
const tFirstLoad = process.hrtime.bigint() - t;
const loads = [];
for (let i = 0; i < 5; i++) {
  t = process.hrtime.bigint();
  Toolgate.fromModule({ module, catalog }).close();
  loads.push(process.hrtime.bigint() - t);
}
loads.sort((a, b) => (a < b ? -1 : 1));

console.log(`core module: ${statSync(coreModuleUrl).size} bytes`);
console.log(`load: compile ${ms(tCompile)} ms, first instantiate+load rules ${ms(tFirstLoad)} ms, warm instantiate+load (median of 5) ${ms(loads[2])} ms`);

const ctx = JSON.stringify({ surface: 'confirming', scopes: ['mcp:read', 'mcp:write', 'bob:consult'] });
const cases = /** @type {[string, unknown][]} */ ([
  ['allowed read (no args)', { name: 'get_capabilities', arguments: {} }],
  ['allowed read (uuid format in schema)', { name: 'wa_get_chat', arguments: { chat_id: '3f2b8a9e-6d1c-4b7a-9e2f-1a2b3c4d5e6f' } }],
  ['send without confirmation', { name: 'send_whatsapp', arguments: { to: '+5511999999999', text: 'oi', idempotency_key: 'send-0001' } }],
  ['send confirmed (allowed)', { name: 'send_whatsapp', arguments: { to: '+5511999999999', text: 'oi', idempotency_key: 'send-0001', confirmed: true } }],
  ['unknown tool', { name: 'apagar_tudo', arguments: {} }],
]);
// The package's evaluate (canonical ABI fast path) and jco's generated wrapper, interleaved.
const viaJco = Toolgate.fromModule({ module, catalog, fastPath: false });
const time = (/** @type {Toolgate} */ g, /** @type {Uint8Array} */ bytes) => {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) g.evaluate(bytes, ctx);
  return Number(process.hrtime.bigint() - t0) / N;
};
for (const [label, call] of cases) {
  const bytes = new TextEncoder().encode(JSON.stringify(call));
  const code = gate.evaluate(bytes, ctx).code;
  if (viaJco.evaluate(bytes, ctx).json !== gate.evaluate(bytes, ctx).json) throw new Error('fast path and jco wrapper disagree');
  for (let i = 0; i < Math.min(N, 20_000); i++) { gate.evaluate(bytes, ctx); viaJco.evaluate(bytes, ctx); } // warm-up (tier-up)
  const fast = Math.min(time(gate, bytes), time(gate, bytes));
  const jco = Math.min(time(viaJco, bytes), time(viaJco, bytes));
  console.log(`evaluate ${label} [${code ?? 'allowed'}]: ${Math.round(fast)} ns/decision (jco wrapper: ${Math.round(jco)})`);
}
t = process.hrtime.bigint();
const L = Math.max(1, Math.floor(N / 50));
for (let i = 0; i < L; i++) gate.listExposable(ctx);
console.log(`listExposable (34 tools): ${Math.round(Number(process.hrtime.bigint() - t) / L)} ns/list`);
