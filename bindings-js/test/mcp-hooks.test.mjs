// Review 2 (bindings), finding 1: a hook must not be able to change what is
// forwarded. The middleware reads allow/deny and the forwarded arguments from
// the engine's bytes before `onDecision` runs; `Decision.ok` is read from the
// bytes, never from the parsed object a hook may have edited; `toJSON()`
// hands out a fresh copy. Driven by the SDK's real Client in memory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from './lib/connect.mjs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { Toolgate } from '../src/index.js';
import { guardServer } from '../src/mcp.js';

const catalog = JSON.stringify({ formatVersion: 1, tools: [
  { name: 'wipe', description: 'wipes', effect: 'write', inputSchema: { type: 'object', properties: { path: { type: 'string' } } } },
  { name: 'lookup', description: 'reads', effect: 'read', inputSchema: { type: 'object', properties: { q: { type: 'string' } } } },
  { name: 'pay', description: 'pays', effect: 'read', inputSchema: { type: 'object', properties: { amount: { type: 'number', maximum: 100 } } } },
] });
const gate = await Toolgate.load({ catalog });

/**
 * Audit hooks that edit what they were handed, each as a careless hook might.
 * @type {Record<string, (d: import('../src/core.js').Decision) => void>}
 */
const EDITING_HOOKS = {
  // The review's repro: normalise the record built with toJSON(), in place.
  'toJSON() record': (d) => { const rec = d.toJSON(); rec.ok = Boolean(rec.ok) || rec.error?.retryable === true; rec.error = null; },
  // The parsed object the getters share.
  'value in place': (d) => { const v = /** @type {any} */ (d.value); v.ok = true; v.error = null; },
  // And the opposite: an allow edited into a deny.
  'allow to deny': (d) => { const v = /** @type {any} */ (d.value); v.ok = false; const r = /** @type {any} */ (d.toJSON()); r.ok = false; },
};

test('Decision: ok is read from the bytes, toJSON() is a fresh copy; editing either changes nothing', () => {
  const d = gate.evaluate({ name: 'wipe', arguments: {} }, { surface: 'confirming' });
  assert.equal(d.code, 'CONFIRMATION_REQUIRED'); // parses and keeps `value`
  const copy = /** @type {any} */ (d.toJSON());
  assert.notEqual(copy, d.toJSON(), 'a new object every time');
  assert.notEqual(copy, d.value);
  copy.ok = true;
  copy.error = null;
  assert.equal(d.ok, false);
  assert.equal(d.code, 'CONFIRMATION_REQUIRED');
  assert.equal(/** @type {any} */ (d.toJSON()).ok, false);
  assert.equal(JSON.stringify(d), d.json);
  // Even the shared parsed object, edited, does not change `ok`.
  /** @type {any} */ (d.value).ok = true;
  assert.equal(d.ok, false);
  assert.equal(/** @type {any} */ (d.toJSON()).ok, false);
  // The outcome of `decide` reads its decision's bytes too.
  const o = gate.decide({ name: 'wipe', arguments: {} }, { surface: 'confirming' }, 'none');
  /** @type {any} */ (o.decision.value).ok = true;
  assert.equal(o.ok, false);
  assert.equal(o.forward, null);
  // The list and turn results hand out copies as well.
  const list = gate.listExposable({ surface: 'confirming' });
  /** @type {any} */ (list.toJSON()).tools.length = 0;
  assert.equal(list.toJSON().tools.length, 3);
  const state = gate.turn(null, { calls: [] });
  /** @type {any} */ (state.toJSON()).x = 1;
  assert.equal('x' in state.toJSON(), false);
});

test('onDecision editing the decision cannot forward a denied call (a relay on fallbackRequestHandler)', async () => {
  for (const [label, hook] of Object.entries(EDITING_HOOKS)) {
    /** @type {any[]} */
    const ran = [];
    const server = new Server({ name: 'relay', version: '1' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: JSON.parse(catalog).tools.map((/** @type {any} */ t) => ({ name: t.name, inputSchema: t.inputSchema })) }));
    // A relay: whatever reaches it is forwarded upstream.
    server.fallbackRequestHandler = async (/** @type {any} */ request) => {
      ran.push({ name: request.params.name, args: request.params.arguments });
      return { content: [{ type: 'text', text: `relayed ${request.params.name}` }] };
    };
    /** @type {boolean[]} */
    const seen = [];
    guardServer(server, { gate, confirmation: 'none', onDecision: (d) => { seen.push(d.ok); hook(d); } });
    const client = await connect(server);
    try {
      const args = { path: '/', confirmed: true };
      const r = await client.callTool({ name: 'wipe', arguments: args });
      const expected = gate.decide({ name: 'wipe', arguments: args }, { surface: 'confirming' }, 'none');
      assert.equal(expected.decision.code, 'CONFIRMATION_REQUIRED');
      assert.deepEqual(r, expected.blockedResult, `${label}: the engine's blocked result, unedited`);
      assert.deepEqual(ran, [], `${label}: the relay never ran`);
      // An allowed call is forwarded with exactly the engine's arguments, whatever the hook did.
      const read = await client.callTool({ name: 'lookup', arguments: { q: 'x', confirmed: true } });
      assert.ok(!read.isError, `${label}: ${JSON.stringify(read)}`);
      assert.deepEqual(ran, [{ name: 'lookup', args: { q: 'x' } }], label);
      assert.deepEqual(seen, [false, true], label);
    } finally {
      await client.close();
    }
  }
});

test('onDecision editing the decision cannot run a handler on arguments its re-decision denied (McpServer, zod transform)', async () => {
  for (const [label, hook] of Object.entries(EDITING_HOOKS)) {
    /** @type {any[]} */
    const ran = [];
    const server = new McpServer({ name: 'zod', version: '1' });
    // 5 sent: the engine allows it; the handler would get 5000, which the engine denies (maximum 100).
    server.registerTool('pay', { inputSchema: { amount: z.number().transform((n) => n * 1000) } }, async (args) => { ran.push(args); return { content: [] }; });
    server.registerTool('lookup', { inputSchema: { q: z.string() } }, async (args) => { ran.push(args); return { content: [] }; });
    /** @type {(string | null)[]} */
    const codes = [];
    guardServer(server, { gate, confirmation: 'none', onDecision: (d) => { codes.push(d.code); hook(d); } });
    const client = await connect(server);
    try {
      const r = await client.callTool({ name: 'pay', arguments: { amount: 5 } });
      assert.equal(r.isError, true, `${label}: ${JSON.stringify(r)}`);
      assert.equal(/** @type {any} */ (r).content[0].text, gate.evaluate('{"name":"pay","arguments":{"amount":5000}}').json, label);
      assert.deepEqual(ran, [], `${label}: the handler never ran`);
      const read = await client.callTool({ name: 'lookup', arguments: { q: 'x' } });
      assert.ok(!read.isError, `${label}: ${JSON.stringify(read)}`);
      assert.deepEqual(ran, [{ q: 'x' }], label);
      assert.deepEqual(codes, [null, 'BAD_REQUEST', null], label);
    } finally {
      await client.close();
    }
  }
});
