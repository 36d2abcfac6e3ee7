// A real MCP server on the official TypeScript SDK with 60 tools listed in
// pages of 25 (cursor pagination): a third say they only read, a third say
// they write, a third say nothing (MCP treats those as writes). Every call
// it runs is appended to a JSON-lines log, so a test can tell what reached it.
//
//   node many_tools_server.mjs LOG_FILE
import { appendFileSync } from "node:fs";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const log = process.argv[2];
const PAGE = 25;
const kinds = ["reads", "writes", "silent"];
const tools = Array.from({ length: 60 }, (_, i) => {
  const kind = kinds[i % 3];
  const tool = {
    name: `tool_${String(i).padStart(2, "0")}_${kind}`,
    description: `Tool ${i} (${kind}).`,
    inputSchema: { type: "object", properties: { value: { type: "string" } } },
  };
  if (kind === "reads") tool.annotations = { readOnlyHint: true };
  if (kind === "writes") tool.annotations = { readOnlyHint: false, destructiveHint: true };
  return tool;
});

const server = new Server({ name: "many-tools", version: "1.0.0" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async (request) => {
  const start = Number(request.params?.cursor ?? 0);
  const next = start + PAGE;
  return { tools: tools.slice(start, next), ...(next < tools.length ? { nextCursor: String(next) } : {}) };
});
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  appendFileSync(log, `${JSON.stringify({ tool: request.params.name })}\n`);
  return { content: [{ type: "text", text: `ran ${request.params.name}` }] };
});
await server.connect(new StdioServerTransport());
