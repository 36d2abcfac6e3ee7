// The canonical-ABI fast path (src/abi.js) against jco's generated wrapper:
// every shared vector gives the same bytes both ways; a failed ABI check (a
// jco change, simulated by hiding an export or import from the check) falls
// back to the wrapper for every call, with the same results; the env var
// forces the wrapper.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONTRACT_VERSION, HOST_FAULTS, Toolgate, compileCoreModule } from '../src/index.js';
import { EVALUATE, EVALUATE_POST, INTERFACE, MEMORY, REALLOC, RESOURCE_NEW, checkExports, checkedFastPath, instantiateComponent } from '../src/abi.js';
import { runFile } from './lib/vector-exec.mjs';
import { loadVectorFile, pkgDir, vectorFiles, vectorsDir } from './lib/vectors.mjs';

const kFastPath = Symbol.for('toolgate.test.fastPath');
const kHide = Symbol.for('toolgate.test.hideFromAbi');
const kInjectTrap = Symbol.for('toolgate.test.injectTrap');
const module = await compileCoreModule();
// Files this runner cannot read (vectors.test.mjs reports them) are left out here.
/** @type {string[]} */ const unreadable = [];
const files = vectorFiles().flatMap((path) => {
  try { return [loadVectorFile(path)]; } catch (e) { unreadable.push(`${path}: ${/** @type {any} */ (e).message}`); return []; }
});
const fixtures = join(vectorsDir, 'fixtures');
const plansPolicy = readFileSync(join(fixtures, 'plans-policy.yaml'), 'utf8');
const plansCatalog = readFileSync(join(fixtures, 'plans-catalog.json'), 'utf8');

/** Loads with these extra options, recording whether each gate used the fast path. */
function loader(/** @type {Record<string | symbol, unknown>} */ extra, /** @type {boolean[]} */ seen) {
  return async (/** @type {any} */ rules) => {
    const gate = Toolgate.fromModule({ module, ...rules, ...extra });
    seen.push(gate[kFastPath].active);
    return gate;
  };
}

test('the interface names are built from the one contract version', () => {
  assert.equal(INTERFACE, `toolgate:policy/engine@${CONTRACT_VERSION}`);
  assert.ok(EVALUATE.startsWith(`${INTERFACE}#`));
  assert.equal(EVALUATE_POST, `cabi_post_${EVALUATE}`);
  const gen = readFileSync(join(pkgDir, 'gen/toolgate_policy.js'), 'utf8');
  assert.ok(gen.includes(INTERFACE), `gen/ was built from a component exporting ${INTERFACE}`);
});

test('the ABI checks pass on this build: the fast path is used', () => {
  const gate = Toolgate.fromModule({ module, policy: plansPolicy, catalog: plansCatalog });
  assert.deepEqual(gate[kFastPath], { active: true, problems: [] });
  const off = Toolgate.fromModule({ module, policy: plansPolicy, catalog: plansCatalog, fastPath: false });
  assert.equal(off[kFastPath].active, false);
});

/** Every vector file through the fast path, once: the reference the other paths must equal. */
/** @type {boolean[]} */ const fastSeen = [];
const reference = [];
for (const file of files) reference.push(await runFile(loader({}, fastSeen), file));

test(`every vector file (${files.length}): the fast path and jco's wrapper give identical bytes`, async (t) => {
  for (const u of unreadable) t.diagnostic(`left out: ${u}`);
  assert.ok(files.length > 0, 'vector files found');
  /** @type {boolean[]} */ const wrapperSeen = [];
  let cases = 0;
  for (const [i, file] of files.entries()) {
    const viaJco = await runFile(loader({ fastPath: false }, wrapperSeen), file);
    assert.deepEqual(reference[i], viaJco, file.description);
    cases += viaJco.cases?.length ?? 0;
  }
  assert.ok(cases > 0);
  assert.ok(fastSeen.length > 0 && fastSeen.every(Boolean), 'the fast path was used');
  assert.ok(wrapperSeen.every((x) => !x), 'the wrapper was used');
});

test('checkExports names each missing or changed export', () => {
  const memory = new WebAssembly.Memory({ initial: 1 });
  const exports = {
    [MEMORY]: memory,
    [REALLOC]: (/** @type {any} */ a, /** @type {any} */ b, /** @type {any} */ c, /** @type {any} */ d) => a + b + c + d,
    [EVALUATE]: (/** @type {any} */ a, /** @type {any} */ b, /** @type {any} */ c, /** @type {any} */ d, /** @type {any} */ e) => a + b + c + d + e,
    [EVALUATE_POST]: (/** @type {any} */ a) => a,
  };
  assert.deepEqual(checkExports(exports, new Set()).problems, []);
  assert.ok(checkExports(exports, new Set()).abi);
  assert.deepEqual(checkExports({ ...exports, [EVALUATE]: () => 0 }, new Set()).problems, [`core export ${EVALUATE} takes 0 parameters, not 5`]);
  assert.deepEqual(checkExports({ ...exports, [MEMORY]: {} }, new Set()).problems, [`no core export ${MEMORY} (a WebAssembly.Memory)`]);
  const r = checkExports(exports, new Set([EVALUATE_POST]));
  assert.equal(r.abi, null);
  assert.deepEqual(r.problems, [`no core export ${EVALUATE_POST}`]);
});

// Each thing the fast path relies on, taken away in turn (as a jco change
// would): the gate falls back to jco's wrapper, says why, and answers every
// vector exactly as the fast path does.
// Each thing the fast path relies on, taken away in turn (as a jco change
// would): the gate falls back to jco's wrapper, says why, and answers the
// vectors exactly as the fast path does (all of them for the first, every
// tenth file for the others: the wrapper path is the same code each time).
for (const [n, name] of [EVALUATE_POST, EVALUATE, REALLOC, MEMORY, RESOURCE_NEW].entries()) {
  test(`a failed ABI check falls back to jco's wrapper: no ${name.replace(INTERFACE, '<interface>')}`, async () => {
    const gate = Toolgate.fromModule({ module, policy: plansPolicy, catalog: plansCatalog, [kHide]: [name] });
    const state = gate[kFastPath];
    assert.equal(state.active, false);
    assert.ok(state.problems.some((/** @type {string} */ p) => p.includes(name)), state.problems.join('; '));
    /** @type {boolean[]} */ const seen = [];
    for (const [i, file] of files.entries()) {
      if (n > 0 && i % 10 !== 0) continue;
      assert.deepEqual(await runFile(loader({ [kHide]: [name] }, seen), file), reference[i], file.description);
    }
    assert.ok(seen.length > 0 && seen.every((x) => !x));
  });
}

test('on the fallback path a trap still denies with ENGINE_TRAP, and the new instance falls back too', () => {
  const gate = Toolgate.fromModule({ module, policy: plansPolicy, catalog: plansCatalog, [kHide]: [EVALUATE_POST] });
  const call = { name: 'consultar_plano', arguments: { customer_id: '1' } };
  const good = gate.evaluate(call).json;
  gate[kInjectTrap]();
  assert.equal(gate.evaluate(call).json, HOST_FAULTS.ENGINE_TRAP);
  assert.equal(gate.recoveries, 1);
  assert.equal(gate[kFastPath].active, false);
  assert.equal(gate.evaluate(call).json, good);
});

test('TOOLGATE_JS_FASTPATH=0 (and the older TOOLGATE_JCO_EVALUATE=1) force the wrapper', () => {
  const script = `
    import { readFileSync } from 'node:fs';
    import { Toolgate } from './src/index.js';
    const gate = await Toolgate.load({ catalog: readFileSync(${JSON.stringify(join(fixtures, 'seed-catalog.json'))}, 'utf8') });
    process.stdout.write(JSON.stringify({ state: gate[Symbol.for('toolgate.test.fastPath')], json: gate.evaluate({ name: 'get_capabilities', arguments: {} }).json }));`;
  const run = (/** @type {Record<string, string>} */ env) => JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: pkgDir, encoding: 'utf8', env: { ...process.env, TOOLGATE_JS_FASTPATH: '', TOOLGATE_JCO_EVALUATE: '', ...env },
  }));
  const on = run({});
  assert.equal(on.state.active, true);
  for (const env of [{ TOOLGATE_JS_FASTPATH: '0' }, { TOOLGATE_JCO_EVALUATE: '1' }]) {
    const off = run(env);
    assert.equal(off.state.active, false, JSON.stringify(env));
    assert.deepEqual(off.state.problems, ['fast path off']);
    assert.equal(off.json, on.json);
  }
});

// scripts/build.mjs patches jco's string writer (one native encode, one copy)
// and its JSPI probe; these pin what the patched code must still do.
test('strings reach the guest as their UTF-8: non-ASCII and astral text round-trips; a lone surrogate is refused as Python refuses it', () => {
  // JSON.stringify would escape a lone surrogate (and the engine rightly refuses `\ud800` in JSON):
  // the raw code unit goes into the text after it, as a JS string can carry one.
  const text = (/** @type {string} */ description) => JSON.stringify({ tools: [{ name: 'echo', description, inputSchema: { type: 'object' } }] })
    .replace('LONE', '\ud800');
  const description = `é€😀 ${'ü'.repeat(300)} end`;
  for (const fastPath of [true, false]) {
    const gate = Toolgate.fromModule({ module, catalog: text(description), fastPath });
    const listed = gate.listExposable().tools.map((t) => t.description);
    assert.ok(listed.length === 1 && listed[0] === description, `fastPath ${fastPath}: listed ${JSON.stringify(listed).slice(0, 80)}`);
    assert.notEqual(gate.revision, Toolgate.fromModule({ module, catalog: text('é€😀'), fastPath }).revision);
    // UTF-8 cannot carry it: writing U+FFFD instead would load rules the host was never given.
    assert.throws(() => Toolgate.fromModule({ module, catalog: text(`${description} LONE`), fastPath }), /lone surrogate/);
    assert.throws(() => Toolgate.fromModule({ module, catalog: text(description), policy: 'version: 1\n# \udc00\n', fastPath }), /lone surrogate/);
    // A call or context given as text: decided as Python decides the same string (bytes as
    // WTF-8 for the call; a context text as one the engine refuses), never on U+FFFD.
    const raw = gate.evaluate('{"name":"echo","arguments":{"p":"LONE"}}'.replace('LONE', '\ud800'));
    assert.equal(raw.code, 'BAD_REQUEST', raw.json);
    assert.equal(raw.json, gate.evaluate(Uint8Array.of(...new TextEncoder().encode('{"name":"echo","arguments":{"p":"'), 0xed, 0xa0, 0x80, ...new TextEncoder().encode('"}}'))).json);
    const unsendable = gate.evaluate({ name: 'echo', arguments: {} }, '"\\ud800"');
    assert.equal(unsendable.code, 'INVALID_CONTEXT', unsendable.json);
    // `x\` then the surrogate: an escape in its place made valid JSON, a granted scope `x\udc00`.
    for (const context of ['{"surface":"direct","scopes":["LONE"]}', '{"allowed_tools":["echoLONE"]}', '{"scopes":["x\\LONE"]}']) {
      const decided = gate.evaluate({ name: 'echo', arguments: {} }, context.replace('LONE', '\udc00'));
      assert.equal(decided.json, unsendable.json, context);
      assert.throws(() => gate.listExposable(context.replace('LONE', '\udc00')), (e) => e.code === 'CONTEXT_SYNTAX', context);
    }
    // An object call: JSON.stringify's escape, the decision of that text (Python writes the same).
    const object = gate.evaluate({ name: 'echo', arguments: { p: 'x\ud800' } });
    assert.equal(object.json, gate.evaluate('{"name":"echo","arguments":{"p":"x\\ud800"}}').json);
    assert.equal(object.code, 'BAD_REQUEST');
    // Turn state and input: refused, never decided on U+FFFD in its place.
    assert.throws(() => gate.turn('{"x":"\ud800"}', '{}'), /lone surrogate/);
    assert.throws(() => gate.turn(null, '{"calls":[{"name":"echo\ud800","arguments":{}}]}'), /lone surrogate/);
  }
});

test('instantiation is the same whether WebAssembly.promising is missing, present, or throws', () => {
  const call = { name: 'consultar_plano', arguments: { customer_id: '1' } };
  const wasm = /** @type {any} */ (WebAssembly);
  const had = Object.getOwnPropertyDescriptor(wasm, 'promising');
  const wrapped = [];
  const decide = () => {
    const gate = Toolgate.fromModule({ module, policy: plansPolicy, catalog: plansCatalog });
    return [gate[kFastPath].active, gate.evaluate(call).json, gate.listExposable().json];
  };
  try {
    delete wasm.promising;
    const without = decide();
    assert.equal(without[0], true);
    // Present: every export is offered to it, and what it returns is kept only for async use.
    wasm.promising = (/** @type {Function} */ f) => { wrapped.push(f); return async () => { throw new Error('the sync path called a JSPI wrapper'); }; };
    assert.deepEqual(decide(), without);
    assert.ok(wrapped.length > 0 && wrapped.every((f) => typeof f === 'function'), 'WebAssembly.promising was asked to wrap the exports');
    wasm.promising = () => { throw new TypeError('JSPI is switched off'); };
    assert.deepEqual(decide(), without);
  } finally {
    if (had) Object.defineProperty(wasm, 'promising', had);
    else delete wasm.promising;
  }
});

test('the probes refuse a fast path that loses or misreads the context or the call (an ABI drift with the same arities)', () => {
  const catalog = JSON.stringify({ tools: [{ name: 'read', annotations: { readOnlyHint: true } }] });
  const inst = instantiateComponent(module, { fastPath: true });
  const repOf = inst.repOfNextRuleSet();
  const rules = inst.engine.RuleSet.load(undefined, catalog);
  const rep = repOf();
  const viaWrapper = (/** @type {Uint8Array} */ b, /** @type {string} */ c) => rules.evaluate(b, c);
  const abi = /** @type {any} */ (inst.abi);
  assert.ok(checkedFastPath(abi, rep, viaWrapper).fast, 'the shipped layout passes');
  const drifts = {
    // Each would decide the route's allowlist or scopes away, or decide on another call.
    'context dropped': (/** @type {number[]} */ ...a) => abi.evaluate(a[0], a[1], a[2], a[3], 0),
    'context cut short': (/** @type {number[]} */ ...a) => abi.evaluate(a[0], a[1], a[2], a[3], Math.max(0, a[4] - 12)),
    'call cut short': (/** @type {number[]} */ ...a) => abi.evaluate(a[0], a[1], Math.max(0, a[2] - 4), a[3], a[4]),
  };
  for (const [label, evaluate] of Object.entries(drifts)) {
    const probed = checkedFastPath({ ...abi, evaluate }, rep, viaWrapper);
    assert.equal(probed.fast, null, label);
    assert.match(String(probed.problem), /probe differs/, label);
  }
});

test('a rule set whose guest destructor traps is dropped without ending the process (dispose and the finalizer)', () => {
  // A heap left broken by a fault, simulated by scribbling over the rule set's guest memory.
  const src = new URL('../src/', import.meta.url).href;
  const script = `
    import { compileCoreModule } from '${src}index.js';
    import { loadEngine } from '${src}runtime.js';
    const module = await compileCoreModule();
    const catalog = JSON.stringify({ tools: [{ name: 'read', annotations: { readOnlyHint: true } }] });
    const broken = () => {
      const engine = loadEngine(module, { policy: undefined, catalog, fastPath: true, maxMemoryBytes: Infinity });
      new Uint8Array(engine.raw.memory.buffer, engine.rep, 16).fill(0xff);
      return engine;
    };
    broken().rules[Symbol.dispose]();
    const kept = broken();
    globalThis.keep = kept.raw; // the instance stays; only the rule set's handle becomes garbage
    kept.rules = null;
    kept.evaluate = null;
    for (let i = 0; i < 5; i++) { await new Promise((r) => setTimeout(r, 20)); globalThis.gc(); }
    console.log('survived');
  `;
  const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(out.trim(), 'survived');
});
