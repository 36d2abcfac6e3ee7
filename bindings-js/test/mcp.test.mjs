// The middleware with the SDK's real client: the example server over stdio,
// and McpServer over the in-memory transport.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { connect } from './lib/connect.mjs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, CallToolResultSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { Toolgate } from '../src/index.js';
import { declaresFormElicitation, guardServer } from '../src/mcp.js';
import { loadVectorFile, pkgDir, vectorsDir } from './lib/vectors.mjs';

const fixtures = join(vectorsDir, 'fixtures');
const seedPath = join(fixtures, 'seed-catalog.json');
const seed = JSON.parse(readFileSync(seedPath, 'utf8'));
const readTools = seed.tools.filter((t) => t.effect === 'read').map((t) => t.name).sort();

test('the example\'s copy of the seed catalog is the repo\'s', () => {
  assert.equal(readFileSync(join(pkgDir, 'examples/seed-server/seed-catalog.json'), 'utf8'), readFileSync(seedPath, 'utf8'));
});

async function startSeedServer(/** @type {Record<string, string>} */ env) {
  const dir = mkdtempSync(join(tmpdir(), 'toolgate-mcp-'));
  const ranLog = join(dir, 'ran.jsonl');
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(pkgDir, 'examples/seed-server/server.mjs'), '--catalog', seedPath],
    env: { PATH: process.env.PATH ?? '', TOOLGATE_RAN_LOG: ranLog, ...env },
    stderr: 'inherit',
    cwd: pkgDir,
  });
  const client = new Client({ name: 'toolgate-test', version: '1.0.0' });
  await client.connect(transport);
  const ran = () => existsSync(ranLog) ? readFileSync(ranLog, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];
  return { client, ran };
}

test('stdio, confirming surface: reads pass, a send without confirmed: true never reaches its handler', async () => {
  const { client, ran } = await startSeedServer({ TOOLGATE_SURFACE: 'confirming', TOOLGATE_SCOPES: 'mcp:read,mcp:write' });
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    assert.ok(names.includes('send_whatsapp') && names.includes('get_capabilities'));
    assert.ok(!names.includes('bob_ask'), 'bob:consult not granted: not listed');
    const send = tools.find((t) => t.name === 'send_whatsapp');
    assert.equal(send.annotations.readOnlyHint, false);
    assert.equal(tools.find((t) => t.name === 'get_capabilities').annotations.readOnlyHint, true);

    const read = await client.callTool({ name: 'get_capabilities', arguments: {} });
    assert.ok(!read.isError, JSON.stringify(read));
    assert.deepEqual(ran().map((r) => r.tool), ['get_capabilities']);

    const args = { to: '+5511999999999', text: 'oi', idempotency_key: 'send-0001' };
    const blocked = await client.callTool({ name: 'send_whatsapp', arguments: args });
    assert.equal(blocked.isError, true);
    const decision = JSON.parse(blocked.content[0].text);
    assert.equal(decision.error.code, 'CONFIRMATION_REQUIRED');
    // The engine's blocked result: the seed catalog declares an outputSchema
    // for send_whatsapp, so the decision is text only.
    const local = await Toolgate.load({ catalog: readFileSync(seedPath, 'utf8') });
    assert.deepEqual(blocked, local.decide({ name: 'send_whatsapp', arguments: args }, { surface: 'confirming', scopes: ['mcp:read', 'mcp:write'] }, 'argument').blockedResult);
    assert.equal('structuredContent' in blocked, false);
    const stringTrue = await client.callTool({ name: 'send_whatsapp', arguments: { ...args, confirmed: 'true' } });
    assert.equal(stringTrue.isError, true);
    assert.deepEqual(ran().map((r) => r.tool), ['get_capabilities'], 'the send handler never ran');

    // Confirmed: it runs, without the engine field its schema does not declare.
    const sent = await client.callTool({ name: 'send_whatsapp', arguments: { ...args, confirmed: true, confirmation: true } });
    assert.ok(!sent.isError, JSON.stringify(sent));
    const last = ran().at(-1);
    assert.equal(last.tool, 'send_whatsapp');
    assert.deepEqual(last.arguments, { ...args, confirmed: true });

    // Not granted: SCOPE_DENIED, carried as the decision.
    const denied = await client.callTool({ name: 'bob_ask', arguments: { conversation_id: 'c1', question: 'q' } });
    assert.equal(JSON.parse(denied.content[0].text).error.code, 'SCOPE_DENIED');
    assert.equal(ran().length, 2);
  } finally {
    await client.close();
  }
});

test('stdio, direct surface: only the read tools are listed; others answer as unknown tools', async () => {
  const { client, ran } = await startSeedServer({ TOOLGATE_SURFACE: 'direct' });
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), readTools);
    for (const t of tools) assert.equal(t.annotations.readOnlyHint, true);
    const hidden = await client.callTool({ name: 'send_whatsapp', arguments: { to: 'x', text: 'y', confirmed: true, idempotency_key: 'send-0001' } });
    const unknown = await client.callTool({ name: 'no_such_tool', arguments: {} });
    assert.deepEqual(hidden, { content: [{ type: 'text', text: 'MCP error -32602: Tool send_whatsapp not found' }], isError: true });
    assert.equal(unknown.content[0].text, 'MCP error -32602: Tool no_such_tool not found');
    assert.deepEqual(ran(), []);
    const read = await client.callTool({ name: 'get_inbox_summary', arguments: {} });
    assert.ok(!read.isError);
    assert.deepEqual(ran().map((r) => r.tool), ['get_inbox_summary']);
  } finally {
    await client.close();
  }
});

// McpServer (zod tools) in memory: a hidden tool answers byte for byte as the
// SDK answers a tool it does not have; strip-fields before the handler.
const plansPolicy = readFileSync(join(fixtures, 'plans-policy.yaml'), 'utf8');
const plansCatalog = readFileSync(join(fixtures, 'plans-catalog.json'), 'utf8');

function plansServer(/** @type {any[]} */ ran) {
  const server = new McpServer({ name: 'plans', version: '1.0.0' });
  const record = (/** @type {string} */ name) => async (/** @type {any} */ args) => {
    ran.push({ name, args });
    return { content: [{ type: 'text', text: `${name} ran` }] };
  };
  server.registerTool('consultar_plano', { inputSchema: { customer_id: z.string() } }, record('consultar_plano'));
  server.registerTool('alterar_plano', { inputSchema: { customer_id: z.string(), new_plan_id: z.string().optional() } }, record('alterar_plano'));
  server.registerTool('cancelar_conta', { inputSchema: { customer_id: z.string(), confirmed: z.boolean().optional() } }, record('cancelar_conta'));
  return server;
}

test('McpServer: hidden tool = the SDK\'s unknown-tool answer; confirmed stripped where undeclared', async () => {
  const gate = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog });
  const ran = [];
  let surface = 'direct';
  // 'argument' asked for explicitly (the default is 'none'): this test runs a
  // write the model marked confirmed: true, the seed runtime's path.
  const guarded = guardServer(plansServer(ran), { gate, context: () => ({ surface }), confirmation: 'argument' });
  const client = await connect(guarded);
  // The same SDK, unguarded, asked for a tool it does not have.
  const bareServer = new McpServer({ name: 'bare', version: '1' });
  bareServer.registerTool('other', { inputSchema: {} }, async () => ({ content: [] }));
  const bareClient = await connect(bareServer);
  try {
    const listed = (await client.listTools()).tools.map((t) => t.name);
    assert.deepEqual(listed, ['consultar_plano']);
    const hidden = await client.callTool({ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD', confirmed: true } });
    const sdkUnknown = await bareClient.callTool({ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD', confirmed: true } });
    assert.deepEqual(hidden, sdkUnknown);
    assert.deepEqual(ran, []);

    surface = 'confirming';
    const blocked = await client.callTool({ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD' } });
    assert.equal(blocked.isError, true);
    assert.equal(blocked.structuredContent.error.code, 'CONFIRMATION_REQUIRED');
    assert.equal(blocked.content[0].text, gate.evaluate({ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD' } }).json);
    const ok = await client.callTool({ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD', confirmed: true } });
    assert.ok(!ok.isError, JSON.stringify(ok));
    assert.deepEqual(ran.at(-1), { name: 'alterar_plano', args: { customer_id: '1', new_plan_id: 'GOLD' } });
    // cancelar_conta declares `confirmed`: it reaches the handler.
    await client.callTool({ name: 'cancelar_conta', arguments: { customer_id: '1', confirmed: true } });
    assert.deepEqual(ran.at(-1), { name: 'cancelar_conta', args: { customer_id: '1', confirmed: true } });
    // Tools registered after guarding are guarded too.
    assert.equal((await client.listTools()).tools.length, 3);
  } finally {
    await client.close();
    await bareClient.close();
  }
});

test("confirmation 'argument' never takes the model's word from a client that declared form elicitation", async () => {
  // SPEC §8: such a client can be asked; the middleware does not ask, so the
  // write waits for a person. `elicitation: {}` means form; URL-only cannot
  // be asked a form. A 2026-07-28 request declares it in its own _meta.
  const gate = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog });
  const args = { customer_id: '1', new_plan_id: 'GOLD', confirmed: true };
  const cases = [
    { declared: { elicitation: {} }, runs: false },
    { declared: { elicitation: { form: {} } }, runs: false },
    { declared: { elicitation: { url: {} } }, runs: true },
    { declared: undefined, meta: { 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } }, runs: false },
    { declared: undefined, runs: true },
  ];
  for (const { declared, meta, runs } of cases) {
    /** @type {any[]} */
    const ran = [];
    const guarded = guardServer(plansServer(ran), { gate, context: () => ({ surface: 'confirming' }), confirmation: 'argument' });
    const client = await connect(guarded, undefined, declared);
    try {
      const result = await client.callTool({ name: 'alterar_plano', arguments: args, ...(meta ? { _meta: meta } : {}) });
      const label = JSON.stringify({ declared, meta });
      if (runs) {
        assert.ok(!result.isError, label);
        assert.deepEqual(ran, [{ name: 'alterar_plano', args: { customer_id: '1', new_plan_id: 'GOLD' } }], label);
      } else {
        assert.equal(/** @type {any} */ (result.structuredContent)?.error?.code, 'CONFIRMATION_REQUIRED', label);
        assert.deepEqual(ran, [], label);
      }
    } finally {
      await client.close();
    }
  }
});

test('declared form elicitation: the shared table of capability shapes (docs/spec.md §8)', () => {
  const table = JSON.parse(readFileSync(join(fixtures, 'form-elicitation.json'), 'utf8'));
  assert.ok(table.cases.length > 10);
  for (const { capabilities, declares_form } of table.cases) {
    assert.equal(declaresFormElicitation(capabilities), declares_form, JSON.stringify(capabilities));
  }
});

test("guardServer's options never come from Object.prototype (an inherited confirmation: 'argument' is refused)", async () => {
  const gate = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog });
  const proto = /** @type {any} */ (Object.prototype);
  const server = plansServer([]); // zod cannot build schemas under a polluted prototype
  proto.confirmation = 'argument';
  try {
    assert.throws(() => guardServer(server, { gate }), (e) => e instanceof TypeError && /`confirmation`/.test(e.message));
  } finally {
    delete proto.confirmation;
  }
  // A host's own defaults object is read.
  const ran = /** @type {any[]} */ ([]);
  const client = await connect(guardServer(plansServer(ran), Object.create({ gate, confirmation: 'argument', context: () => ({ surface: 'confirming' }) })));
  try {
    const ok = await client.callTool({ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD', confirmed: true } });
    assert.ok(!ok.isError, JSON.stringify(ok));
    assert.equal(ran.length, 1);
  } finally {
    await client.close();
  }
});

test('low-level Server: tools/call and tools/list that reach fallbackRequestHandler are decided and filtered, set before guarding or after', async () => {
  const gate = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog });
  const served = JSON.parse(plansCatalog).tools.map((/** @type {any} */ t) => ({ name: t.name, inputSchema: t.inputSchema ?? { type: 'object' } }));
  for (const when of ['before', 'after']) {
    /** @type {any[]} */
    const ran = [];
    const server = new Server({ name: 'relay', version: '1' }, { capabilities: { tools: {} } });
    // A relay: every method is served by the fallback handler.
    const relay = async (/** @type {any} */ request) => {
      if (request.method === 'tools/list') return { tools: served };
      if (request.method === 'tools/call') {
        ran.push({ name: request.params.name, args: request.params.arguments });
        return { content: [{ type: 'text', text: 'ran' }] };
      }
      throw new McpError(ErrorCode.MethodNotFound, request.method);
    };
    if (when === 'before') server.fallbackRequestHandler = relay;
    guardServer(server, { gate, context: () => ({ surface: 'direct' }) });
    if (when === 'after') server.fallbackRequestHandler = relay;
    const client = await connect(server);
    try {
      assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['consultar_plano', 'listar_planos'], when);
      const args = { customer_id: '1', new_plan_id: 'GOLD', confirmed: true };
      const hidden = await client.callTool({ name: 'alterar_plano', arguments: args });
      assert.equal(hidden.isError, true, when);
      // A name that is not a string is refused by the engine, not relayed.
      const odd = await client.request({ method: 'tools/call', params: { name: ['alterar_plano'], arguments: args } }, CallToolResultSchema);
      assert.equal(odd.isError, true, JSON.stringify(odd));
      assert.equal(JSON.parse(/** @type {any} */ (odd.content)[0].text).error.code, 'BAD_REQUEST');
      assert.deepEqual(ran, [], when);
      const read = await client.callTool({ name: 'consultar_plano', arguments: { customer_id: '1' } });
      assert.ok(!read.isError, JSON.stringify(read));
      assert.deepEqual(ran, [{ name: 'consultar_plano', args: { customer_id: '1' } }], when);
    } finally {
      await client.close();
    }
  }
});

test('low-level Server with its own unknown-tool answer: unknownTool makes a hidden tool answer exactly like a missing one', async () => {
  const gate = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog });
  const served = JSON.parse(plansCatalog).tools.map((/** @type {any} */ t) => ({ name: t.name, inputSchema: t.inputSchema ?? { type: 'object' } }));
  const missing = (/** @type {unknown} */ name) => ({ content: [{ type: 'text', text: `no tool called ${String(name)} here` }], isError: true });
  const server = new Server({ name: 'relay', version: '1' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: served }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    if (!served.some((/** @type {any} */ t) => t.name === request.params.name)) return missing(request.params.name);
    return { content: [{ type: 'text', text: 'ran' }] };
  });
  guardServer(server, { gate, context: () => ({ surface: 'direct' }), unknownTool: missing });
  const client = await connect(server);
  try {
    const hidden = await client.callTool({ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD' } });
    const absent = await client.callTool({ name: 'no_such_tool', arguments: {} });
    assert.deepEqual(hidden, missing('alterar_plano'));
    assert.deepEqual(absent, missing('no_such_tool'));
  } finally {
    await client.close();
  }
  assert.throws(() => guardServer(new Server({ name: 'x', version: '1' }, { capabilities: { tools: {} } }), { gate, unknownTool: /** @type {any} */ ('text') }), /unknownTool must be a function/);
});

test('default context: scopes from the request\'s auth info', async () => {
  const published = JSON.stringify({ formatVersion: 1, tools: [
    { name: 'read_a', description: 'reads', effect: 'read', scopes: ['a:read'], inputSchema: { type: 'object', properties: {} } },
  ] });
  const gate = await Toolgate.load({ catalog: published });
  const server = new McpServer({ name: 's', version: '1' });
  const ran = [];
  server.registerTool('read_a', { inputSchema: {} }, async () => { ran.push('read_a'); return { content: [] }; });
  guardServer(server, { gate });
  const without = await connect(server, { token: 't', clientId: 'c', scopes: ['b:read'] });
  const denied = await without.callTool({ name: 'read_a', arguments: {} });
  assert.equal(JSON.parse(denied.content[0].text).error.code, 'SCOPE_DENIED');
  assert.deepEqual((await without.listTools()).tools, []);
  await without.close();
  const server2 = new McpServer({ name: 's', version: '1' });
  server2.registerTool('read_a', { inputSchema: {} }, async () => { ran.push('read_a'); return { content: [] }; });
  guardServer(server2, { gate });
  const withScope = await connect(server2, { token: 't', clientId: 'c', scopes: ['a:read'] });
  const ok = await withScope.callTool({ name: 'read_a', arguments: {} });
  assert.ok(!ok.isError, JSON.stringify(ok));
  assert.deepEqual(ran, ['read_a']);
  await withScope.close();
});

test('no auth info: in memory (as over stdio) the default context does no scope check; the README\'s callback grants nothing', async () => {
  const published = JSON.stringify({ formatVersion: 1, tools: [
    { name: 'read_a', description: 'reads', effect: 'read', scopes: ['a:read'], inputSchema: { type: 'object', properties: {} } },
  ] });
  const gate = await Toolgate.load({ catalog: published });
  for (const [label, context, expected] of /** @type {const} */ ([
    ['default', undefined, 'ran'],
    ['README callback', (/** @type {any} */ extra) => ({ surface: 'confirming', scopes: extra?.authInfo?.scopes ?? [] }), 'SCOPE_DENIED'],
    // `scopes: token?.scopes` without a token: refused, never read as "no check".
    ['a key left undefined', (/** @type {any} */ extra) => ({ surface: 'confirming', scopes: extra?.authInfo?.scopes }), 'INVALID_CONTEXT'],
  ])) {
    const server = new McpServer({ name: 's', version: '1' });
    const ran = [];
    server.registerTool('read_a', { inputSchema: {} }, async () => { ran.push('read_a'); return { content: [] }; });
    guardServer(server, { gate, ...(context ? { context } : {}) });
    const client = await connect(server); // no authInfo on any request
    try {
      const r = await client.callTool({ name: 'read_a', arguments: {} });
      if (expected === 'ran') {
        assert.ok(!r.isError, `${label}: ${JSON.stringify(r)}`);
        assert.deepEqual(ran, ['read_a'], label);
      } else {
        assert.equal(JSON.parse(/** @type {any} */ (r).content[0].text).error.code, expected, label);
        assert.deepEqual(ran, [], label);
      }
    } finally {
      await client.close();
    }
  }
  // And with a token, the callback gives its scopes as the default does.
  const server = new McpServer({ name: 's', version: '1' });
  server.registerTool('read_a', { inputSchema: {} }, async () => ({ content: [] }));
  guardServer(server, { gate, context: (extra) => ({ surface: 'confirming', scopes: extra?.authInfo?.scopes ?? [] }) });
  const withScope = await connect(server, { token: 't', clientId: 'c', scopes: ['a:read'] });
  assert.ok(!(await withScope.callTool({ name: 'read_a', arguments: {} })).isError);
  await withScope.close();
});

test('over HTTP without a token the default context grants no scope (a route served without requireBearerAuth)', async () => {
  const published = JSON.stringify({ formatVersion: 1, tools: [
    { name: 'read_a', description: 'reads', effect: 'read', scopes: ['a:read'], inputSchema: { type: 'object', properties: {} } },
    { name: 'read_b', description: 'reads', effect: 'read', inputSchema: { type: 'object', properties: {} } },
  ] });
  const gate = await Toolgate.load({ catalog: published });
  const ran = [];
  // Stateless Streamable HTTP: a new McpServer and transport per request, as the SDK's example does.
  const http = createServer(async (req, res) => {
    const server = new McpServer({ name: 's', version: '1' });
    server.registerTool('read_a', { inputSchema: {} }, async () => { ran.push('read_a'); return { content: [] }; });
    server.registerTool('read_b', { inputSchema: {} }, async () => { ran.push('read_b'); return { content: [] }; });
    guardServer(server, { gate });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { void transport.close(); void server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise((resolve) => http.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (http.address());
  const client = new Client({ name: 't', version: '1' });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
    const denied = await client.callTool({ name: 'read_a', arguments: {} });
    assert.equal(JSON.parse(/** @type {any} */ (denied).content[0].text).error.code, 'SCOPE_DENIED');
    const ok = await client.callTool({ name: 'read_b', arguments: {} });
    assert.ok(!ok.isError, JSON.stringify(ok));
    assert.deepEqual(ran, ['read_b']);
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['read_b']);
  } finally {
    await client.close();
    await new Promise((resolve) => http.close(() => resolve(undefined)));
  }
});

test('blocked results are the engine\'s blocked_result bytes (tests/vectors/pipeline-output-schema.json), through the SDK\'s server and client', async () => {
  const file = loadVectorFile(join(vectorsDir, 'pipeline-output-schema.json'));
  const gate = await Toolgate.load({ policy: file.policy_text ?? undefined, catalog: file.catalog_text });
  const catalogTools = JSON.parse(file.catalog_text).tools;
  const cases = file.cases.filter((/** @type {any} */ c) => c.op === 'decide' && c.confirmation === 'none' && c.expect.blocked_result !== null);
  assert.ok(cases.length >= 2, 'a tool with an outputSchema and one without');
  const server = new McpServer({ name: 'o', version: '1' });
  const ran = [];
  // The server's tools as the catalog says (`report` declares an outputSchema).
  server.registerTool('report', { inputSchema: { q: z.string() }, outputSchema: { rows: z.array(z.any()) } }, async () => { ran.push('report'); return { content: [], structuredContent: { rows: [] } }; });
  server.registerTool('plain', { inputSchema: { q: z.string() } }, async () => { ran.push('plain'); return { content: [] }; });
  assert.deepEqual(catalogTools.map((/** @type {any} */ t) => [t.name, 'outputSchema' in t]), [['report', true], ['plain', false]]);
  guardServer(server, { gate, confirmation: 'none' });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  /** @type {any[]} */
  const wire = [];
  const send = serverSide.send.bind(serverSide);
  serverSide.send = (message, options) => { wire.push(JSON.stringify(message)); return send(message, options); };
  await server.connect(serverSide);
  const client = new Client({ name: 't', version: '1' });
  await client.connect(clientSide);
  try {
    await client.listTools(); // the client now validates `report`'s structured output
    for (const c of cases) {
      const got = await client.callTool({ name: c.call.name, arguments: c.call.arguments });
      // On the wire, the SDK server sent the engine's bytes as the result.
      const line = wire.at(-1);
      assert.ok(line.endsWith(`"result":${c.expect.blocked_result}}`) || line.includes(`"result":${c.expect.blocked_result},`), `${c.name}: ${line}`);
      // And the client got exactly that result.
      assert.deepEqual(got, JSON.parse(c.expect.blocked_result), c.name);
      assert.equal(got.content[0].text, c.expect.decision);
      assert.equal('structuredContent' in got, c.call.name === 'plain', c.name);
    }
    assert.deepEqual(ran, []);
  } finally {
    await client.close();
  }
});

test('guardServer confirmation: \'none\' (default) blocks a write even with the model\'s confirmed: true; \'argument\' (asked for) lets it count', async () => {
  const gate = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog });
  const args = { customer_id: '1', new_plan_id: 'GOLD', confirmed: true };
  for (const confirmation of /** @type {const} */ (['none', 'argument', undefined])) {
    const ran = [];
    const client = await connect(guardServer(plansServer(ran), { gate, context: () => ({ surface: 'confirming' }), ...(confirmation ? { confirmation } : {}) }));
    try {
      const r = await client.callTool({ name: 'alterar_plano', arguments: args });
      // SPEC §8: without the option the model's own confirmation never counts.
      if (confirmation !== 'argument') {
        const expected = gate.decide({ name: 'alterar_plano', arguments: args }, { surface: 'confirming' }, 'none');
        assert.equal(expected.decision.code, 'CONFIRMATION_REQUIRED');
        assert.deepEqual(r, expected.blockedResult);
        assert.deepEqual(ran, [], 'the handler never ran');
        // Reads still run, without the model's confirmed (declared or not, it never counts here).
        assert.ok(!(await client.callTool({ name: 'consultar_plano', arguments: { customer_id: '1' } })).isError);
        assert.deepEqual(ran, [{ name: 'consultar_plano', args: { customer_id: '1' } }]);
        // The declared field of a destructive tool cannot confirm it either.
        const cancel = await client.callTool({ name: 'cancelar_conta', arguments: { customer_id: '1', confirmed: true } });
        assert.equal(JSON.parse(cancel.content[0].text).error.code, 'CONFIRMATION_REQUIRED');
        assert.equal(ran.length, 1);
      } else {
        // Only where the host asked for it.
        assert.ok(!r.isError, JSON.stringify(r));
        assert.deepEqual(ran, [{ name: 'alterar_plano', args: { customer_id: '1', new_plan_id: 'GOLD' } }], 'forwarded exactly, without the undeclared field');
      }
    } finally {
      await client.close();
    }
  }
  assert.throws(() => guardServer(plansServer([]), { gate, confirmation: /** @type {any} */ ('person') }), TypeError);
  assert.throws(() => guardServer(plansServer([]), /** @type {any} */ ({ gate, structuredContent: 'auto' })), TypeError);
});
