#!/usr/bin/env node
// An example MCP server over stdio: the 34-tool seed catalog, each handler
// only recording that it ran, wrapped by the toolgate middleware.
//
//   node examples/seed-server/server.mjs [--catalog FILE] [--policy FILE]
//   env TOOLGATE_SURFACE=confirming|direct   the surface of this route
//       TOOLGATE_SCOPES=a,b                  granted scopes (unset: no scope check)
//       TOOLGATE_RAN_LOG=FILE                handlers append {"tool","arguments"} lines here
import { appendFileSync, readFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Toolgate } from 'toolgate';
import { guardServer, unknownToolResult } from 'toolgate/mcp';

const arg = (/** @type {string} */ name) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const catalogPath = arg('--catalog') ?? new URL('./seed-catalog.json', import.meta.url).pathname;
const policyPath = arg('--policy');
const catalogText = readFileSync(catalogPath, 'utf8');
const catalog = JSON.parse(catalogText);

// The handlers: each records that it ran (and with what), nothing else.
const ranLog = process.env.TOOLGATE_RAN_LOG;
const handlers = new Map(catalog.tools.map((/** @type {any} */ tool) => [tool.name, async (/** @type {any} */ args) => {
  if (ranLog) appendFileSync(ranLog, JSON.stringify({ tool: tool.name, arguments: args ?? {} }) + '\n');
  return { content: [{ type: 'text', text: `${tool.name} ran` }] };
}]));

const server = new Server({ name: catalog.server?.name ?? 'seed-server', version: catalog.server?.version ?? '0.0.0' }, { capabilities: { tools: {} } });
// A stub does not produce the documented outputs, so it publishes no outputSchema.
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: catalog.tools.map((/** @type {any} */ t) => ({ name: t.name, title: t.title, description: t.description, inputSchema: t.inputSchema, annotations: t.annotations })),
}));
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const handler = handlers.get(request.params.name);
  if (!handler) return unknownToolResult(request.params.name); // as McpServer answers
  return handler(request.params.arguments);
});

const gate = await Toolgate.load({ catalog: catalogText, policy: policyPath ? readFileSync(policyPath, 'utf8') : undefined });
const surface = process.env.TOOLGATE_SURFACE ?? 'confirming';
const scopes = process.env.TOOLGATE_SCOPES;
guardServer(server, {
  gate,
  // The seed runtime's contract, which this example reproduces: the model
  // sends `confirmed: true` only after the person said yes in the
  // conversation, and this server trusts it to. The middleware's default
  // ('none') never counts the model's word; 'argument' is that trust, asked
  // for here on purpose. A server whose client can be asked (elicitation)
  // should keep 'none' and confirm through the host instead.
  confirmation: 'argument',
  // Per request: scopes from the transport's auth info when there is one,
  // else from this route's configuration.
  context: (extra) => ({
    surface,
    // null: no scope check (a key left undefined is refused, never read as absent).
    scopes: extra?.authInfo ? extra.authInfo.scopes : scopes === undefined ? null : scopes.split(',').filter(Boolean),
  }),
});
await server.connect(new StdioServerTransport());
