// Security review, issue 11 (3): the engine decides on exactly the arguments
// the tool's handler gets. A real SDK Client talks to a guarded server over
// the SDK's real StdioServerTransport (in-process streams); the client's
// lines are the SDK's own serialization with one value spliced in as raw JSON
// text (`1e400`), which no JSON.stringify can write and any client can send.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { Toolgate } from '../src/index.js';
import { guardServer } from '../src/mcp.js';
import { callJson, engineJson, REFUSED } from '../src/calljson.js';

/** A JSON-RPC client transport over the server's stdio streams; `raw` replaces placeholders in each outgoing line. */
class LineClientTransport {
  /** @param {import('node:stream').Writable} toServer @param {import('node:stream').Readable} fromServer @param {(line: string) => string} raw */
  constructor(toServer, fromServer, raw) {
    this.toServer = toServer;
    this.fromServer = fromServer;
    this.raw = raw;
    this.buffer = new ReadBuffer();
    /** @type {((m: any) => void) | undefined} */ this.onmessage = undefined;
    /** @type {(() => void) | undefined} */ this.onclose = undefined;
    /** @type {((e: Error) => void) | undefined} */ this.onerror = undefined;
  }
  async start() {
    this.fromServer.on('data', (/** @type {Buffer} */ chunk) => {
      this.buffer.append(chunk);
      for (let m; (m = this.buffer.readMessage()) !== null;) this.onmessage?.(m);
    });
  }
  async send(/** @type {any} */ message) { this.toServer.write(this.raw(serializeMessage(message))); }
  async close() { this.toServer.end(); this.onclose?.(); }
}

// Placeholders the client sends as strings, replaced on the wire by raw JSON number text.
const RAW = { '"@1e400"': '1e400', '"@-1e400"': '-1e400', '"@1E+999"': '1E+999' };
const rawLine = (/** @type {string} */ line) => line.replace(/"@-?1e400"|"@1E\+999"/g, (m) => RAW[/** @type {keyof typeof RAW} */ (m)]);

async function connect(/** @type {any} */ server) {
  const toServer = new PassThrough();
  const fromServer = new PassThrough();
  await server.connect(new StdioServerTransport(toServer, fromServer));
  const client = new Client({ name: 'raw-json', version: '1' });
  await client.connect(new LineClientTransport(toServer, fromServer, rawLine));
  return client;
}

// `amount` may be null or a number up to 100.
const catalog = JSON.stringify({ formatVersion: 1, tools: [
  { name: 'pay', description: 'pays', effect: 'read', inputSchema: { type: 'object', properties: { amount: { type: ['number', 'null'], maximum: 100 } }, required: ['amount'] } },
  { name: 'pay_text', description: 'pays', effect: 'read', inputSchema: { type: 'object', properties: { amount: { type: ['number', 'string'], maximum: 100 } } } },
  { name: 'pay_default', description: 'pays', effect: 'read', inputSchema: { type: 'object', properties: { amount: { type: 'number', maximum: 100 } } } },
  { name: 'pay_later', description: 'pays', effect: 'read', inputSchema: { type: 'object', properties: { amount: { type: 'number', maximum: 100 }, when: { type: 'string' } } } },
  { name: 'close_account', description: 'closes', effect: 'write', inputSchema: { type: 'object', properties: { amount: { type: ['number', 'string'], maximum: 100 } } } },
] });
const gate = await Toolgate.load({ catalog });

/** The decision the engine gives for the call text `text`. */
const engine = (/** @type {string} */ text) => gate.evaluate(text).json;

function lowLevelServer(/** @type {any[]} */ ran) {
  const server = new Server({ name: 'raw', version: '1' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: JSON.parse(catalog).tools.map((/** @type {any} */ t) => ({ name: t.name, inputSchema: t.inputSchema })) }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    ran.push(request.params.arguments);
    return { content: [{ type: 'text', text: 'ran' }] };
  });
  return server;
}

function assertEngineDeny(/** @type {any} */ result, /** @type {string} */ text) {
  assert.equal(result.isError, true, JSON.stringify(result));
  assert.equal(result.content[0].text, engine(text), 'the decision bytes are the engine\'s own for that call text');
  const decision = JSON.parse(result.content[0].text);
  assert.equal(decision.ok, false);
  assert.equal(decision.error.code, 'BAD_REQUEST');
  return decision;
}

test('low-level Server: 1e400 / -1e400 / 1E+999 on the wire are denied by the engine; the handler never runs', async () => {
  const ran = [];
  const client = await connect(guardServer(lowLevelServer(ran), { gate }));
  try {
    for (const [sent, text] of [
      ['@1e400', '{"name":"pay","arguments":{"amount":1e400}}'],
      ['@-1e400', '{"name":"pay","arguments":{"amount":-1e400}}'],
      ['@1E+999', '{"name":"pay","arguments":{"amount":1e400}}'],
    ]) {
      const r = await client.callTool({ name: 'pay', arguments: { amount: sent } });
      const decision = assertEngineDeny(r, text);
      assert.match(decision.error.details.reason, /^number out of range/);
    }
    // Nested, and inside an array.
    const nested = await client.callTool({ name: 'pay', arguments: { amount: 1, meta: { list: [1, '@1e400'] } } });
    assertEngineDeny(nested, '{"name":"pay","arguments":{"amount":1,"meta":{"list":[1,1e400]}}}');
    assert.deepEqual(ran, [], 'the handler never ran');

    // Controls: an in-range number and null (which the schema allows) run.
    assert.ok(!(await client.callTool({ name: 'pay', arguments: { amount: 42 } })).isError);
    assert.ok(!(await client.callTool({ name: 'pay', arguments: { amount: null } })).isError);
    const over = await client.callTool({ name: 'pay', arguments: { amount: 101 } });
    assert.equal(JSON.parse(over.content[0].text).error.details.schema_errors[0].keyword, 'maximum');
    assert.deepEqual(ran, [{ amount: 42 }, { amount: null }]);
  } finally {
    await client.close();
  }
});

test('McpServer: 1e400 reaches no handler, whatever its zod schema accepts', async () => {
  const ran = [];
  const server = new McpServer({ name: 'raw', version: '1' });
  server.registerTool('pay', { inputSchema: { amount: z.any() } }, async (args) => { ran.push(args); return { content: [] }; });
  const client = await connect(guardServer(server, { gate }));
  try {
    assertEngineDeny(await client.callTool({ name: 'pay', arguments: { amount: '@1e400' } }), '{"name":"pay","arguments":{"amount":1e400}}');
    assertEngineDeny(await client.callTool({ name: 'pay', arguments: { amount: '@-1e400' } }), '{"name":"pay","arguments":{"amount":-1e400}}');
    assert.deepEqual(ran, []);
    assert.ok(!(await client.callTool({ name: 'pay', arguments: { amount: 7 } })).isError);
    assert.deepEqual(ran, [{ amount: 7 }]);
  } finally {
    await client.close();
  }
});

test('McpServer: the engine decides on the zod output the handler gets (coercion, defaults, transforms, Dates)', async () => {
  /** @type {{ tool: string, args: any }[]} */
  const ran = [];
  /** @type {string[]} */
  const decided = [];
  const server = new McpServer({ name: 'zod', version: '1' });
  const record = (/** @type {string} */ tool) => async (/** @type {any} */ args) => { ran.push({ tool, args }); return { content: [] }; };
  server.registerTool('pay_text', { inputSchema: { amount: z.coerce.number() } }, record('pay_text'));
  server.registerTool('pay_default', { inputSchema: { amount: z.number().default(500) } }, record('pay_default'));
  server.registerTool('pay', { inputSchema: { amount: z.number().transform((n) => n * 1000) } }, record('pay'));
  server.registerTool('pay_later', { inputSchema: { amount: z.number(), when: z.coerce.date() } }, record('pay_later'));
  const client = await connect(guardServer(server, { gate, onDecision: (d) => decided.push(d.code ?? 'ok') }));
  try {
    // "1000" is a string (no maximum applies); the handler would get 1000.
    const coerced = await client.callTool({ name: 'pay_text', arguments: { amount: '1000' } });
    assert.equal(coerced.content[0].text, engine('{"name":"pay_text","arguments":{"amount":1000}}'));
    assert.equal(JSON.parse(coerced.content[0].text).error.details.schema_errors[0].keyword, 'maximum');
    // No amount sent; the handler would get the default 500.
    const defaulted = await client.callTool({ name: 'pay_default', arguments: {} });
    assert.equal(defaulted.content[0].text, engine('{"name":"pay_default","arguments":{"amount":500}}'));
    // 5 sent; the handler would get 5000.
    const transformed = await client.callTool({ name: 'pay', arguments: { amount: 5 } });
    assert.equal(transformed.content[0].text, engine('{"name":"pay","arguments":{"amount":5000}}'));
    // A Date is no JSON value: the engine refuses the text that stands for it.
    const dated = await client.callTool({ name: 'pay_later', arguments: { amount: 5, when: '2030-01-01' } });
    assertEngineDeny(dated, `{"name":"pay_later","arguments":{"amount":5,"when":${REFUSED}}}`);
    assert.deepEqual(ran, []);
    assert.deepEqual(decided, ['ok', 'BAD_REQUEST', 'ok', 'BAD_REQUEST', 'ok', 'BAD_REQUEST', 'ok', 'BAD_REQUEST'], 'both decisions are reported');

    // Controls: where the zod output is what the engine allowed, the handler runs (one decision).
    decided.length = 0;
    assert.ok(!(await client.callTool({ name: 'pay_text', arguments: { amount: 50 } })).isError);
    assert.ok(!(await client.callTool({ name: 'pay_default', arguments: { amount: 10 } })).isError);
    assert.ok(!(await client.callTool({ name: 'pay_text', arguments: { amount: '50' } })).isError, 'coerced to 50: decided again, allowed');
    assert.deepEqual(ran, [{ tool: 'pay_text', args: { amount: 50 } }, { tool: 'pay_default', args: { amount: 10 } }, { tool: 'pay_text', args: { amount: 50 } }]);
    assert.deepEqual(decided, ['ok', 'ok', 'ok', 'ok']);
  } finally {
    await client.close();
  }
});

test('McpServer: a re-decision keeps the engine fields the handler never gets (confirmed)', async () => {
  const ran = [];
  const server = new McpServer({ name: 'zod', version: '1' });
  server.registerTool('close_account', { inputSchema: { amount: z.coerce.number() } }, async (args) => { ran.push(args); return { content: [] }; });
  // 'argument' asked for explicitly (the default is 'none'): the model's
  // confirmed: true must count here for the re-decision to have one to keep.
  const client = await connect(guardServer(server, { gate, confirmation: 'argument' }));
  try {
    const unconfirmed = await client.callTool({ name: 'close_account', arguments: { amount: 5 } });
    assert.equal(JSON.parse(unconfirmed.content[0].text).error.code, 'CONFIRMATION_REQUIRED');
    const coercedOver = await client.callTool({ name: 'close_account', arguments: { amount: '500', confirmed: true } });
    assert.equal(coercedOver.content[0].text, engine('{"name":"close_account","arguments":{"amount":500,"confirmed":true}}'));
    assert.deepEqual(ran, []);
    assert.ok(!(await client.callTool({ name: 'close_account', arguments: { amount: '5', confirmed: true } })).isError);
    assert.deepEqual(ran, [{ amount: 5 }], 'confirmed is stripped, the coerced amount decided with it');
  } finally {
    await client.close();
  }
});

test('engineJson: JSON.stringify\'s bytes for JSON data; what JSON cannot say is never rewritten', () => {
  const data = JSON.parse('{"a":[1,-2.5,1e21,"x\\u2028\\ud800",true,null,{}],"b":{"c":[]},"toJSON":1}');
  assert.equal(engineJson(data), JSON.stringify(data));
  assert.equal(callJson('t', undefined), '{"name":"t"}');
  assert.equal(callJson('t', {}), '{"name":"t","arguments":{}}');
  const cases = /** @type {[unknown, string][]} */ ([
    [Infinity, '1e400'], [-Infinity, '-1e400'], [NaN, 'NaN'], [-0, '-0'], [0, '0'],
    [2n ** 53n, '9007199254740992'], [-(2n ** 53n), '-9007199254740992'], [2n ** 53n + 1n, REFUSED],
    [undefined, REFUSED], [() => 1, REFUSED], [Symbol('s'), REFUSED],
    [new Date(0), REFUSED], [new Map(), REFUSED], [Object(1), REFUSED], [new (class A {})(), REFUSED],
    [{ toJSON: () => 1 }, `{"toJSON":${REFUSED}}`],
    [[1, undefined], `[1,${REFUSED}]`], [[1, , 3], `[1,${REFUSED},3]`], [{ a: undefined }, `{"a":${REFUSED}}`],
    [JSON.parse('{"__proto__":{"x":1}}'), REFUSED],
    [Object.assign(Object.create(null), { a: 1 }), '{"a":1}'],
  ]);
  for (const [value, text] of cases) assert.equal(engineJson(value), text, String(text));
  // Deep nesting and cycles end in a refusal, not a stack overflow.
  let deep = /** @type {any} */ ([]);
  for (let i = 0; i < 100000; i++) deep = [deep];
  assert.ok(engineJson(deep).endsWith(`[${REFUSED}]${']'.repeat(199)}`));
  const cyclic = /** @type {any} */ ({});
  cyclic.self = cyclic;
  assert.ok(engineJson(cyclic).includes(REFUSED));
});

test('Toolgate.evaluate(object) decides on the values given, never on JSON.stringify\'s rewrite', () => {
  for (const amount of [Infinity, -Infinity, NaN, undefined]) {
    const d = gate.evaluate({ name: 'pay', arguments: { amount } });
    assert.equal(d.ok, false, String(amount));
    assert.equal(d.code, 'BAD_REQUEST');
    assert.equal(d.json, engine(callJson('pay', { amount })));
  }
  assert.equal(gate.evaluate({ name: 'pay', arguments: { amount: null } }).ok, true);
  assert.equal(gate.evaluate({ name: 'pay', arguments: { amount: -0 } }).ok, true);
});
