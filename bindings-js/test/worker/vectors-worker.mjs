// Test worker: runs a resolved vector file inside workerd and returns what
// the engine produced; the Node side compares the bytes.
import { Toolgate, HOST_FAULTS } from 'toolgate/core';
import coreModule from 'toolgate/core.wasm';
import { WebStateKeys } from 'toolgate/src/webseal.js';
import { runFile } from './vector-exec.mjs';

// Every compile of wasm bytes in this isolate, counted: the package must
// need none (workerd's own platform forbids it; the count proves the package
// never tries, whatever the local runtime allows).
const RealModule = WebAssembly.Module;
const realCompile = WebAssembly.compile;
const realInstantiate = WebAssembly.instantiate;
let compiles = 0;
WebAssembly.Module = new Proxy(RealModule, {
  construct(target, args, newTarget) {
    compiles++;
    return Reflect.construct(target, args, newTarget);
  },
});
WebAssembly.compile = (/** @type {any[]} */ ...args) => {
  compiles++;
  return realCompile(...args);
};
WebAssembly.instantiate = (/** @type {any} */ source, /** @type {any[]} */ ...rest) => {
  if (!(source instanceof RealModule)) compiles++;
  return realInstantiate(source, ...rest);
};

export default {
  /** @param {Request} request */
  async fetch(request) {
    const url = new URL(request.url);
    if (request.method === 'GET') return new Response('ok'); // readiness probe
    const body = /** @type {any} */ (await request.json());
    if (url.pathname === '/run-file') {
      const result = await runFile(async (rules) => Toolgate.fromModule({ module: coreModule, ...rules }), body);
      return Response.json(result);
    }
    if (url.pathname === '/trap') {
      // A real trap inside the worker: deny, then the next call is served.
      const gate = Toolgate.fromModule({ module: coreModule, policy: body.policy, catalog: body.catalog });
      const before = gate.evaluate(body.call).json;
      gate[Symbol.for('toolgate.test.injectTrap')]();
      const trapped = gate.evaluate(body.call).json;
      const after = gate.evaluate(body.call).json;
      return Response.json({ before, trapped, after, recoveries: gate.recoveries, faultBytes: HOST_FAULTS.ENGINE_TRAP });
    }
    if (url.pathname === '/seals') {
      // WebCrypto's codec inside workerd: what it opens or refuses, and a token it seals.
      const keys = await WebStateKeys.create(body.secrets);
      const answers = [];
      for (const token of body.tokens) {
        try {
          answers.push({ payload: await keys.open(token) });
        } catch (e) {
          answers.push({ refused: /** @type {any} */ (e).reason });
        }
      }
      return Response.json({ answers, sealed: await keys.seal(body.payload), fingerprint: keys.fingerprint });
    }
    if (url.pathname === '/runtime') {
      let compileAllowed = true;
      try { new RealModule(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0])); } catch { compileAllowed = false; }
      return Response.json({ compileAllowed, compiles, hasProcess: typeof globalThis.process !== 'undefined' });
    }
    return new Response('not found', { status: 404 });
  },
};
