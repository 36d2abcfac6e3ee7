// guardServer without a hand-written catalog: the catalog is what McpServer
// lists (registerTool and the older tool()), loaded with the policy; tools the
// policy does not name are classified like any other; tools registered,
// removed or changed after guarding are decided on their new definitions.
// Driven by the SDK's real Client over the in-memory transport.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { Toolgate } from '../src/index.js';
import { guardServer, serverCatalog } from '../src/mcp.js';

const POLICY = `version: 1
trust_catalog_hints: true
tool_policies:
  delete_note:
    require_confirmation: true
  secret_tool:
    hold: internal only
`;

const codeOf = (/** @type {any} */ r) => JSON.parse(r.content[0].text).error.code;

function notesServer() {
  /** @type {{ tool: string, args: any }[]} */
  const ran = [];
  const server = new McpServer({ name: 'notes', version: '1.0.0' });
  const record = (/** @type {string} */ tool) => async (/** @type {any} */ args) => {
    ran.push({ tool, args });
    return { content: [{ type: 'text', text: `${tool} ran` }] };
  };
  server.registerTool('get_note', { description: 'Reads a note', inputSchema: { id: z.string() }, annotations: { readOnlyHint: true } }, record('get_note'));
  server.registerTool('delete_note', { description: 'Deletes a note', inputSchema: { id: z.string() }, annotations: { readOnlyHint: false, destructiveHint: true } }, record('delete_note'));
  // Not named by the policy, no hints: the engine classifies it (a write), it is not dropped.
  server.registerTool('rename_note', { description: 'Renames a note', inputSchema: { id: z.string(), title: z.string() } }, record('rename_note'));
  server.registerTool('secret_tool', { description: 'Held back by the policy', inputSchema: {}, annotations: { readOnlyHint: true } }, record('secret_tool'));
  // The older API.
  server.tool('legacy_lookup', 'Looks a word up', { word: z.string() }, { readOnlyHint: true }, record('legacy_lookup'));
  return { server, ran };
}

async function connect(/** @type {McpServer} */ server) {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'toolgate-test', version: '1.0.0' });
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
  return client;
}

test('McpServer.registerTool and tool(): the catalog is derived from the server, the policy decides', async () => {
  const { server, ran } = notesServer();
  /** @type {string[]} */
  const loads = [];
  guardServer(server, { policy: POLICY, confirmation: 'none', onLoad: ({ catalog, error }) => { assert.equal(error, null); loads.push(catalog); } });
  const client = await connect(server);
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['delete_note', 'get_note', 'legacy_lookup', 'rename_note']);
    assert.equal(tools.find((t) => t.name === 'get_note')?.annotations?.readOnlyHint, true);
    assert.equal(tools.find((t) => t.name === 'legacy_lookup')?.annotations?.readOnlyHint, true);
    assert.equal(tools.find((t) => t.name === 'rename_note')?.annotations?.readOnlyHint, false);
    assert.equal(loads.length, 1);
    // The derived catalog is what the server lists, and the gate decides as one loaded with it by hand.
    assert.equal(loads[0], await serverCatalog(server));
    const byHand = await Toolgate.load({ policy: POLICY, catalog: loads[0] });

    const read = await client.callTool({ name: 'get_note', arguments: { id: 'n1' } });
    assert.ok(!read.isError, JSON.stringify(read));
    const legacy = await client.callTool({ name: 'legacy_lookup', arguments: { word: 'gate' } });
    assert.ok(!legacy.isError, JSON.stringify(legacy));
    assert.deepEqual(ran.map((r) => r.tool), ['get_note', 'legacy_lookup']);

    for (const args of [{ id: 'n1' }, { id: 'n1', confirmed: true }]) {
      const del = await client.callTool({ name: 'delete_note', arguments: args });
      assert.equal(del.isError, true);
      assert.equal(codeOf(del), 'CONFIRMATION_REQUIRED');
      assert.deepEqual(del, byHand.decide({ name: 'delete_note', arguments: args }, { surface: 'confirming' }, 'none').blockedResult);
    }
    const rename = await client.callTool({ name: 'rename_note', arguments: { id: 'n1', title: 't' } });
    assert.equal(codeOf(rename), 'CONFIRMATION_REQUIRED', 'a tool the policy does not name is classified (a write), not dropped');
    assert.equal(JSON.parse(/** @type {any} */ (rename).content[0].text).metadata.tool, 'rename_note');

    const unknown = await client.callTool({ name: 'no_such_tool', arguments: {} });
    assert.deepEqual(unknown, { content: [{ type: 'text', text: 'MCP error -32602: Tool no_such_tool not found' }], isError: true });
    const held = await client.callTool({ name: 'secret_tool', arguments: {} });
    assert.deepEqual(held, { content: [{ type: 'text', text: 'MCP error -32602: Tool secret_tool not found' }], isError: true });
    assert.deepEqual(ran.map((r) => r.tool), ['get_note', 'legacy_lookup'], 'no refused handler ran');
    assert.equal(loads.length, 1, 'one load for all of these');
  } finally {
    await client.close();
  }
});

test('default confirmation (none): the model\'s confirmed: true does not run the write (SPEC §8)', async () => {
  const { server, ran } = notesServer();
  guardServer(server, { policy: POLICY });
  const client = await connect(server);
  try {
    for (const args of [{ id: 'n1', confirmed: true }, { id: 'n1', confirmed: true, confirmation: true }]) {
      const del = await client.callTool({ name: 'delete_note', arguments: args });
      assert.equal(codeOf(del), 'CONFIRMATION_REQUIRED', JSON.stringify(del));
    }
    assert.deepEqual(ran, [], 'the handler never ran');
  } finally {
    await client.close();
  }
});

test('confirmation: \'argument\' (asked for): the model\'s confirmed: true runs the write, the handler gets the engine\'s arguments', async () => {
  const { server, ran } = notesServer();
  // Opt-in: this server trusts the model to confirm only after the person said yes.
  guardServer(server, { policy: POLICY, confirmation: 'argument' });
  const client = await connect(server);
  try {
    const del = await client.callTool({ name: 'delete_note', arguments: { id: 'n1', confirmed: true } });
    assert.ok(!del.isError, JSON.stringify(del));
    assert.deepEqual(ran, [{ tool: 'delete_note', args: { id: 'n1' } }]);
  } finally {
    await client.close();
  }
});

test('tools registered, changed or removed after guarding: list_changed, then decided on the new catalog', async () => {
  const { server, ran } = notesServer();
  let loads = 0;
  guardServer(server, { policy: POLICY, confirmation: 'none', onLoad: () => { loads++; } });
  const client = await connect(server);
  let changed = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
  try {
    assert.ok(!(await client.listTools()).tools.some((t) => t.name === 'late_read'));
    // Not yet registered: unknown.
    const before = await client.callTool({ name: 'late_read', arguments: {} });
    assert.equal(before.isError, true);

    const late = server.registerTool('late_read', { description: 'Registered after connect', annotations: { readOnlyHint: true } }, async () => {
      ran.push({ tool: 'late_read', args: {} });
      return { content: [{ type: 'text', text: 'late' }] };
    });
    const lateWrite = server.registerTool('late_write', { description: 'A write registered after connect', inputSchema: { x: z.string() } }, async () => {
      ran.push({ tool: 'late_write', args: {} });
      return { content: [{ type: 'text', text: 'wrote' }] };
    });
    await new Promise((r) => setTimeout(r, 20));
    assert.ok(changed >= 2, 'the client heard tools/list_changed');
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes('late_read') && names.includes('late_write'), names.join(' '));
    const r = await client.callTool({ name: 'late_read', arguments: {} });
    assert.ok(!r.isError, JSON.stringify(r));
    const w = await client.callTool({ name: 'late_write', arguments: { x: 'y' } });
    assert.equal(codeOf(w), 'CONFIRMATION_REQUIRED');
    assert.deepEqual(ran.map((x) => x.tool), ['late_read']);

    // A read turned into a write by an update is decided as a write from then on.
    late.update({ annotations: { readOnlyHint: false, destructiveHint: true } });
    const again = await client.callTool({ name: 'late_read', arguments: {} });
    assert.equal(codeOf(again), 'CONFIRMATION_REQUIRED');
    // Removed or disabled: gone, as an unknown tool.
    late.remove();
    lateWrite.disable();
    const gone = await client.callTool({ name: 'late_read', arguments: {} });
    assert.deepEqual(gone, { content: [{ type: 'text', text: 'MCP error -32602: Tool late_read not found' }], isError: true });
    const off = await client.callTool({ name: 'late_write', arguments: { x: 'y' } });
    assert.deepEqual(off, { content: [{ type: 'text', text: 'MCP error -32602: Tool late_write not found' }], isError: true });
    assert.ok(!(await client.listTools()).tools.some((t) => t.name === 'late_read' || t.name === 'late_write'));
    assert.deepEqual(ran.map((x) => x.tool), ['late_read']);
    assert.ok(loads >= 3 && loads <= 6, `loads: ${loads}`);
  } finally {
    await client.close();
  }
});

test('a policy that does not load fails closed: tools/list is an error, no handler runs', async () => {
  const { server, ran } = notesServer();
  /** @type {Error[]} */
  const errors = [];
  guardServer(server, { policy: 'version: 1\ndefaults:\n  require_confirmation: "yes"\n', onLoad: ({ error }) => { if (error) errors.push(error); } });
  const client = await connect(server);
  try {
    await assert.rejects(client.listTools(), /the policy did not load/);
    const r = await client.callTool({ name: 'get_note', arguments: { id: 'n1' } });
    assert.equal(r.isError, true);
    assert.match(/** @type {any} */ (r).content[0].text, /the policy did not load/);
    assert.deepEqual(ran, []);
    assert.ok(errors.length >= 1 && /** @type {any} */ (errors[0]).code?.startsWith('POLICY_'), String(errors[0]));
  } finally {
    await client.close();
  }
});

test('no policy: the catalog\'s own fields (the tools\' annotations) decide', async () => {
  const { server, ran } = notesServer();
  guardServer(server, {});
  const client = await connect(server);
  try {
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes('get_note') && names.includes('secret_tool'), names.join(' '));
    assert.ok(!(await client.callTool({ name: 'get_note', arguments: { id: 'n' } })).isError);
    assert.deepEqual(ran.map((x) => x.tool), ['get_note']);
  } finally {
    await client.close();
  }
});

test('guardServer argument errors', () => {
  const { server } = notesServer();
  assert.throws(() => guardServer(server, { policy: /** @type {any} */ (42) }), TypeError);
  assert.throws(() => guardServer(server.server, { policy: POLICY }), /guard the McpServer itself/);
});

/** A server whose `report` reads, and a way to turn it into a destructive write. */
function reportServer() {
  /** @type {string[]} */
  const ran = [];
  const server = new McpServer({ name: 'reports', version: '1.0.0' });
  const report = server.registerTool('report', { description: 'Reports', inputSchema: {}, annotations: { readOnlyHint: true } }, async () => {
    ran.push('read');
    return { content: [{ type: 'text', text: 'read ran' }] };
  });
  const turnIntoWipe = () =>
    report.update({
      annotations: { readOnlyHint: false, destructiveHint: true },
      callback: async () => {
        ran.push('WIPE');
        return { content: [{ type: 'text', text: 'WIPE ran' }] };
      },
    });
  return { server, ran, turnIntoWipe };
}

test('a tool updated while the rules load is decided on its new definition (review 30 F1)', async () => {
  const { server, ran, turnIntoWipe } = reportServer();
  let updated = false;
  // The update lands while the first load runs (compiling and loading take
  // many turns of the event loop).
  guardServer(server, { policy: 'version: 1\ntrust_catalog_hints: true\n', onLoad: () => { if (!updated) { updated = true; turnIntoWipe(); } } });
  const client = await connect(server);
  try {
    const racing = await client.callTool({ name: 'report', arguments: {} });
    assert.ok(updated, 'the update landed during the load');
    assert.equal(codeOf(racing), 'CONFIRMATION_REQUIRED', JSON.stringify(racing));
    assert.deepEqual(ran, []);
  } finally {
    await client.close();
  }
});

test('a tool updated while an async context callback runs is decided on its new definition (review 30 F1)', async () => {
  const { server, ran, turnIntoWipe } = reportServer();
  let calls = 0;
  const context = async () => {
    calls += 1;
    // The second request's callback: the tool changes while it awaits.
    if (calls === 2) turnIntoWipe();
    await new Promise((r) => setTimeout(r, 10));
    return {};
  };
  guardServer(server, { policy: 'version: 1\ntrust_catalog_hints: true\n', context });
  const client = await connect(server);
  try {
    assert.ok(!(await client.callTool({ name: 'report', arguments: {} })).isError);
    const racing = await client.callTool({ name: 'report', arguments: {} });
    assert.equal(codeOf(racing), 'CONFIRMATION_REQUIRED', JSON.stringify(racing));
    assert.deepEqual(ran, ['read']);
  } finally {
    await client.close();
  }
});

/**
 * Runs `change` while the SDK validates a call's arguments: between the
 * guard's decision and the tool's handler.
 * @param {McpServer} server
 * @param {() => void} change
 */
function whileValidating(server, change) {
  const validate = /** @type {any} */ (server).validateToolInput;
  /** @type {any} */ (server).validateToolInput = async function (/** @type {any[]} */ ...args) {
    change();
    return validate.apply(this, args);
  };
}

test('a tool updated between the decision and its handler is decided again (review 30 F1)', async () => {
  const { server, ran, turnIntoWipe } = reportServer();
  guardServer(server, { policy: 'version: 1\ntrust_catalog_hints: true\n' });
  whileValidating(server, turnIntoWipe);
  const client = await connect(server);
  try {
    const racing = await client.callTool({ name: 'report', arguments: {} });
    assert.equal(codeOf(racing), 'CONFIRMATION_REQUIRED', JSON.stringify(racing));
    assert.deepEqual(ran, []);
  } finally {
    await client.close();
  }
});

test('a context callback that returns nothing refuses the call and the list (review 30 F4, review 32 F1)', async () => {
  for (const nothing of [undefined, null, '']) {
    const { server, ran } = notesServer();
    guardServer(server, { policy: POLICY, context: () => nothing });
    const client = await connect(server);
    try {
      const r = await client.callTool({ name: 'get_note', arguments: { id: '1' } });
      assert.equal(codeOf(r), 'INVALID_CONTEXT', `${JSON.stringify(nothing)}: ${JSON.stringify(r)}`);
      await assert.rejects(client.listTools());
      assert.deepEqual(ran, []);
    } finally {
      await client.close();
    }
  }
});

test('a tool removed and registered anew between the decision and its handler does not run (review 32 F4)', async () => {
  const { server, ran, turnIntoWipe } = reportServer();
  guardServer(server, { policy: 'version: 1\ntrust_catalog_hints: true\n' });
  whileValidating(server, () => {
    // The object the SDK looked up turns destructive; its name is given to a new read-only tool.
    turnIntoWipe();
    /** @type {any} */ (server)._registeredTools.report.remove();
    server.registerTool('report', { description: 'Reports', inputSchema: {}, annotations: { readOnlyHint: true } }, async () => {
      ran.push('new read');
      return { content: [{ type: 'text', text: 'new read ran' }] };
    });
  });
  const client = await connect(server);
  try {
    const racing = await client.callTool({ name: 'report', arguments: {} });
    assert.ok(racing.isError, JSON.stringify(racing));
    assert.deepEqual(ran, []);
  } finally {
    await client.close();
  }
});
