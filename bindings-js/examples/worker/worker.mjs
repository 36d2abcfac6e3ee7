// An example module worker (workerd / Cloudflare Workers): a decision service
// for the hosts in front of your tools. A host sends each `tools/call` before
// running it, with the context it vouches for (the caller's surface and
// scopes), and forwards exactly what the answer says. The core module is
// imported precompiled (a worker may not compile wasm at run time) and the
// rules are loaded once per isolate.
//
//   POST /decide  {"call": {"name", "arguments"}, "context": {...}, "confirmation"?: "none" | "person"}
//                 -> {"decision": ..., "forward": args | null, "blocked_result": ... | null}
//   POST /list    {"context": {...}}  -> the tools/list JSON
//   GET  /health                     -> revision
// Bindings: CATALOG (text, required), POLICY (text, optional), GATE_TOKEN
// (text, required: the bearer token hosts send).
//
// Who may ask matters: the context is the asking host's word, so a caller
// that could reach this worker directly could claim any scopes. Without a
// GATE_TOKEN binding every request but /health is refused. The model's own
// `confirmed: true` never counts here: a write the person must confirm comes
// back CONFIRMATION_REQUIRED, the host asks the person about that very call,
// and on their yes sends it again with `"confirmation": "person"` (the host's
// word, as its context is; or it seals the question: README, "Sealed
// confirmations").
import { Toolgate, ToolgateError } from 'toolgate/core';
import coreModule from 'toolgate/core.wasm';

/** @typedef {{ CATALOG: string, POLICY?: string, GATE_TOKEN?: string }} Env */

/** @type {Toolgate | null} */
let gate = null;

/** @param {Env} env */
function rules(env) {
  return gate ??= Toolgate.fromModule({ module: coreModule, catalog: env.CATALOG, policy: env.POLICY });
}

const json = (/** @type {string} */ body, status = 200) => new Response(body, { status, headers: { 'content-type': 'application/json' } });

/** SHA-256 of a text: tokens are compared as digests, so the time taken says nothing about the token. */
async function digest(/** @type {string} */ text) {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)));
}

/** Whether the request carries `Authorization: Bearer <GATE_TOKEN>`; never without a GATE_TOKEN. */
async function fromAHost(/** @type {Request} */ request, /** @type {Env} */ env) {
  const expected = env.GATE_TOKEN?.trim(); // a token file's final newline is not part of it
  if (!expected) return false;
  const [scheme = '', token = ''] = (request.headers.get('authorization') ?? '').trim().split(/\s+/, 2);
  if (scheme.toLowerCase() !== 'bearer') return false;
  const [a, b] = await Promise.all([digest(token), digest(expected)]);
  return a.reduce((differ, byte, i) => differ | (byte ^ /** @type {number} */ (b[i])), 0) === 0;
}

export default {
  /** @param {Request} request @param {Env} env */
  async fetch(request, env) {
    const url = new URL(request.url);
    if (request.method === 'GET' && url.pathname === '/health') {
      try {
        return json(JSON.stringify({ revision: rules(env).revision }));
      } catch {
        return json('{"error":"the rules did not load"}', 503); // the why is for the hosts only
      }
    }
    if (request.method !== 'POST') return json('{"error":"method not allowed"}', 405);
    if (!(await fromAHost(request, env))) return json('{"error":"unauthorized"}', 401);
    try {
      const g = rules(env);
      const body = /** @type {any} */ (await request.json());
      if (url.pathname === '/decide') {
        // Never 'argument': the call's own fields are the model's word.
        const confirmation = body.confirmation === 'person' ? 'person' : 'none';
        const o = g.decide(body.call, body.context, confirmation);
        return json(`{"decision":${o.decision.json},"forward":${o.forwardJson ?? 'null'},"blocked_result":${o.blockedResultJson ?? 'null'}}`);
      }
      if (url.pathname === '/list') return json(g.listExposable(body.context).json);
      return json('{"error":"not found"}', 404);
    } catch (e) {
      if (e instanceof ToolgateError) return json(JSON.stringify({ error: { code: e.code, message: e.message } }), 400);
      throw e;
    }
  },
};
