// Review 2 (bindings), findings 4 and 8: paths of the SDK's McpServer where
// the arguments a handler gets could differ from those decided.
// - 4: guarding McpServer's low-level `.server` would decide on the arguments
//   as sent and hand the handlers their zod output undecided: refused, at
//   guardServer or, when McpServer installs its tools handlers later, per call.
// - 8: an optional-task tool called without a task: createTask gets exactly
//   the arguments checked, not those of a second validation.
// Driven by the SDK's real Client in memory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from './lib/connect.mjs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';
import { z } from 'zod';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Toolgate } from '../src/index.js';
import { guardServer } from '../src/mcp.js';

const catalog = JSON.stringify({ formatVersion: 1, tools: [
  { name: 'pay', description: 'pays', effect: 'read', inputSchema: { type: 'object', properties: { amount: { type: ['number', 'string'], maximum: 100 } } } },
] });
const gate = await Toolgate.load({ catalog });

/** A tool whose zod schema turns the 5 the engine allows into 5000, which it denies (maximum 100). */
function payServer(/** @type {any[]} */ ran, /** @type {any} */ options) {
  const mcp = new McpServer({ name: 's', version: '1' }, options);
  const register = () => mcp.registerTool('pay', { inputSchema: { amount: z.string().transform((s) => Number(s) * 1000) }, annotations: { readOnlyHint: true } },
    async ({ amount }) => { ran.push(amount); return { content: [{ type: 'text', text: String(amount) }] }; });
  return { mcp, register };
}

test('guardServer refuses the low-level Server of an McpServer, pointing to the McpServer itself', async () => {
  const ran = [];
  const { mcp, register } = payServer(ran);
  register();
  assert.throws(() => guardServer(mcp.server, { gate }), (e) => e instanceof TypeError && /guard the McpServer itself/.test(e.message));
  assert.throws(() => guardServer(mcp.server, { policy: null }), (e) => e instanceof TypeError && /guard the McpServer itself/.test(e.message));
  // A tools capability given to the constructor installs the handlers at once.
  const withCapability = payServer(ran, { capabilities: { tools: {} } }).mcp;
  assert.throws(() => guardServer(withCapability.server, { gate }), /guard the McpServer itself/);
  // Nothing was guarded by the refused calls: the McpServer itself can be, and its zod output is decided.
  const client = await connect(guardServer(mcp, { gate }));
  try {
    const r = await client.callTool({ name: 'pay', arguments: { amount: '5' } });
    assert.equal(r.isError, true, JSON.stringify(r));
    assert.equal(/** @type {any} */ (r).content[0].text, gate.evaluate('{"name":"pay","arguments":{"amount":5000}}').json);
    assert.deepEqual(ran, []);
  } finally {
    await client.close();
  }
});

test('an McpServer whose first tool comes after its .server was guarded: every call is refused, no handler runs', async () => {
  const ran = [];
  const { mcp, register } = payServer(ran);
  guardServer(mcp.server, { gate }); // no tools handlers yet: not known to be McpServer's
  register();
  const client = await connect(mcp);
  try {
    for (const amount of ['5', '0']) {
      const r = await client.callTool({ name: 'pay', arguments: { amount } });
      assert.equal(r.isError, true, JSON.stringify(r));
      assert.match(/** @type {any} */ (r).content[0].text, /guard the McpServer itself/);
    }
    assert.deepEqual(ran, [], 'the handler never ran');
  } finally {
    await client.close();
  }
});

test('an McpServer built before toolgate/mcp was imported, its .server guarded: no handler runs (a fresh process)', () => {
  // The pair is recorded only when McpServer installs its handlers after the
  // import; the per-call refusal must not depend on that order.
  const src = pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), '..', 'src')).href;
  const script = `
    import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
    import { Client } from '@modelcontextprotocol/sdk/client/index.js';
    import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
    import { z } from 'zod';
    const ran = [];
    const built = () => {
      const mcp = new McpServer({ name: 's', version: '1' });
      mcp.registerTool('pay', { inputSchema: { amount: z.string().transform((s) => Number(s) * 1000) }, annotations: { readOnlyHint: true } },
        async ({ amount }) => { ran.push(amount); return { content: [{ type: 'text', text: String(amount) }] }; });
      return mcp;
    };
    const early = built(), whole = built();
    const { Toolgate } = await import('${src}/index.js');
    const { guardServer } = await import('${src}/mcp.js');
    const gate = await Toolgate.load({ catalog: ${JSON.stringify(catalog)} });
    guardServer(early.server, { gate });
    guardServer(whole, { gate });
    const call = async (mcp, amount) => {
      const [c, s] = InMemoryTransport.createLinkedPair();
      await mcp.connect(s);
      const client = new Client({ name: 't', version: '1' });
      await client.connect(c);
      const r = await client.callTool({ name: 'pay', arguments: { amount } });
      await client.close();
      return r;
    };
    const refused = await call(early, '0');
    const wholeDenied = await call(whole, '5');
    const wholeRan = await call(whole, '0');
    console.log(JSON.stringify({ refused, wholeDenied, wholeRan, ran }));
  `;
  const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: join(dirname(fileURLToPath(import.meta.url)), '..'), encoding: 'utf8' }));
  assert.equal(out.refused.isError, true, JSON.stringify(out.refused));
  assert.match(out.refused.content[0].text, /guard the McpServer itself/);
  // The McpServer guarded itself is unaffected: 5 -> 5000 denied by the engine, 0 runs.
  assert.equal(out.wholeDenied.content[0].text, gate.evaluate('{"name":"pay","arguments":{"amount":5000}}').json);
  assert.equal(out.wholeRan.isError, undefined, JSON.stringify(out.wholeRan));
  assert.deepEqual(out.ran, [0], 'only the guarded McpServer\'s allowed call ran');
});

test('the SDK\'s CommonJS McpServer, its .server guarded: no handler runs (a fresh process)', () => {
  // require() gets the SDK's CommonJS copy, whose McpServer class the ES
  // module import of toolgate/mcp does not reach.
  const src = pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), '..', 'src')).href;
  const script = `
    const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
    const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
    const { InMemoryTransport } = require('@modelcontextprotocol/sdk/inMemory.js');
    const { z } = require('zod');
    (async () => {
      const { Toolgate } = await import('${src}/index.js');
      const { guardServer } = await import('${src}/mcp.js');
      const ran = [];
      const mcp = new McpServer({ name: 's', version: '1' });
      mcp.registerTool('pay', { inputSchema: { amount: z.string().transform((s) => Number(s) * 1000) }, annotations: { readOnlyHint: true } },
        async ({ amount }) => { ran.push(amount); return { content: [{ type: 'text', text: String(amount) }] }; });
      guardServer(mcp.server, { gate: await Toolgate.load({ catalog: ${JSON.stringify(catalog)} }) });
      const [c, s] = InMemoryTransport.createLinkedPair();
      await mcp.connect(s);
      const client = new Client({ name: 't', version: '1' });
      await client.connect(c);
      const refused = await client.callTool({ name: 'pay', arguments: { amount: '5' } });
      await client.close();
      console.log(JSON.stringify({ refused, ran }));
    })();
  `;
  const out = JSON.parse(execFileSync(process.execPath, ['--input-type=commonjs', '-e', script], { cwd: join(dirname(fileURLToPath(import.meta.url)), '..'), encoding: 'utf8' }));
  assert.equal(out.refused.isError, true, JSON.stringify(out.refused));
  assert.match(out.refused.content[0].text, /guard the McpServer itself/);
  assert.deepEqual(out.ran, [], 'the handler never ran');
});

/** An optional-task tool (registerToolTask, taskSupport 'optional') whose zod transform is given. */
function taskServer(/** @type {(a: number) => number} */ transform, /** @type {any[]} */ ran) {
  const mcp = new McpServer({ name: 's', version: '1' }, { capabilities: { tools: {}, tasks: { requests: { tools: { call: {} } } } }, taskStore: new InMemoryTaskStore() });
  mcp.experimental.tasks.registerToolTask('pay', {
    inputSchema: { amount: z.number().transform(transform) },
    execution: { taskSupport: 'optional' },
  }, {
    createTask: async (/** @type {any} */ { amount }, /** @type {any} */ extra) => {
      ran.push(amount);
      const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 10 });
      await extra.taskStore.storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text: `paid ${amount}` }] });
      return { task };
    },
    getTask: async (/** @type {any} */ _a, /** @type {any} */ extra) => extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (/** @type {any} */ _a, /** @type {any} */ extra) => extra.taskStore.getTaskResult(extra.taskId),
  });
  return mcp;
}

test('optional-task tool called without a task: createTask gets the arguments checked, not a second validation\'s', async () => {
  const catalogNum = JSON.stringify({ formatVersion: 1, tools: [
    { name: 'pay', description: 'pays', effect: 'read', inputSchema: { type: 'object', properties: { amount: { type: 'number', maximum: 100 } } } },
  ] });
  const g = await Toolgate.load({ catalog: catalogNum });
  // A stateful schema: the first validation gives 5, any later one 5000.
  let n = 0;
  /** @type {any[]} */
  const ran = [];
  /** @type {(string | null)[]} */
  const decided = [];
  const client = await connect(guardServer(taskServer((a) => (++n === 1 ? a : a * 1000), ran), { gate: g, onDecision: (d) => decided.push(d.code) }));
  try {
    const r = await client.callTool({ name: 'pay', arguments: { amount: 5 } });
    assert.ok(!r.isError, JSON.stringify(r));
    assert.deepEqual(ran, [5], 'createTask got the checked 5');
    assert.equal(/** @type {any} */ (r).content[0].text, 'paid 5');
    assert.equal(n, 1, 'validated once');
    assert.deepEqual(decided, [null]);
  } finally {
    await client.close();
  }
  // Control: a schema whose output differs from what was sent is decided again and denied.
  /** @type {any[]} */
  const ran2 = [];
  const client2 = await connect(guardServer(taskServer((a) => a * 1000, ran2), { gate: g }));
  try {
    const r = await client2.callTool({ name: 'pay', arguments: { amount: 5 } });
    assert.equal(r.isError, true, JSON.stringify(r));
    assert.equal(/** @type {any} */ (r).content[0].text, g.evaluate('{"name":"pay","arguments":{"amount":5000}}').json);
    assert.deepEqual(ran2, []);
  } finally {
    await client2.close();
  }
});

test('a low-level handler registered after guardServer with a request schema of its own: its output is decided', async () => {
  const { Server } = await import('@modelcontextprotocol/sdk/server/index.js');
  const { CallToolRequestSchema, ListToolsRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const catalog = { tools: [{ name: 'export_rows', annotations: { readOnlyHint: true },
    inputSchema: { type: 'object', properties: { table: { type: 'string' }, limit: { type: 'integer', maximum: 100 } }, required: ['table'] } }] };
  const gate = await Toolgate.load({ catalog: JSON.stringify(catalog) });
  const server = new Server({ name: 's', version: '1' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => catalog);
  guardServer(server, { gate });
  // The schema adds a default the catalog's maximum forbids.
  const MyCall = CallToolRequestSchema.extend({
    params: CallToolRequestSchema.shape.params.extend({
      arguments: z.object({ table: z.string(), limit: z.number().int().default(1000) }).passthrough(),
    }),
  });
  /** @type {unknown[]} */
  const ran = [];
  server.setRequestHandler(MyCall, async (/** @type {any} */ req) => {
    ran.push(req.params.arguments);
    return { content: [{ type: 'text', text: 'ok' }] };
  });
  const client = await connect(server);
  try {
    const omitted = await client.callTool({ name: 'export_rows', arguments: { table: 'users' } });
    assert.equal(omitted.isError, true, JSON.stringify(omitted));
    assert.equal(/** @type {any} */ (omitted).content[0].text, gate.evaluate({ name: 'export_rows', arguments: { table: 'users', limit: 1000 } }).json);
    const within = await client.callTool({ name: 'export_rows', arguments: { table: 'users', limit: 50 } });
    assert.ok(!within.isError, JSON.stringify(within));
    assert.deepEqual(ran, [{ table: 'users', limit: 50 }]);
  } finally {
    await client.close();
  }
});

test('McpServer: a tool removed while its arguments are validated does not run on them undecided', async () => {
  const mcp = new McpServer({ name: 'x', version: '1' });
  /** @type {unknown[]} */
  const ran = [];
  /** @type {() => void} */
  let entered = () => {};
  const inValidation = new Promise((resolve) => { entered = () => resolve(undefined); });
  /** @type {() => void} */
  let release = () => {};
  const held = new Promise((resolve) => { release = () => resolve(undefined); });
  const tool = mcp.registerTool('export_rows', {
    annotations: { readOnlyHint: true },
    inputSchema: {
      // An async refinement: the tool is removed while it waits.
      table: z.string().refine(async () => { entered(); await held; return true; }),
      // zod applies the default unchecked: over the schema's own maximum.
      limit: z.number().int().max(100).default(1000),
    },
  }, async (/** @type {any} */ args) => {
    ran.push(args);
    return { content: [{ type: 'text', text: 'ok' }] };
  });
  guardServer(mcp, { policy: null });
  const client = await connect(mcp);
  try {
    const call = client.callTool({ name: 'export_rows', arguments: { table: 'users' } });
    await inValidation;
    tool.remove();
    release();
    const r = await call;
    assert.equal(r.isError, true, JSON.stringify(r));
    assert.deepEqual(ran, []);
  } finally {
    await client.close();
  }
});
