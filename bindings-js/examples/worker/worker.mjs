// An example module worker (workerd / Cloudflare Workers): a policy gate for
// a remote MCP server. The core module is imported precompiled (a worker may
// not compile wasm at run time) and the rules are loaded once per isolate.
//
//   POST /evaluate  {"call": {"name", "arguments"}, "context": {...}}  -> the decision JSON
//   POST /list      {"context": {...}}                                  -> the tools/list JSON
//   GET  /health                                                        -> revision
// Bindings: CATALOG (text, required), POLICY (text, optional).
import { Toolgate, ToolgateError } from 'toolgate/core';
import coreModule from 'toolgate/core.wasm';

/** @type {Toolgate | null} */
let gate = null;

/** @param {{ CATALOG: string, POLICY?: string }} env */
function rules(env) {
  return gate ??= Toolgate.fromModule({ module: coreModule, catalog: env.CATALOG, policy: env.POLICY });
}

const json = (/** @type {string} */ body, status = 200) => new Response(body, { status, headers: { 'content-type': 'application/json' } });

export default {
  /** @param {Request} request @param {{ CATALOG: string, POLICY?: string }} env */
  async fetch(request, env) {
    const url = new URL(request.url);
    try {
      const g = rules(env);
      if (request.method === 'GET' && url.pathname === '/health') return json(JSON.stringify({ revision: g.revision }));
      if (request.method !== 'POST') return json('{"error":"method not allowed"}', 405);
      const body = /** @type {any} */ (await request.json());
      if (url.pathname === '/evaluate') return json(g.evaluate(body.call, body.context).json);
      if (url.pathname === '/list') return json(g.listExposable(body.context).json);
      return json('{"error":"not found"}', 404);
    } catch (e) {
      if (e instanceof ToolgateError) return json(JSON.stringify({ error: { code: e.code, message: e.message } }), 400);
      throw e;
    }
  },
};
