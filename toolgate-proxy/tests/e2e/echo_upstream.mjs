// A bare MCP server over stdio (newline-delimited JSON-RPC, no SDK), for
// what an SDK would hide: `echo` answers with the exact `params` of the
// tools/call it received, `asks` answers with an MCP 2026-07-28 input
// request of its own (`resultType: "input_required"`). Both say they only
// read, unless ECHO_WRITES=1 (a redeploy that made `echo` destructive).
import { createInterface } from 'node:readline';

const tools = ['echo', 'asks'].map((name) => ({
  name,
  inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
  annotations: name === 'echo' && process.env.ECHO_WRITES === '1' ? { readOnlyHint: false, destructiveHint: true } : { readOnlyHint: true },
}));
const send = (message) => process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const { id, method, params = {} } = JSON.parse(line);
  if (id === undefined || method === undefined) continue;
  if (method === 'initialize') {
    send({ id, result: { protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'echo', version: '1' } } });
  } else if (method === 'tools/list') {
    send({ id, result: { tools } });
  } else if (method === 'tools/call' && params.name === 'echo') {
    send({ id, result: { content: [{ type: 'text', text: JSON.stringify(params) }] } });
  } else if (method === 'tools/call' && params.name === 'asks') {
    send({
      id,
      result: {
        resultType: 'input_required',
        inputRequests: { upstream_question: { method: 'elicitation/create', params: { mode: 'form', message: 'Sure?', requestedSchema: { type: 'object', properties: {} } } } },
        requestState: 'upstream-state',
      },
    });
  } else if (method === 'ping') {
    send({ id, result: {} });
  } else {
    send({ id, error: { code: -32601, message: `Method not found: ${method}` } });
  }
}
