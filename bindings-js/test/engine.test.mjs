// The API: typed decisions keeping the canonical bytes, errors with codes,
// host faults (SPEC §7), trap recovery, loading from a compiled module.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CONTRACT_VERSION, DEFAULT_DEADLINE_MS, DEFAULT_MAX_MEMORY_BYTES, Decision, EngineFaultError, EngineLimitError,
  EngineOutOfMemoryError, EngineTrapError, HOST_FAULTS, InputTooLargeError, LoadError, MAX_INPUT_BYTES,
  ProblemError, Toolgate, ToolgateError, CallOutcome, ComponentError, compileCoreModule,
} from '../src/index.js';
import { blockedResultJson } from '../src/results.js';
import { vectorsDir } from './lib/vectors.mjs';

const fixtures = join(vectorsDir, 'fixtures');
const seedCatalog = readFileSync(join(fixtures, 'seed-catalog.json'), 'utf8');
const plansPolicy = readFileSync(join(fixtures, 'plans-policy.yaml'), 'utf8');
const plansCatalog = readFileSync(join(fixtures, 'plans-catalog.json'), 'utf8');
const kInjectTrap = Symbol.for('toolgate.test.injectTrap');

const seed = await Toolgate.load({ catalog: seedCatalog });
const plans = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog });
const readCall = { name: 'get_capabilities', arguments: {} };

test('host-fault bytes embedded in the package equal tests/vectors/host-faults.json', () => {
  const file = JSON.parse(readFileSync(join(vectorsDir, 'host-faults.json'), 'utf8'));
  assert.deepEqual({ ...HOST_FAULTS }, file.faults);
  assert.equal(MAX_INPUT_BYTES, file.limits.max_input_bytes);
});

test('a decision is typed and keeps the exact canonical bytes', () => {
  const d = plans.evaluate({ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD' } });
  assert.ok(d instanceof Decision);
  assert.equal(d.ok, false);
  assert.equal(d.code, 'CONFIRMATION_REQUIRED');
  assert.equal(d.retryable, true);
  assert.equal(d.tool, 'alterar_plano');
  assert.equal(d.metadata.policy_revision, plans.revision);
  assert.equal(String(d), d.json);
  assert.ok(d.json.startsWith('{"ok":false,"error":{"code":"CONFIRMATION_REQUIRED"'));
  // The same call as object, text and bytes gives the same bytes.
  const text = '{"name":"alterar_plano","arguments":{"customer_id":"1","new_plan_id":"GOLD"}}';
  assert.equal(plans.evaluate(text).json, d.json);
  assert.equal(plans.evaluate(new TextEncoder().encode(text)).json, d.json);
  assert.equal(plans.evaluate(Buffer.from(`xx${text}`).subarray(2)).json, d.json);
  const ok = plans.evaluate({ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD', confirmed: true } });
  assert.equal(ok.ok, true);
  assert.equal(ok.error, null);
  assert.equal(ok.code, null);
  // `ok` is read from the canonical prefix (SPEC §5) before any parse, and agrees with it.
  for (const json of [d.json, ok.json, ...Object.values(HOST_FAULTS)]) {
    assert.equal(new Decision(json).ok, JSON.parse(json).ok === true, json);
  }
  assert.equal(new Decision('{"error":null,"ok":true}').ok, true, 'not canonical: parsed');
  assert.equal(new Decision('{ "ok": false }').ok, false, 'not canonical: parsed');
});

test('context: object (allowedTools or allowed_tools), JSON text, or nothing', () => {
  assert.equal(seed.evaluate(readCall).ok, true);
  assert.equal(seed.evaluate(readCall, { scopes: [] }).code, 'SCOPE_DENIED');
  assert.equal(seed.evaluate(readCall, { scopes: ['mcp:read'] }).ok, true);
  assert.equal(seed.evaluate(readCall, { allowedTools: ['wa_health'] }).code, 'NOT_FOUND');
  assert.equal(seed.evaluate(readCall, { allowed_tools: ['wa_health'] }).code, 'NOT_FOUND');
  assert.equal(seed.evaluate(readCall, '{"surface":"direct"}').ok, true);
  // A bad context is a deny decision from the engine, not an exception.
  const bad = seed.evaluate(readCall, { surface: 'sideways' });
  assert.equal(bad.ok, false);
  assert.ok(bad.code);
});

test('listExposable: direct surface lists only the read tools that need no confirmation', () => {
  const all = seed.listExposable();
  assert.equal(all.tools.length, 34);
  const direct = seed.listExposable({ surface: 'direct' });
  assert.ok(direct.names.length > 0 && direct.names.length < 34);
  for (const t of direct.tools) assert.equal(t.annotations.readOnlyHint, true, t.name);
  assert.deepEqual(direct.names, [...direct.names].sort());
  const scoped = seed.listExposable({ scopes: ['bob:consult'] });
  assert.ok(scoped.names.includes('bob_ask') && !scoped.names.includes('wa_health'));
});

test('errors are Error subclasses with stable codes', async () => {
  await assert.rejects(Toolgate.load({ policy: 'version: 1\nbogus: true\n', catalog: plansCatalog }), (e) => {
    assert.ok(e instanceof LoadError && e instanceof ProblemError && e instanceof ToolgateError && e instanceof Error);
    assert.equal(e.code, 'POLICY_UNKNOWN_KEY');
    assert.equal(e.origin, 'policy');
    assert.equal(e.line, 2);
    assert.equal(e.column, 1);
    return true;
  });
  await assert.rejects(Toolgate.load({ catalog: '{"tools": 3}' }), (e) => e instanceof LoadError && e.origin === 'catalog' && /^CATALOG_/.test(e.code));
  assert.throws(() => seed.listExposable({ surface: 'sideways' }), (e) => e instanceof ProblemError && e.code === 'CONTEXT_INVALID_VALUE');
  assert.throws(() => seed.listExposable('{'), (e) => e instanceof ProblemError && e.code === 'CONTEXT_SYNTAX');
  await assert.rejects(Toolgate.load({ catalog: 42 }), TypeError);
});

test('decide: the call pipeline, with how the confirmation was obtained', () => {
  const call = { name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD', confirmed: true } };
  // Default 'none': the model's own confirmed: true never counts.
  const none = plans.decide(call);
  assert.ok(none instanceof CallOutcome);
  assert.equal(none.ok, false);
  assert.equal(none.decision.code, 'CONFIRMATION_REQUIRED');
  assert.equal(none.forward, null);
  assert.equal(none.forwardJson, null);
  assert.deepEqual(none.blockedResult, JSON.parse(none.blockedResultJson ?? ''));
  assert.equal(none.blockedResult?.isError, true);
  assert.match(none.digest ?? '', /^sha256:[0-9a-f]{64}$/);
  assert.equal(plans.decide(call, undefined, 'none').blockedResultJson, none.blockedResultJson);
  // The engine's blocked result (a tool without outputSchema) has exactly the
  // shape this package builds for its own fault decisions.
  assert.equal(none.blockedResultJson, blockedResultJson(none.decision.json));
  // 'argument': it counts; the undeclared field is not forwarded.
  const argument = plans.decide(call, {}, 'argument');
  assert.equal(argument.ok, true);
  assert.equal(argument.forwardJson, '{"customer_id":"1","new_plan_id":"GOLD"}');
  assert.deepEqual(argument.forward, { customer_id: '1', new_plan_id: 'GOLD' });
  assert.equal(argument.blockedResult, null);
  assert.equal(argument.digest, null, 'no digest where no confirmation is pending or given');
  assert.equal(plans.decide(call, {}, 'person').digest, none.digest, 'the digest leaves the engine fields out');
  // 'person': the person accepted this very call; a tool that declares `confirmed` gets it.
  assert.deepEqual(plans.decide({ name: 'cancelar_conta', arguments: { customer_id: '1' } }, null, 'person').forward, { confirmed: true, customer_id: '1' });
  assert.equal(plans.decide(call, null, 'invalid').decision.code, 'CONFIRMATION_INVALID');
  // Hidden / unknown: NOT_FOUND, no blocked result (answer as for an unknown tool).
  const hidden = plans.decide(call, { surface: 'direct' }, 'person');
  assert.equal(hidden.decision.code, 'NOT_FOUND');
  assert.equal(hidden.blockedResultJson, null);
  assert.equal(hidden.digest, null);
  assert.deepEqual(JSON.parse(JSON.stringify(argument)), { decision: argument.decision.json, forward: argument.forwardJson, blocked_result: null, digest: argument.digest });
  for (const bad of ['yes', 'Argument', {}, { seal: {} }, { seal: { payload: 'p', caller: '', nowMs: -1 } }, { seal: { payload: 'p', caller: '', nowMs: 1.5 } }, { seal: { payload: 'p', caller: 1, nowMs: 1 } }]) {
    assert.throws(() => plans.decide(call, {}, /** @type {any} */ (bad)), TypeError, JSON.stringify(bad));
  }
});

test('sealPayload and a sealed confirmation: checked against the retried call, caller and clock', () => {
  const call = { name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD' } };
  const id = 'AAAAAAAAAAAAAAAAAAAAAA';
  const payload = plans.sealPayload(call, 'user-7', id, 1_900_000_000_000);
  const parsed = JSON.parse(payload);
  assert.equal(parsed.v, CONTRACT_VERSION);
  assert.equal(parsed.revision, plans.revision);
  assert.equal(parsed.digest, plans.decide(call).digest);
  assert.equal(plans.sealPayload(call, 'user-7', id, 1_900_000_000_000n), payload, 'number or bigint');
  const sealed = (/** @type {any} */ c, /** @type {string} */ caller, /** @type {number | bigint} */ nowMs) => plans.decide(c, {}, { seal: { payload, caller, nowMs } });
  assert.equal(sealed(call, 'user-7', 1_899_999_999_999).ok, true);
  assert.equal(sealed(call, 'user-7', 1_899_999_999_999n).ok, true);
  assert.equal(sealed(call, 'user-7', 1_900_000_000_000).decision.code, 'CONFIRMATION_INVALID', 'expired');
  assert.equal(sealed(call, 'user-8', 1).decision.code, 'CONFIRMATION_INVALID', 'another caller');
  assert.equal(sealed({ ...call, arguments: { ...call.arguments, new_plan_id: 'MAX' } }, 'user-7', 1).decision.code, 'CONFIRMATION_INVALID', 'other arguments');
  assert.equal(sealed(call, 'user-7', 2n ** 64n - 1n).decision.code, 'CONFIRMATION_INVALID', 'u64 max');
  // Problems are the typed error.
  assert.throws(() => plans.sealPayload(call, '', 'short', 1), (e) => e instanceof ProblemError && e.code === 'CALL_INVALID_VALUE' && e.origin === 'call');
  assert.throws(() => plans.sealPayload({ name: 'nope' }, '', id, 1), (e) => e instanceof ProblemError && e.code === 'CALL_INVALID_VALUE');
  assert.throws(() => plans.sealPayload(call, '', id, -1), TypeError);
  assert.throws(() => plans.sealPayload(call, '', id, 2n ** 64n), TypeError);
  assert.throws(() => plans.sealPayload(new Uint8Array(MAX_INPUT_BYTES + 1), '', id, 1), InputTooLargeError);
  // A lone surrogate reached the engine as U+FFFD: a seal made for one
  // caller held for another (Python refuses such a string too).
  const lone = plans.sealPayload(call, 'alice\uFFFD', id, 1_900_000_000_000);
  assert.throws(() => plans.sealPayload(call, 'alice\uD800', id, 1_900_000_000_000), TypeError);
  assert.throws(() => plans.decide(call, {}, { seal: { payload: lone, caller: 'alice\uD800', nowMs: 1 } }), TypeError);
  assert.throws(() => plans.decide(call, {}, { seal: { payload: `${lone}\uDC00`, caller: 'alice\uFFFD', nowMs: 1 } }), TypeError);
  assert.equal(plans.decide(call, {}, { seal: { payload: lone, caller: 'alice\uFFFD', nowMs: 1 } }).ok, true);
  assert.equal(/** @type {any} */ (plans).stripFields, undefined, 'strip-fields is gone from the contract');
});

test('findings and problems keep the JS strings of the WIT enums', async () => {
  const gate = await Toolgate.load({ policy: 'version: 1\ntool_policies:\n  not_in_catalog:\n    operation_type: read_only\n', catalog: plansCatalog });
  assert.ok(gate.findings.length > 0);
  for (const f of gate.findings) {
    assert.ok(f.severity === 'error' || f.severity === 'warning', f.severity);
    assert.equal(typeof f.problem.origin, 'string');
  }
  await assert.rejects(Toolgate.load({ policy: 'version: 1\nbogus: 1\n', catalog: plansCatalog }), (e) => e instanceof LoadError && e.origin === 'policy');
});

test('turn: the state machine, state in and state out', () => {
  const input = { context: { surface: 'confirming' }, calls: [{ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD' } }] };
  const first = plans.turn(null, input);
  assert.equal(first.value.transaction_status, 'AWAITING_CONFIRMATION');
  assert.ok(first.value.pending_tool_call);
  const second = plans.turn(first.json, { context: { surface: 'confirming' }, calls: [], user_confirmed: true });
  assert.equal(second.value.confirmation_received, true);
  assert.deepEqual(second.value.execute, [input.calls[0]]);
  assert.equal(second.value.transaction_status, 'EXECUTING');
  assert.throws(() => plans.turn('{', input), (e) => e instanceof ProblemError && e.origin === 'state');
  // The previous TurnState itself, and the context spelled as decide's.
  const yes = { context: { surface: 'confirming' }, calls: [], user_confirmed: first.value.pending_digest };
  assert.equal(plans.turn(first, yes).json, plans.turn(first.json, yes).json);
  const camel = { context: { surface: 'confirming', allowedTools: ['consultar_plano'] }, calls: input.calls };
  const snake = { context: { surface: 'confirming', allowed_tools: ['consultar_plano'] }, calls: input.calls };
  assert.equal(plans.turn(null, camel).json, plans.turn(null, snake).json);
  assert.deepEqual(plans.turn(null, camel).value.available_mcp_tools, ['consultar_plano']);
  // An allowlist or scopes left undefined are refused, not read as absent
  // (absent: every tool, no scope check).
  for (const key of ['allowedTools', 'allowed_tools', 'scopes']) {
    const odd = { context: { surface: 'confirming', [key]: undefined }, calls: input.calls };
    assert.throws(() => plans.turn(null, odd), (e) => e instanceof ProblemError, key);
  }
});

test('turn: a proposed argument JSON cannot carry is refused by the engine, not rewritten to null', () => {
  for (const odd of [Infinity, NaN, undefined, new Date(0)]) {
    const input = { context: { surface: 'confirming' }, calls: [{ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: odd } }] };
    assert.throws(() => plans.turn(null, input), (e) => e instanceof ProblemError, String(odd));
  }
  // What JSON can carry is read as before.
  const input = { context: { surface: 'confirming' }, calls: [{ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD' } }] };
  assert.equal(plans.turn(null, input).json, plans.turn(null, JSON.stringify(input)).json);
});

test('turn: a state holding an integer a number would round is read only as text', () => {
  const input = '{"context":{"surface":"confirming"},"calls":[{"name":"alterar_plano","arguments":{"customer_id":"1","new_plan_id":"GOLD","account":12345678901234567891}}]}';
  const state = plans.turn(null, input);
  assert.match(state.json, /"account":12345678901234567891/);
  assert.throws(() => state.value, RangeError);
  assert.throws(() => JSON.stringify(state), RangeError);
  // Digits a number writes back as they are read as before.
  const fine = plans.turn(null, input.replace('12345678901234567891', '12345678901234567000'));
  assert.equal(fine.value.selected_tool_call.arguments.account, 12345678901234567000);
});

test('inputs over 4 MiB get INPUT_TOO_LARGE without reaching the component', () => {
  const pad = 'x'.repeat(MAX_INPUT_BYTES);
  const big = seed.evaluate(`{"name":"wa_health","arguments":{"pad":"${pad}"}}`);
  assert.equal(big.json, HOST_FAULTS.INPUT_TOO_LARGE);
  assert.equal(seed.evaluate(new Uint8Array(MAX_INPUT_BYTES + 1)).json, HOST_FAULTS.INPUT_TOO_LARGE);
  const ctx = JSON.stringify({ scopes: ['é'.repeat(MAX_INPUT_BYTES / 2)] }); // fewer chars than bytes
  assert.ok(ctx.length < MAX_INPUT_BYTES);
  assert.equal(seed.evaluate(readCall, ctx).json, HOST_FAULTS.INPUT_TOO_LARGE);
  for (const o of [seed.decide(`{"name":"wa_health","arguments":{"pad":"${pad}"}}`), seed.decide(readCall, ctx, 'argument')]) {
    assertFaultOutcome(o, 'INPUT_TOO_LARGE');
  }
  assert.throws(() => seed.listExposable(ctx), (e) => e instanceof InputTooLargeError && e.code === 'INPUT_TOO_LARGE');
  // Exactly at the limit still reaches the component (and gets its own answer).
  const exact = new Uint8Array(MAX_INPUT_BYTES).fill(0x20);
  assert.notEqual(seed.evaluate(exact).code, 'INPUT_TOO_LARGE');
  assert.equal(seed.evaluate(readCall).ok, true);
});

test('every host fault is a decision of its own: editing one handed out changes no later one', () => {
  const pad = 'x'.repeat(MAX_INPUT_BYTES);
  const tooLarge = `{"name":"wa_health","arguments":{"pad":"${pad}"}}`;
  const first = seed.decide(tooLarge);
  // What an audit hook might do to the decision it was given.
  first.decision.value.ok = true;
  first.decision.value.metadata.tool = 'transfer_funds';
  for (const later of [seed.decide(tooLarge).decision, seed.evaluate(tooLarge)]) {
    assert.notEqual(later, first.decision);
    assert.equal(later.ok, false);
    assert.equal(later.value.metadata.tool, null);
    assert.equal(later.json, HOST_FAULTS.INPUT_TOO_LARGE);
  }
});

// Host faults (SPEC §7), each injected into the real component: the deny has
// the exact bytes of host-faults.json, list/turn throw the typed error with
// the code, and the next ordinary call on the same object gets the known-good
// answer.
const plansCall = { name: 'consultar_plano', arguments: { customer_id: '1' } };
const plansTurn = { context: { surface: 'confirming' }, calls: [{ name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD' } }] };
/** About 3.9 MB: parsing it grows the guest's memory from ~2 MB to ~56 MB and takes ~0.2 s. */
const hugeCall = `{"name":"consultar_plano","arguments":{"customer_id":"1","q":"${'x'.repeat(1_000_000)}","r":[${'1,'.repeat(900_000)}1]}}`;
/** About 3.6 MB of context: 900 000 scopes. */
const hugeContext = `{"scopes":[${'"s",'.repeat(900_000)}"s"]}`;
/** About 3.6 MB of turn input: one call carrying 1.8 million numbers. */
const hugeTurn = `{"context":{},"calls":[{"name":"consultar_plano","arguments":{"r":[${'1,'.repeat(1_800_000)}1]}}]}`;

/**
 * A fault outcome: the host-built decision and the blocked result in the
 * engine's shape (toolgate `Outcome::fault`), byte for byte.
 * @param {CallOutcome} o @param {keyof typeof HOST_FAULTS} code
 */
function assertFaultOutcome(o, code) {
  assert.equal(o.decision.json, HOST_FAULTS[code]);
  assert.equal(o.blockedResultJson, `{"content":[{"type":"text","text":${JSON.stringify(HOST_FAULTS[code])}}],"structuredContent":${HOST_FAULTS[code]},"isError":true}`);
  assert.deepEqual(o.blockedResult, { content: [{ type: 'text', text: HOST_FAULTS[code] }], structuredContent: JSON.parse(HOST_FAULTS[code]), isError: true });
  assert.equal(o.forward, null);
  assert.equal(o.digest, null);
}

/** @param {Toolgate} gate */
function knownGood(gate) {
  const decision = gate.evaluate(plansCall);
  assert.equal(decision.ok, true);
  return { decision: decision.json, list: gate.listExposable().json, turn: gate.turn(null, plansTurn).json, outcome: JSON.stringify(gate.decide(plansCall)) };
}
/** @param {Toolgate} gate @param {ReturnType<typeof knownGood>} good */
function assertServed(gate, good) {
  assert.equal(gate.evaluate(plansCall).json, good.decision, 'the next call is served');
  assert.equal(gate.listExposable().json, good.list);
  assert.equal(gate.turn(null, plansTurn).json, good.turn);
  assert.equal(JSON.stringify(gate.decide(plansCall)), good.outcome);
}
/** @param {Function} type @param {string} code */
const faultError = (type, code) => (/** @type {any} */ e) => e instanceof type && e instanceof EngineFaultError && e instanceof ToolgateError && e.code === code;

test('the host limits have their defaults and are options', async () => {
  assert.equal(DEFAULT_MAX_MEMORY_BYTES, 1 << 30);
  assert.equal(DEFAULT_DEADLINE_MS, 5000);
  assert.equal(plans.maxMemoryBytes, DEFAULT_MAX_MEMORY_BYTES);
  assert.equal(plans.deadlineMs, DEFAULT_DEADLINE_MS);
  const gate = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog, maxMemoryBytes: 64 << 20, deadlineMs: Infinity });
  assert.equal(gate.maxMemoryBytes, 64 << 20);
  assert.equal(gate.deadlineMs, Infinity);
  await assert.rejects(Toolgate.load({ catalog: plansCatalog, deadlineMs: 0 }), TypeError);
  await assert.rejects(Toolgate.load({ catalog: plansCatalog, maxMemoryBytes: /** @type {any} */ ('1G') }), TypeError);
  // Rules that do not fit under the cap do not load.
  await assert.rejects(Toolgate.load({ catalog: seedCatalog, maxMemoryBytes: 1 << 20 }), faultError(EngineOutOfMemoryError, 'ENGINE_OUT_OF_MEMORY'));
});

test('a real trap in the component denies with ENGINE_TRAP, and the next call is served', async () => {
  const gate = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog });
  const good = knownGood(gate);
  const raw = gate[Symbol.for('toolgate.test.rawExports')];
  gate[kInjectTrap]();
  const trapped = gate.evaluate(plansCall);
  assert.equal(trapped.json, HOST_FAULTS.ENGINE_TRAP);
  assert.equal(trapped.ok, false);
  assert.equal(gate.recoveries, 1);
  assert.notEqual(gate[Symbol.for('toolgate.test.rawExports')], raw, 'a new instance');
  assertServed(gate, good);
  // On list/turn: EngineTrapError carrying the wasm trap (an out-of-bounds
  // read, not an allocation failure), then the gate works again.
  gate[kInjectTrap]();
  assert.throws(() => gate.listExposable(), (e) => faultError(EngineTrapError, 'ENGINE_TRAP')(e)
    && e.cause instanceof WebAssembly.RuntimeError && /out of bounds/.test(e.cause.message));
  assertServed(gate, good);
  gate[kInjectTrap]();
  assert.throws(() => gate.turn(null, plansTurn), faultError(EngineTrapError, 'ENGINE_TRAP'));
  assertServed(gate, good);
  gate[kInjectTrap]();
  assertFaultOutcome(gate.decide(plansCall, {}, 'argument'), 'ENGINE_TRAP');
  assertServed(gate, good);
  gate[kInjectTrap]();
  assert.throws(() => gate.sealPayload(plansCall, '', 'AAAAAAAAAAAAAAAAAAAAAA', 1), faultError(EngineTrapError, 'ENGINE_TRAP'));
  assertServed(gate, good);
  assert.equal(gate.recoveries, 5);
  gate.close();
  assert.throws(() => gate.evaluate(plansCall), (e) => e instanceof ToolgateError && e.code === 'CLOSED');
});

test('memory over the cap denies with ENGINE_OUT_OF_MEMORY, and the next call is served on a new instance', async () => {
  const gate = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog, maxMemoryBytes: 24 << 20 });
  const good = knownGood(gate);
  const raw = gate[Symbol.for('toolgate.test.rawExports')];
  const oom = gate.evaluate(hugeCall);
  assert.equal(oom.json, HOST_FAULTS.ENGINE_OUT_OF_MEMORY);
  assert.ok(raw.memory.buffer.byteLength > 24 << 20, 'the old instance really grew past the cap');
  assert.notEqual(gate[Symbol.for('toolgate.test.rawExports')], raw, 'a new instance');
  assertServed(gate, good);
  assert.throws(() => gate.listExposable(hugeContext), faultError(EngineOutOfMemoryError, 'ENGINE_OUT_OF_MEMORY'));
  assertServed(gate, good);
  assert.throws(() => gate.turn(null, hugeTurn), faultError(EngineOutOfMemoryError, 'ENGINE_OUT_OF_MEMORY'));
  assertServed(gate, good);
  assertFaultOutcome(gate.decide(hugeCall), 'ENGINE_OUT_OF_MEMORY');
  assertServed(gate, good);
  assert.equal(gate.recoveries, 4);
  // Under the default cap the same call gets the engine's own answer.
  assert.equal(plans.evaluate(hugeCall).code, 'BAD_REQUEST');
});

test('while the instance cannot be replaced every call denies, each trying once to replace it', async () => {
  const gate = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog });
  const good = knownGood(gate);
  let instances = 0;
  const Instance = WebAssembly.Instance;
  // @ts-ignore: a counting stand-in for the constructor the package uses
  WebAssembly.Instance = new Proxy(Instance, { construct: (target, args) => { instances += 1; return Reflect.construct(target, args); } });
  try {
    gate.maxMemoryBytes = 1; // no instance can load the rules under it
    assert.equal(gate.evaluate(plansCall).json, HOST_FAULTS.ENGINE_OUT_OF_MEMORY);
    assert.equal(instances, 1, 'the replacement was tried once, and failed');
    for (let i = 1; i <= 3; i += 1) {
      assert.equal(gate.evaluate(plansCall).json, HOST_FAULTS.ENGINE_TRAP);
      assert.equal(instances, 1 + i, 'one attempt per call');
    }
    assert.throws(() => gate.listExposable(), faultError(EngineTrapError, 'ENGINE_TRAP'));
    assert.equal(instances, 5);
    assert.equal(gate.recoveries, 0);
    gate.maxMemoryBytes = DEFAULT_MAX_MEMORY_BYTES;
    assertServed(gate, good);
    assert.equal(gate.recoveries, 1, 'the next call after the cause went away is served on a new instance');
  } finally {
    WebAssembly.Instance = Instance;
  }
});

test('a call past the deadline denies with ENGINE_LIMIT, and the next call is served', async () => {
  const gate = await Toolgate.load({ policy: plansPolicy, catalog: plansCatalog });
  const good = knownGood(gate);
  gate.deadlineMs = 1; // the huge call takes ~0.2 s
  assert.equal(gate.evaluate(hugeCall).json, HOST_FAULTS.ENGINE_LIMIT);
  assert.throws(() => gate.listExposable(hugeContext), faultError(EngineLimitError, 'ENGINE_LIMIT'));
  assert.throws(() => gate.turn(null, hugeTurn), faultError(EngineLimitError, 'ENGINE_LIMIT'));
  assertFaultOutcome(gate.decide(hugeCall), 'ENGINE_LIMIT');
  gate.deadlineMs = DEFAULT_DEADLINE_MS;
  assertServed(gate, good);
  assert.equal(gate.recoveries, 0, 'the instance finished its call: it is kept');
});

test('loads from an already compiled WebAssembly.Module, sync and async, and checks the contract version', async () => {
  const module = await compileCoreModule();
  assert.ok(module instanceof WebAssembly.Module);
  const a = Toolgate.fromModule({ module, policy: plansPolicy, catalog: plansCatalog });
  const b = await Toolgate.load({ module: Promise.resolve(module), policy: plansPolicy, catalog: plansCatalog });
  const c = await Toolgate.load({ module: readFileSync(new URL('../gen/toolgate_policy.core.wasm', import.meta.url)), policy: plansPolicy, catalog: plansCatalog });
  for (const g of [a, b, c]) assert.equal(g.revision, plans.revision);
  assert.equal(CONTRACT_VERSION, '0.2.0');
  assert.throws(() => new Toolgate(/** @type {any} */ ({}), { catalog: plansCatalog }), TypeError);
});

test('later instances of a module skip its checks and still decide for their own rules on the fast path', async () => {
  // The first instance checks the module's contract version and probes the
  // fast path; the ones after it reuse both (runtime.js, checkedModules). Each
  // must still call the guest with its own rule set's rep: two rule sets of
  // different catalogs, made alternately, answer as jco's wrapper does for each.
  const module = await compileCoreModule();
  const kState = Symbol.for('toolgate.test.fastPath');
  const calls = [readCall, { name: 'listar_planos', arguments: {} }, { name: 'alterar_plano', arguments: { customer_id: '1', new_plan_id: 'GOLD' } }, '{}'];
  for (let round = 0; round < 3; round++) {
    for (const rules of [{ catalog: seedCatalog }, { policy: plansPolicy, catalog: plansCatalog }]) {
      const fast = Toolgate.fromModule({ module, ...rules });
      const viaJco = Toolgate.fromModule({ module, ...rules, fastPath: false });
      assert.equal(/** @type {any} */ (fast)[kState].active, true, `round ${round}: the fast path is used`);
      assert.equal(/** @type {any} */ (viaJco)[kState].active, false);
      for (const call of calls) assert.equal(fast.evaluate(call).json, viaJco.evaluate(call).json, `round ${round}: ${JSON.stringify(call)}`);
      fast.close();
      viaJco.close();
    }
  }
  // The two catalogs decide a call differently, so a rule set answering with another's rules would show.
  const [a, b] = [Toolgate.fromModule({ module, catalog: seedCatalog }), Toolgate.fromModule({ module, policy: plansPolicy, catalog: plansCatalog })];
  assert.notEqual(a.evaluate(readCall).json, b.evaluate(readCall).json);
});

test('policy absent means legacy: the catalog decides', async () => {
  const legacy = await Toolgate.load({ catalog: plansCatalog });
  assert.notEqual(legacy.revision, plans.revision);
  assert.equal(legacy.evaluate({ name: 'listar_planos' }).ok, true);
});

test('the evaluate fast path (canonical ABI) and jco\'s wrapper give the same bytes', async () => {
  const module = await compileCoreModule();
  const fast = Toolgate.fromModule({ module, catalog: seedCatalog });
  const viaJco = Toolgate.fromModule({ module, catalog: seedCatalog, fastPath: false });
  const calls = [
    readCall, '', '{}', 'null', '{"name":"wa_send_text","arguments":{"confirmed":true}}',
    new Uint8Array([0x7b, 0xff, 0xfe]), '{"name":"get_capabilities","arguments":{"x":"é€😀"}}',
    `{"name":"wa_list_chats","arguments":{"q":"${'a'.repeat(100_000)}"}}`,
  ];
  // Alternating contexts: the fast path keeps the last context's UTF-8 (up to 4 KiB of text).
  const contexts = [undefined, '', '{"surface":"direct"}', { scopes: ['mcp:read'], allowedTools: ['get_capabilities'] }, '{', { surface: 'é' },
    { scopes: ['mcp:read', 's'.repeat(5000)] }, { scopes: ['mcp:read', 's'.repeat(5000)] }, '{"surface":"direct"}'];
  for (const call of calls) {
    for (const context of contexts) {
      assert.equal(fast.evaluate(call, context).json, viaJco.evaluate(call, context).json, `${String(call).slice(0, 40)} ${JSON.stringify(context)}`);
    }
  }
  // Many calls: guest memory reuse and growth stay right.
  for (let i = 0; i < 2000; i++) {
    const c = { name: 'get_conversation', arguments: { conversation_id: `c${i}`, pad: 'x'.repeat(i) } };
    assert.equal(fast.evaluate(c).json, viaJco.evaluate(c).json);
  }
});

test('load options: a class or Object.create gives them; Object.prototype never does (prototype pollution is refused)', async () => {
  // Legacy rules (no policy): the write waits for confirmation; the policy
  // below makes it read_only.
  const write = { name: 'alterar_plano', arguments: { customer_id: 'c-1', new_plan_id: 'GOLD' } };
  const legacy = (await Toolgate.load({ catalog: plansCatalog })).evaluate(write).json;
  assert.equal(JSON.parse(legacy).error.code, 'CONFIRMATION_REQUIRED');
  const readOnly = 'version: 1\ntool_policies:\n  alterar_plano:\n    operation_type: read_only\n';
  // Inherited from the host's own prototype: taken (dropping it would load no policy).
  const inherited = Object.create({ policy: readOnly });
  inherited.catalog = plansCatalog;
  assert.equal((await Toolgate.load(inherited)).evaluate(write).ok, true);
  class Options { get policy() { return readOnly; } get catalog() { return plansCatalog; } }
  assert.equal((await Toolgate.load(/** @type {any} */ (new Options()))).evaluate(write).ok, true);
  const proxied = new Proxy({}, { get: (_, key) => ({ policy: readOnly, catalog: plansCatalog })[/** @type {string} */ (key)] });
  assert.equal((await Toolgate.load(/** @type {any} */ (proxied))).evaluate(write).ok, true);
  // From Object.prototype: refused, never read and never silently dropped.
  const proto = /** @type {any} */ (Object.prototype);
  for (const [key, value] of /** @type {const} */ ([['policy', readOnly], ['module', new Uint8Array([1, 2, 3])], ['maxMemoryBytes', 1]])) {
    proto[key] = value;
    try {
      await assert.rejects(Toolgate.load({ catalog: plansCatalog }), (e) => e instanceof TypeError && e.message.includes(`\`${key}\``), key);
    } finally {
      delete proto[key];
    }
  }
  assert.equal((await Toolgate.load({ catalog: plansCatalog })).evaluate(write).json, legacy);
});

test('bytes that are not the component are COMPONENT_INVALID, not a bare CompileError or ENGINE_TRAP', async () => {
  const empty = new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]); // a valid, empty module
  for (const module of [new Uint8Array([1, 2, 3]), empty]) {
    await assert.rejects(Toolgate.load({ module, catalog: plansCatalog }), (e) => e instanceof ComponentError && e.code === 'COMPONENT_INVALID');
  }
});
