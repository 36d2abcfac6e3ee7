#!/usr/bin/env node
// Where toolgate's per-decision time goes in Node, against the floor (the same
// package code over a component with no engine). Not part of the benchmark
// figures: a breakdown for the hot path of bindings-js's `evaluate`.
//
//   node bench/node/profile.mjs --data target/bench-data [--scale 34] [--cpu-prof]
//
// Prints, for toolgate and for the floor, the median ns per decision over the
// mix (round-robin rounds) of:
//   - the package's `evaluate` in each call form (bytes, JSON text, object), with
//     and without reading `.ok` (which parses the decision JSON), and jco's wrapper;
//   - the raw canonical-ABI call done here the way src/core.js's fast path does it,
//     and variants of it (context bytes reused; UTF-8 encoded straight into guest
//     memory), to size what the package adds around the core call;
//   - pieces in isolation: encoding the context, the deadline clock, decoding and
//     parsing the decision.
// --cpu-prof: a V8 CPU profile of the bench's toolgate loop (self time per
// function), through node:inspector.
import { Session } from 'node:inspector/promises';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { prepareFloor, repoDir } from './floor.mjs';
import { CONTRACT_VERSION } from '../../bindings-js/src/contract.js';

const argv = process.argv.slice(2);
/** @param {string} name @param {string} fallback */
const option = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
};
const dataDir = resolve(option('--data', join(repoDir, 'target', 'bench-data')));
const scale = option('--scale', '34');
const rounds = Number(option('--rounds', '15'));
const sliceMs = Number(option('--slice-ms', '40'));

const EVALUATE = `toolgate:policy/engine@${CONTRACT_VERSION}#[method]rule-set.evaluate`;
const EVALUATE_POST = `cabi_post_toolgate:policy/engine@${CONTRACT_VERSION}#[method]rule-set.evaluate`;
const RESOURCE_IFACE = `[export]toolgate:policy/engine@${CONTRACT_VERSION}`;
const RESOURCE_NEW = '[resource-new]rule-set';

// The rule set's rep is private to src/core.js; to call the core export
// directly, record it the way core.js does, from the [resource-new] import,
// by wrapping the WebAssembly.Instance constructor (profiling only).
/** @type {number[]} */
const reps = [];
const RealInstance = WebAssembly.Instance;
WebAssembly.Instance = /** @type {any} */ (function Instance(/** @type {WebAssembly.Module} */ m, /** @type {any} */ imports) {
  const iface = imports?.[RESOURCE_IFACE];
  if (iface && typeof iface[RESOURCE_NEW] === 'function') {
    const inner = iface[RESOURCE_NEW];
    imports = { ...imports, [RESOURCE_IFACE]: { ...iface, [RESOURCE_NEW]: (/** @type {number} */ rep) => { reps.push(rep); return inner(rep); } } };
  }
  return new RealInstance(m, imports);
});

/** @typedef {{ call: import('toolgate').CallInput, call_json: string, context_json: string, expect_allowed: boolean }} MixCall */
const mix = /** @type {MixCall[]} */ (JSON.parse(readFileSync(join(dataDir, 'mix.json'), 'utf8')).calls);
const n = mix.length;
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const bytes = mix.map((m) => encoder.encode(m.call_json));
const texts = mix.map((m) => m.call_json);
const objects = mix.map((m) => m.call);
const contexts = mix.map((m) => m.context_json);
const policy = readFileSync(join(dataDir, 'policy.yaml'), 'utf8');
const catalog = readFileSync(join(dataDir, scale, 'catalog.json'), 'utf8');

const tg = await import('toolgate');
const floorPkg = /** @type {typeof tg} */ (await import(pathToFileURL(prepareFloor()).href));
const kRaw = Symbol.for('toolgate.test.rawExports');

/**
 * @param {typeof tg} pkg
 * @param {string} cat
 * @param {string | null} pol
 */
async function open(pkg, cat, pol) {
  const module = await pkg.compileCoreModule();
  reps.length = 0;
  const gate = pkg.Toolgate.fromModule({ module, policy: pol, catalog: cat });
  const rep = reps[reps.length - 1];
  const jco = pkg.Toolgate.fromModule({ module, policy: pol, catalog: cat, fastPath: false });
  const raw = /** @type {any} */ (gate)[kRaw];
  if (typeof rep !== 'number' || !raw) throw new Error('could not reach the raw exports');
  return { gate, jco, raw, rep };
}

/** The raw canonical-ABI calls, as core.js does them, and leaner variants. */
function rawCalls(/** @type {any} */ raw, /** @type {number} */ rep) {
  const realloc = raw.cabi_realloc;
  const memory = /** @type {WebAssembly.Memory} */ (raw.memory);
  const call = raw[EVALUATE];
  const post = raw[EVALUATE_POST];
  const ctxCache = { text: '', bytes: new Uint8Array(0) };
  /** @param {Uint8Array} b @param {Uint8Array} ctx */
  const core = (b, ctx) => {
    const callPtr = realloc(0, 0, 1, b.length);
    new Uint8Array(memory.buffer, callPtr, b.length).set(b);
    const ctxPtr = ctx.length === 0 ? 1 : realloc(0, 0, 1, ctx.length);
    if (ctx.length > 0) new Uint8Array(memory.buffer, ctxPtr, ctx.length).set(ctx);
    const ret = call(rep, callPtr, b.length, ctxPtr, ctx.length);
    const view = new DataView(memory.buffer);
    const out = decoder.decode(new Uint8Array(memory.buffer, view.getUint32(ret, true), view.getUint32(ret + 4, true)));
    post(ret);
    return out;
  };
  return {
    /** exactly src/core.js's fastEvaluate body */
    asPackage: (/** @type {Uint8Array} */ b, /** @type {string} */ c) => core(b, encoder.encode(c)),
    /** the context's UTF-8 reused while the context text is the same */
    ctxCached: (/** @type {Uint8Array} */ b, /** @type {string} */ c) => {
      if (c !== ctxCache.text) { ctxCache.text = c; ctxCache.bytes = encoder.encode(c); }
      return core(b, ctxCache.bytes);
    },
    /** a JSON-text call encoded straight into guest memory (no intermediate Uint8Array) */
    textInto: (/** @type {string} */ s, /** @type {string} */ c) => {
      // UTF-8 is never shorter than UTF-16: a buffer of s.length bytes holds the
      // whole string exactly when it is ASCII; else grow it (the guest frees
      // the list with its length as capacity, so the length must be exact).
      let callPtr = realloc(0, 0, 1, s.length);
      let { read, written } = encoder.encodeInto(s, new Uint8Array(memory.buffer, callPtr, s.length));
      if (read !== s.length) {
        const b = encoder.encode(s);
        callPtr = realloc(callPtr, s.length, 1, b.length);
        new Uint8Array(memory.buffer, callPtr, b.length).set(b);
        written = b.length;
      }
      const ctx = encoder.encode(c);
      const ctxPtr = realloc(0, 0, 1, ctx.length);
      new Uint8Array(memory.buffer, ctxPtr, ctx.length).set(ctx);
      const ret = call(rep, callPtr, written, ctxPtr, ctx.length);
      const view = new DataView(memory.buffer);
      const out = decoder.decode(new Uint8Array(memory.buffer, view.getUint32(ret, true), view.getUint32(ret + 4, true)));
      post(ret);
      return out;
    },
  };
}

const toolgate = await open(tg, catalog, policy);
const floor = await open(floorPkg, '[]', null);
const decisions = bytes.map((b, i) => toolgate.gate.evaluate(b, contexts[i]).json);
const floorDecision = floor.gate.evaluate(bytes[0], contexts[0]).json;
mix.forEach((m, i) => {
  if (toolgate.gate.evaluate(bytes[i], contexts[i]).ok !== m.expect_allowed) throw new Error(`toolgate disagrees with the mix on ${m.call_json}`);
  for (const [form, call] of /** @type {const} */ ([['text', texts[i]], ['object', objects[i]]])) {
    if (toolgate.gate.evaluate(call, contexts[i]).json !== decisions[i]) throw new Error(`the ${form} form gives other bytes on ${m.call_json}`);
  }
  const r = rawCalls(toolgate.raw, toolgate.rep);
  for (const v of [r.asPackage(bytes[i], contexts[i]), r.ctxCached(bytes[i], contexts[i]), r.textInto(texts[i], contexts[i])]) {
    if (v !== decisions[i]) throw new Error(`a raw variant gives other bytes on ${m.call_json}`);
  }
});

/** @typedef {[string, (i: number) => unknown]} Case */
/** @param {ReturnType<typeof open> extends Promise<infer T> ? T : never} x @param {string[]} outs @returns {Case[]} */
function cases(x, outs) {
  const r = rawCalls(x.raw, x.rep);
  return [
    ['evaluate(bytes, ctx).ok  [the bench]', (i) => x.gate.evaluate(bytes[i], contexts[i]).ok],
    ['evaluate(bytes, ctx)  (no .ok)', (i) => x.gate.evaluate(bytes[i], contexts[i])],
    ['evaluate(text, ctx).ok', (i) => x.gate.evaluate(texts[i], contexts[i]).ok],
    ['evaluate(object, ctx).ok', (i) => x.gate.evaluate(objects[i], contexts[i]).ok],
    ['jco wrapper (fastPath: false).ok', (i) => x.jco.evaluate(bytes[i], contexts[i]).ok],
    ['raw core call, as core.js does it', (i) => r.asPackage(bytes[i], contexts[i])],
    ['raw, context UTF-8 reused', (i) => r.ctxCached(bytes[i], contexts[i])],
    ['raw, text encoded into guest memory', (i) => r.textInto(texts[i], contexts[i])],
    ['  piece: JSON.parse(decision)', (i) => JSON.parse(outs[i]).ok],
    ['  piece: decode decision bytes', (i) => decoder.decode(encodedOuts(outs)[i])],
  ];
}
/** @type {Map<string[], Uint8Array[]>} */
const encodedCache = new Map();
/** @param {string[]} outs */
function encodedOuts(outs) {
  let e = encodedCache.get(outs);
  if (!e) { e = outs.map((o) => encoder.encode(o)); encodedCache.set(outs, e); }
  return e;
}
const floorOuts = bytes.map(() => floorDecision);
/** @type {Case[]} */
const shared = [
  ['  piece: encoder.encode(context)', (i) => encoder.encode(contexts[i])],
  ['  piece: performance.now() x2', () => performance.now() - performance.now()],
  ['  piece: encoder.encode(call text)', (i) => encoder.encode(texts[i])],
  ['  piece: JSON.stringify(call object)', (i) => JSON.stringify(objects[i])],
];

/** @param {Case[]} list */
function race(list) {
  const iters = list.map(([, f]) => {
    const until = performance.now() + 300;
    let per = 0;
    while (performance.now() < until) {
      const t0 = performance.now();
      for (let k = 0; k < 20; k++) for (let i = 0; i < n; i++) f(i);
      per = (performance.now() - t0) / (20 * n);
    }
    return Math.max(1, Math.round(sliceMs / (per * n)));
  });
  const samples = list.map(() => /** @type {number[]} */ ([]));
  let sink = 0;
  for (let r = 0; r < rounds; r++) {
    list.forEach(([, f], k) => {
      const t0 = process.hrtime.bigint();
      for (let it = 0; it < iters[k]; it++) for (let i = 0; i < n; i++) if (f(i)) sink++;
      samples[k].push(Number(process.hrtime.bigint() - t0) / (iters[k] * n));
    });
  }
  if (sink < 0) console.log(sink);
  return samples.map((s) => s.sort((a, b) => a - b)[s.length >> 1]);
}

const tCases = cases(toolgate, decisions);
const fCases = cases(floor, floorOuts);
const all = [...tCases, ...fCases, ...shared];
const ns = race(all);
const w = Math.max(...tCases.map(([name]) => name.length));
console.log(`ns per decision, median of ${rounds} rounds, ${scale}-tool catalog, the ${n}-call mix (toolgate | floor)`);
tCases.forEach(([name], k) => {
  console.log(`${name.padEnd(w)} ${Math.round(ns[k]).toLocaleString('en-US').padStart(9)} | ${Math.round(ns[tCases.length + k]).toLocaleString('en-US').padStart(9)}`);
});
shared.forEach(([name], k) => {
  console.log(`${name.padEnd(w)} ${Math.round(ns[2 * tCases.length + k]).toLocaleString('en-US').padStart(9)}`);
});
console.log(`decision bytes: toolgate ${decisions.map((d) => d.length).join(', ')}; floor ${floorDecision.length}`);

/**
 * A V8 CPU profile of `evaluate(bytes, ctx).ok` in a loop: self time by function and by kind.
 * @param {string} label @param {import('toolgate').Toolgate} gate
 */
async function cpuProfile(label, gate) {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 50 });
  await session.post('Profiler.start');
  const until = performance.now() + 3000;
  let sink = 0;
  while (performance.now() < until) for (let i = 0; i < n; i++) if (gate.evaluate(bytes[i], contexts[i]).ok) sink++;
  const { profile } = /** @type {any} */ (await session.post('Profiler.stop'));
  session.disconnect();
  /** @type {Map<number, any>} */
  const byId = new Map(profile.nodes.map((/** @type {any} */ nd) => [nd.id, nd]));
  /** @type {Map<string, number>} */
  const self = new Map();
  /** @type {Map<string, number>} */
  const kinds = new Map();
  for (const id of profile.samples) {
    const f = byId.get(id).callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url ? `${f.url.split('/').slice(-2).join('/')}:${f.lineNumber + 1}` : ''}`.trim();
    self.set(key, (self.get(key) ?? 0) + 1);
    const kind = f.url.startsWith('wasm://') ? 'wasm (the component)'
      : key.startsWith('get value ') ? 'JSON.parse of the decision (Decision.ok)'
        : /^(encode|decode|encodeUtf8String|encodeInto)\b/.test(key) || /node:internal\/encoding/.test(key) ? 'TextEncoder/TextDecoder'
          : key.startsWith('(garbage collector)') ? 'GC'
            : key.startsWith('(program)') || key.startsWith('(idle)') ? 'V8/other'
              : 'package JS (evaluate, fast path, Decision)';
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  const total = profile.samples.length;
  console.log(`\nCPU profile, ${label}: evaluate(bytes, ctx).ok for 3 s, ${total} samples${sink > 0 ? '' : ' (nothing allowed?)'}; by kind:`);
  for (const [k, c] of [...kinds].sort((a, b) => b[1] - a[1])) console.log(`${(100 * c / total).toFixed(1).padStart(5)}%  ${k}`);
  console.log('top functions (self):');
  for (const [key, c] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 10)) console.log(`${(100 * c / total).toFixed(1).padStart(5)}%  ${key}`);
}
if (argv.includes('--cpu-prof')) {
  await cpuProfile('toolgate', toolgate.gate);
  await cpuProfile('floor', floor.gate);
}
for (const x of [toolgate, floor]) { x.gate.close(); x.jco.close(); }
