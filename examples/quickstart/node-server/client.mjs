// The test's MCP client for server.mjs (check.sh copies it next to the installed quick start):
//   node client.mjs
// Starts `node server.mjs` with the SDK's real Client over stdio and checks that tools/list
// shows both tools, get_order runs, refund_order without confirmation is refused and its
// handler does not run, an unknown tool is refused, and refund_order with the person's
// confirmation (confirmed: true) runs.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const fail = (msg, detail) => { console.error(`FAIL: ${msg}${detail === undefined ? '' : `\n  ${JSON.stringify(detail).slice(0, 2000)}`}`); process.exit(1); };
const ok = (msg) => console.log(`ok: ${msg}`);

const transport = new StdioClientTransport({ command: process.execPath, args: ['server.mjs'], stderr: 'pipe' });
let log = '';   // the server's stderr: refund_order's handler logs each refund there
transport.stderr.on('data', (chunk) => { log += chunk; });
const client = new Client({ name: 'toolgate-quickstart-check', version: '1.0.0' });
await client.connect(transport);
ok('connected: node server.mjs');

const text = (r) => (r.content ?? []).map((c) => c.text ?? '').join('');
try {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  if (JSON.stringify(names) !== JSON.stringify(['get_order', 'refund_order'])) fail('tools/list is not get_order and refund_order', names);
  ok(`tools/list: ${names.join(', ')}`);

  const got = await client.callTool({ name: 'get_order', arguments: { order_id: 'A-1001' } });
  if (got.isError || !text(got).includes('"status":"delivered"')) fail('get_order did not run', got);
  ok(`get_order ran: ${text(got)}`);

  const refused = await client.callTool({ name: 'refund_order', arguments: { order_id: 'A-1001' } });
  if (refused.isError !== true || !text(refused).includes('CONFIRMATION_REQUIRED')) fail('refund_order without confirmation was not refused with CONFIRMATION_REQUIRED', refused);
  ok('refund_order without confirmation: refused (CONFIRMATION_REQUIRED)');

  const unknown = await client.callTool({ name: 'delete_everything', arguments: {} }).catch((e) => ({ thrown: String(e) }));
  if (!(unknown.thrown || unknown.isError === true)) fail('an unknown tool was not refused', unknown);
  ok(`unknown tool refused: ${unknown.thrown ?? text(unknown)}`);

  const confirmed = await client.callTool({ name: 'refund_order', arguments: { order_id: 'B-2002', confirmed: true } });
  if (confirmed.isError || text(confirmed) !== 'refunded B-2002') fail('refund_order with confirmed: true did not run', confirmed);
  ok('refund_order with confirmed: true ran');

  // stderr is one ordered stream: once B-2002's line is there, an A-1001 line would be before it.
  const refunds = () => log.split('\n').filter((l) => l.startsWith('refund_order: refunded'));
  for (let waited = 0; !refunds().includes('refund_order: refunded B-2002') && waited < 5000; waited += 50) await new Promise((r) => setTimeout(r, 50));
  if (JSON.stringify(refunds()) !== JSON.stringify(['refund_order: refunded B-2002'])) fail("refund_order's handler did not run exactly once, for the confirmed call", { refunds: refunds(), log });
  ok("refund_order's handler ran once, for the confirmed call only: A-1001 was never refunded");
} finally {
  await client.close();
}
