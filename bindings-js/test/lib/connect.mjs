// A client connected to `server` over the SDK's in-memory transport; with
// `authInfo`, every request carries it as an HTTP transport's would; with
// `capabilities`, the client declares them in its handshake.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';

/**
 * @param {any} server an McpServer or a Server of the SDK
 * @param {any} [authInfo]
 * @param {any} [capabilities]
 */
export async function connect(server, authInfo, capabilities) {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 't', version: '1' }, capabilities ? { capabilities } : undefined);
  if (authInfo) {
    const send = clientSide.send.bind(clientSide);
    clientSide.send = (message, options) => send(message, { ...options, authInfo });
  }
  await client.connect(clientSide);
  return client;
}
