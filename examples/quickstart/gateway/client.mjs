// Drives the gateway exactly as quickstart.sh told the client to start it (mcp.json),
// with the MCP SDK's real Client over stdio:
//   node client.mjs MCP_JSON DIR
// tools/list shows the filesystem tools, read_text_file reads DIR/hello.txt, write_file
// without a person's confirmation is refused (CONFIRMATION_REQUIRED) and writes nothing.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [mcpJson, dir] = process.argv.slice(2);
const fail = (msg, detail) => { console.error(`FAIL: ${msg}${detail === undefined ? '' : `\n  ${JSON.stringify(detail).slice(0, 2000)}`}`); process.exit(1); };
const ok = (msg) => console.log(`ok: ${msg}`);

const { command, args } = JSON.parse(readFileSync(mcpJson, 'utf8')).mcpServers.filesystem;
if (command !== 'toolgate' || args[0] !== 'proxy') fail('mcp.json does not start `toolgate proxy`', { command, args });
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' });
// No elicitation capability: the gateway cannot ask a person, so a write that needs one is refused.
const client = new Client({ name: 'toolgate-quickstart-check', version: '1.0.0' }, { capabilities: {} });
await client.connect(transport);
ok(`connected: ${command} ${args.join(' ')}`);

try {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const want of ['read_text_file', 'list_directory', 'write_file', 'edit_file']) {
    if (!names.includes(want)) fail(`tools/list lacks ${want}`, names);
  }
  ok(`tools/list: ${names.length} tools (${names.join(', ')})`);

  const read = await client.callTool({ name: 'read_text_file', arguments: { path: join(dir, 'hello.txt') } });
  if (read.isError || !JSON.stringify(read.content).includes('hello from the quick start')) fail('read_text_file did not read the file', read);
  ok('read_text_file ran and returned the file');

  const target = join(dir, 'written.txt');
  const w = await client.callTool({ name: 'write_file', arguments: { path: target, content: 'should not be written\n' } });
  if (w.isError !== true || !JSON.stringify(w).includes('CONFIRMATION_REQUIRED')) fail('write_file without confirmation was not refused with CONFIRMATION_REQUIRED', w);
  if (existsSync(target)) fail(`write_file was refused but ${target} exists on disk`);
  ok('write_file without confirmation: refused (CONFIRMATION_REQUIRED), nothing written');
} finally {
  await client.close();
}
