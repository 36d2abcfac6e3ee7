// An MCP server with two tools, guarded by toolgate: tools/list shows what the
// policy exposes, and every tools/call is decided by the policy before the
// tool's handler runs.   npm install toolgate @modelcontextprotocol/sdk zod
import { readFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { guardServer } from 'toolgate/mcp';
import { z } from 'zod';

const server = new McpServer({ name: 'orders', version: '1.0.0' });

server.registerTool('get_order', {
  description: 'Look up an order by its id',
  inputSchema: { order_id: z.string() },
  annotations: { readOnlyHint: true },
}, async ({ order_id }) => ({
  content: [{ type: 'text', text: JSON.stringify({ order_id, status: 'delivered', total: 42.5 }) }],
}));

server.registerTool('refund_order', {
  description: 'Refund an order in full',
  inputSchema: { order_id: z.string() },
  annotations: { readOnlyHint: false, destructiveHint: true },
}, async ({ order_id }) => {
  console.error(`refund_order: refunded ${order_id}`);   // stderr: stdout carries the MCP messages
  return { content: [{ type: 'text', text: `refunded ${order_id}` }] };
});

// The catalog is derived from the tools registered above; policy.yaml says what each may do.
// confirmation: 'argument' makes the model's own `confirmed: true` count, which this quick start
// means: its client plays a model that sends it only after the person said yes. Without it
// ('none', the default) the model's word never counts (SPEC §8) and refund_order cannot run
// here; a server whose client can be asked should keep 'none' and confirm through the host.
guardServer(server, { policy: readFileSync(new URL('./policy.yaml', import.meta.url), 'utf8'), confirmation: 'argument' });
await server.connect(new StdioServerTransport());
