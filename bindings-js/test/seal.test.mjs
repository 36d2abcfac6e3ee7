// Sealed requestState (src/seal.js): the Rust gateway's tokens
// (tests/vectors/seals/request-state.json) open here to the same payload, or
// are refused, and the engine decides the opened payloads as the gateway does;
// plus round trip, rotation, tampering and key-ring checks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hkdfSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { InvalidStateError, StateKeyError, StateKeys, Toolgate, ToolgateError, MAX_STATE_TOKEN_BYTES, WebStateKeys } from '../src/index.js';
import { vectorsDir } from './lib/vectors.mjs';

const vectorPath = join(vectorsDir, 'seals', 'request-state.json');
const doc = JSON.parse(readFileSync(vectorPath, 'utf8'));
const A = 'an-operator-secret-of-at-least-32-bytes-A';
const B = 'an-operator-secret-of-at-least-32-bytes-B';

/** @param {() => unknown} fn @param {string} [reason] */
function refused(fn, reason) {
  assert.throws(fn, (e) => e instanceof InvalidStateError && e instanceof ToolgateError && e.code === 'STATE_INVALID' && (reason === undefined || e.reason === reason));
}

test('node hkdf with an empty salt is RFC 5869 "no salt" (HashLen zero bytes)', () => {
  // RFC 5869 A.3: SHA-256, salt and info not provided.
  const okm = Buffer.from(hkdfSync('sha256', Buffer.alloc(22, 0x0b), Buffer.alloc(0), Buffer.alloc(0), 42)).toString('hex');
  assert.equal(okm, '8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8');
  const zeros = Buffer.from(hkdfSync('sha256', Buffer.from(A), Buffer.alloc(32), Buffer.from('i'), 32));
  const empty = Buffer.from(hkdfSync('sha256', Buffer.from(A), Buffer.alloc(0), Buffer.from('i'), 32));
  assert.deepEqual(empty, zeros);
});

test('seal vectors: the gateway\'s tokens open (or are refused) and decide as in Rust', async (t) => {
  assert.ok(doc.cases.length >= 7);
  const keys = new StateKeys(doc.secrets);
  const dir = dirname(vectorPath);
  const gate = await Toolgate.load({
    policy: readFileSync(join(dir, doc.policy), 'utf8'),
    catalog: readFileSync(join(dir, doc.catalog), 'utf8'),
  });
  for (const c of doc.cases) {
    if (c.payload === null) {
      refused(() => keys.open(c.token));
      continue;
    }
    const payload = keys.open(c.token);
    assert.equal(payload, c.payload, c.name);
    const outcome = gate.decide(c.call, {}, { seal: { payload, caller: c.caller, nowMs: c.now_ms } });
    assert.equal(outcome.decision.code, c.expect_code, c.name);
    assert.equal(outcome.forward !== null, c.expect_code === null, c.name);
    t.diagnostic(`${c.name}: ${c.expect_code ?? 'allowed'}`);
  }
  // And a payload this host sealed itself decides the same.
  const call = doc.cases[0].call;
  const payload = gate.sealPayload(call, 'user-7', 'CCCCCCCCCCCCCCCCCCCCCC', 1_900_000_000_000);
  const opened = keys.open(keys.seal(payload));
  assert.equal(gate.decide(call, {}, { seal: { payload: opened, caller: 'user-7', nowMs: 1_899_999_000_000 } }).decision.code, null);
  assert.equal(gate.decide(call, {}, { seal: { payload: opened, caller: 'user-8', nowMs: 1_899_999_000_000 } }).decision.code, 'CONFIRMATION_INVALID');
  assert.equal(gate.decide(call, {}, { seal: { payload: opened, caller: 'user-7', nowMs: 1_900_000_000_001 } }).decision.code, 'CONFIRMATION_INVALID');
  gate.close();
});

test('round trip: seal then open, a fresh nonce each time, the fingerprint', () => {
  const keys = new StateKeys([A]);
  for (const payload of ['payload', '', 'ção ✓ 🦀', 'x'.repeat(5000)]) {
    const token = keys.seal(payload);
    assert.match(token, /^tg1\.[A-Za-z0-9_-]+$/);
    assert.equal(keys.open(token), payload);
  }
  assert.notEqual(keys.seal('payload'), keys.seal('payload'));
  assert.match(keys.fingerprint, /^[0-9a-f]{8}$/);
  assert.equal(keys.fingerprint, Buffer.from(keys.seal('p').slice(4), 'base64url').subarray(0, 4).toString('hex'));
  // The same secret as a string or as its UTF-8 bytes is the same key.
  assert.equal(new StateKeys([new TextEncoder().encode(A)]).open(keys.seal('p')), 'p');
  assert.equal(new StateKeys([doc.secrets[0]]).fingerprint, Buffer.from(doc.cases[0].token.slice(4), 'base64url').subarray(0, 4).toString('hex'));
  assert.throws(() => keys.seal(/** @type {any} */ (1)), TypeError);
});

test('rotation: the first key seals, every key opens', () => {
  const old = new StateKeys([A]);
  const token = old.seal('payload');
  const rotated = new StateKeys([B, A]);
  assert.equal(rotated.open(token), 'payload');
  assert.notEqual(rotated.fingerprint, old.fingerprint);
  assert.equal(rotated.fingerprint, new StateKeys([B]).fingerprint);
  refused(() => old.open(rotated.seal('new')), 'unknown-key');
  refused(() => new StateKeys([B]).open(token), 'unknown-key');
  const fromText = StateKeys.fromText(`# current first\n${B}\r\n\n${A}\n`);
  assert.equal(fromText.fingerprint, rotated.fingerprint);
  assert.equal(fromText.open(token), 'payload');
  assert.equal(StateKeys.fromText(` ${B} , ${A} `).open(token), 'payload');
});

test('tampering and malformed tokens are refused', () => {
  const keys = new StateKeys([A]);
  const token = keys.seal('payload');
  const raw = Buffer.from(token.slice(4), 'base64url');
  const spell = (/** @type {Buffer} */ b) => 'tg1.' + b.toString('base64url');
  // Any single bit flipped past the key id: forged; in the key id: unknown key.
  for (let i = 0; i < raw.length; i++) {
    const t = Buffer.from(raw);
    t[i] ^= 1 << (i % 8);
    refused(() => keys.open(spell(t)), i < 4 ? 'unknown-key' : 'forged');
  }
  refused(() => keys.open(spell(raw.subarray(0, raw.length - 1))), 'forged');
  refused(() => keys.open(spell(raw.subarray(0, 31))), 'malformed');
  for (const bad of ['', 'tg1.', 'v1.abc', 'tg1.!!!!', `${token}=`, token.replace('tg1.', 'tg2.'), token.replace('tg1.', 'TG1.'),
    `${token} `, ` ${token}`, `${token}\n`, token.slice(0, 4) + Buffer.from(raw).toString('base64'), `tg1.${token.slice(4, 20)}+/${token.slice(22)}`,
    token.slice(0, -1) + 'é', `${token}A`]) {
    if (bad === token) continue;
    refused(() => keys.open(bad));
  }
  // Non-canonical trailing bits: node decodes them to the same bytes, yet refused.
  for (const payload of ['payload!', 'payload!!']) {
    const body = keys.seal(payload).slice(4);
    assert.notEqual(body.length % 4, 0);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const sibling = alphabet[alphabet.indexOf(/** @type {string} */ (body.at(-1))) ^ 1];
    const other = `tg1.${body.slice(0, -1)}${sibling}`;
    assert.deepEqual(Buffer.from(other.slice(4), 'base64url'), Buffer.from(body, 'base64url'));
    assert.equal(keys.open(`tg1.${body}`), payload);
    refused(() => keys.open(other), 'malformed');
  }
  for (const bad of [null, undefined, 1, {}, [token], Buffer.from(token)]) refused(() => keys.open(bad), 'malformed');
  // Over 16 KiB: not sealed (open would refuse it), and refused before decoding.
  assert.throws(() => keys.seal('x'.repeat(12_300)), (e) => e instanceof RangeError && /over the 16384/.test(e.message));
  const fits = keys.seal('x'.repeat(12_000));
  assert.ok(fits.length <= MAX_STATE_TOKEN_BYTES);
  assert.equal(keys.open(fits).length, 12_000);
  refused(() => keys.open(fits + 'A'.repeat(MAX_STATE_TOKEN_BYTES)), 'malformed');
  // A lone surrogate would be sealed, or derive a key, as U+FFFD: refused as Python refuses it.
  assert.throws(() => keys.seal('lone\uD800'), TypeError);
  assert.throws(() => new StateKeys(['\uD800'.repeat(32)]), TypeError);
});

test('key ring: short, duplicate, missing and mistyped secrets are refused', () => {
  /** @param {unknown} secrets @param {string} reason @param {number} index */
  const badRing = (secrets, reason, index) => assert.throws(() => new StateKeys(/** @type {any} */ (secrets)),
    (e) => e instanceof StateKeyError && e instanceof ToolgateError && e.code === 'STATE_KEY_INVALID' && e.reason === reason && e.index === index);
  badRing(['short'], 'too-short', 0);
  badRing([A, 'x'.repeat(31)], 'too-short', 1);
  badRing([A, new Uint8Array(31)], 'too-short', 1);
  // Length is counted in UTF-8 bytes: 15 × 'é' + 'a' is 31 bytes, 16 × 'é' is 32.
  badRing(['é'.repeat(15) + 'a'], 'too-short', 0);
  assert.match(new StateKeys(['é'.repeat(16)]).fingerprint, /^[0-9a-f]{8}$/);
  badRing([A, A], 'duplicate', 1);
  badRing([A, B, new TextEncoder().encode(A)], 'duplicate', 2);
  badRing([], 'empty', -1);
  assert.throws(() => StateKeys.fromText('# only a comment\n'), (e) => e instanceof StateKeyError && e.reason === 'empty');
  assert.throws(() => new StateKeys(/** @type {any} */ (A)), TypeError);
  assert.throws(() => new StateKeys(/** @type {any} */ ([A, 42])), TypeError);
  // The error never carries the secret.
  assert.throws(() => new StateKeys(['a-short-secret']), (e) => e instanceof StateKeyError && !String(/** @type {Error} */ (e).message).includes('a-short-secret'));
});

test('the worker entry point does not reach node:crypto (seal.js is Node only)', () => {
  const src = new URL('../src/', import.meta.url);
  const seen = new Set();
  const walk = (/** @type {string} */ file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(new URL(file, src), 'utf8');
    assert.ok(!/from\s+'node:/.test(text) && !/import\(\s*'node:/.test(text), `${file} imports a node: module`);
    for (const m of text.matchAll(/from\s+'\.\/([\w-]+\.js)'/g)) walk(m[1]);
  };
  walk('worker.js');
  assert.ok(seen.has('core.js') && seen.has('errors.js') && !seen.has('seal.js'), [...seen].join(' '));
});

/**
 * What a ring's `open` answers for a token: the payload or the refusal's reason.
 * @param {(token: unknown) => string | Promise<string>} open @param {unknown} token
 */
async function answer(open, token) {
  try {
    return { payload: await open(token) };
  } catch (e) {
    if (!(e instanceof InvalidStateError)) throw e;
    return { refused: e.reason };
  }
}

/** The gateway's tokens, tokens sealed here, and hostile spellings of them. */
function tokensToTry(/** @type {StateKeys} */ keys) {
  const own = keys.seal('{"id":"x"}');
  const body = own.slice(4);
  return [
    ...doc.cases.map((/** @type {any} */ c) => c.token),
    own, `${own}=`, `${own}==`, `tg1.${body.replace(/-/g, '+').replace(/_/g, '/')}`, ` ${own}`, `${own}\n`,
    own.slice(0, -1), own.slice(0, 30), `tg2.${body}`, 'tg1.', '', `tg1.${body.slice(0, -1)}${body.at(-1) === 'A' ? 'B' : 'A'}`,
    `${own}${'A'.repeat(MAX_STATE_TOKEN_BYTES)}`, null, 7, {},
  ];
}

test('WebStateKeys (WebCrypto) opens and refuses every token exactly as StateKeys does, and they open each other\'s', async () => {
  const node = new StateKeys(doc.secrets);
  const web = await WebStateKeys.create(doc.secrets);
  assert.equal(web.fingerprint, node.fingerprint);
  for (const token of tokensToTry(node)) {
    assert.deepEqual(await answer((t) => web.open(t), token), await answer((t) => node.open(t), token), String(token));
  }
  const payload = doc.cases[0].payload;
  assert.equal(node.open(await web.seal(payload)), payload);
  assert.equal(await web.open(node.seal(payload)), payload);
  assert.notEqual(await web.seal(payload), await web.seal(payload), 'a fresh nonce per seal');
  // Rotation and the gateway's secret text.
  const rotated = await WebStateKeys.fromText(`${B}\n# old\n${A}`);
  const old = await WebStateKeys.create([A]);
  assert.equal(await rotated.open(await old.seal('p')), 'p');
  assert.deepEqual(await answer((t) => old.open(t), await rotated.seal('p')), { refused: 'unknown-key' });
  // The ring's rules are the same code as StateKeys'.
  await assert.rejects(WebStateKeys.create([]), (e) => e instanceof StateKeyError && e.reason === 'empty');
  await assert.rejects(WebStateKeys.create([A, A]), (e) => e instanceof StateKeyError && e.reason === 'duplicate' && e.index === 1);
  await assert.rejects(WebStateKeys.create(['short']), (e) => e instanceof StateKeyError && e.reason === 'too-short');
  await assert.rejects(web.seal('x'.repeat(12_300)), RangeError);
  assert.throws(() => new WebStateKeys(/** @type {any} */ (Symbol('x')), []), TypeError);
});
