// The conformance CLI: byte-identical to the vectors' expected bytes, and to
// the Rust CLI (target/release/toolgate) when it has been built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { cliRuns } from './lib/cli-cases.mjs';
import { loadVectorFile, pkgDir, vectorFiles, vectorsDir } from './lib/vectors.mjs';

const bin = join(pkgDir, 'bin', 'toolgate.mjs');
const rustCli = process.env.TOOLGATE_RUST_CLI ? resolve(process.env.TOOLGATE_RUST_CLI) : resolve(pkgDir, '..', 'target', 'release', 'toolgate');
const fixtures = join(vectorsDir, 'fixtures');
// The Rust CLI is compared with when it is built and works at all (it may be
// mid-development in this repo); TOOLGATE_REQUIRE_RUST_CLI=1 makes a missing
// or broken one a failure.
const requireRust = process.env.TOOLGATE_REQUIRE_RUST_CLI === '1';
let rustProblem = existsSync(rustCli) ? '' : 'not built';
if (!rustProblem) {
  const probe = spawnSync(rustCli, ['list', '--policy', join(fixtures, 'plans-policy.yaml'), '--catalog', join(fixtures, 'plans-catalog.json')]);
  if (probe.status !== 0) rustProblem = `present but failing (exit ${probe.status}): ${probe.stderr.toString().trim()}`;
}
const haveRust = rustProblem === '';

/** @param {string[]} args @param {Buffer | string} [stdin] */
function node(args, stdin = '') {
  return spawnSync(process.execPath, [bin, ...args], { input: stdin, cwd: pkgDir, maxBuffer: 1 << 28 });
}
/** @param {string[]} args @param {Buffer | string} [stdin] */
function rust(args, stdin = '') {
  return spawnSync(rustCli, args, { input: stdin, cwd: pkgDir, maxBuffer: 1 << 28 });
}

const scratch = mkdtempSync(join(tmpdir(), 'toolgate-cli-vectors-'));

/** Inline policy_text / catalog_text go to files, so every vector file runs through the CLI. */
function onDisk(/** @type {ReturnType<typeof loadVectorFile>} */ file) {
  const base = join(scratch, file.path.split('/').pop().replace(/\.json$/, ''));
  let { policy_path: policyPath, catalog_path: catalogPath } = file;
  if (policyPath === null && file.policy_text !== null) writeFileSync(policyPath = `${base}.policy.yaml`, file.policy_text);
  if (catalogPath === null) writeFileSync(catalogPath = `${base}.catalog`, file.catalog_text);
  return { ...file, policy_path: policyPath, catalog_path: catalogPath };
}

for (const path of vectorFiles()) {
  const file = onDisk(loadVectorFile(path));
  test(`cli eval/list = expected bytes: ${path.split('/').pop()}`, () => {
    if (file.expect_load_error) {
      const r = node(['list', ...(file.policy_path ? ['--policy', file.policy_path] : []), '--catalog', file.catalog_path]);
      assert.equal(r.status, 2, r.stderr.toString());
      assert.match(r.stderr.toString(), new RegExp(`\\(${file.expect_load_error.code}\\)\\n$`));
      if (haveRust) {
        const rr = rust(['list', ...(file.policy_path ? ['--policy', file.policy_path] : []), '--catalog', file.catalog_path]);
        assert.equal(r.stderr.toString(), rr.stderr.toString());
        assert.equal(r.status, rr.status);
      }
      return;
    }
    for (const run of cliRuns(file)) {
      const r = node(run.args, run.stdin);
      assert.equal(r.status, 0, r.stderr.toString());
      assert.equal(r.stdout.toString(), run.expect, `${run.args.join(' ')}: ${run.names.join(', ')}`);
      if (haveRust) {
        const rr = rust(run.args, run.stdin);
        assert.ok(r.stdout.equals(rr.stdout), `differs from the Rust CLI: ${run.args.join(' ')}`);
        assert.equal(r.status, rr.status);
      }
    }
  });
}

// Edge cases of the CLI contract itself, checked against the engine's own
// answers (and against the Rust CLI when it is there).
const plans = ['--policy', join(fixtures, 'plans-policy.yaml'), '--catalog', join(fixtures, 'plans-catalog.json')];
const calls = [
  '{"name":"consultar_plano","arguments":{"customer_id":"1"}}',
  '{"name":"alterar_plano","arguments":{"customer_id":"1","new_plan_id":"GOLD"}}',
];

test('cli: blank lines skipped, CRLF stripped, last line without newline, raw bytes', () => {
  const stdin = Buffer.concat([
    Buffer.from(`${calls[0]}\r\n  \t\n\n\r\n${calls[1]}\n`),
    Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d, 0x0a]), // invalid UTF-8
    Buffer.from(calls[0]),
  ]);
  const r = node(['eval', ...plans], stdin);
  assert.equal(r.status, 0, r.stderr.toString());
  const lines = r.stdout.toString().split('\n');
  assert.equal(lines.length, 5);
  assert.equal(lines[4], '');
  assert.equal(JSON.parse(lines[0]).ok, true);
  assert.equal(JSON.parse(lines[1]).error.code, 'CONFIRMATION_REQUIRED');
  assert.equal(JSON.parse(lines[2]).error.code, 'BAD_REQUEST');
  assert.equal(lines[3], lines[0]);
  if (haveRust) assert.ok(r.stdout.equals(rust(['eval', ...plans], stdin).stdout));
});

test('cli: context flags (--surface, --scopes "", trimmed lists, --allow, --flag=value)', () => {
  const seed = ['--catalog', join(fixtures, 'seed-catalog.json')];
  const read = '{"name":"get_capabilities","arguments":{}}\n';
  const cases = [
    [[], null],
    [['--scopes', ''], 'SCOPE_DENIED'],
    [['--scopes', ' mcp:read , ,'], null],
    [['--scopes=mcp:write'], 'SCOPE_DENIED'],
    [['--allow', 'wa_health'], 'NOT_FOUND'],
    [['--allow', 'wa_health,get_capabilities', '--surface', 'direct'], null],
  ];
  for (const [flags, code] of cases) {
    const r = node(['eval', ...seed, ...flags], read);
    assert.equal(r.status, 0, r.stderr.toString());
    assert.equal(JSON.parse(r.stdout.toString()).error?.code ?? null, code, flags.join(' '));
    if (haveRust) assert.ok(r.stdout.equals(rust(['eval', ...seed, ...flags], read).stdout), flags.join(' '));
  }
  const direct = node(['list', ...seed, '--surface', 'direct']);
  const names = JSON.parse(direct.stdout.toString()).tools.map((t) => t.name);
  assert.ok(names.length > 0 && !names.includes('wa_send_text'));
});

test('cli: eval --call decides the one call; --fail-on-deny exits 1 on a denial, as the Rust CLI', () => {
  const plans = ['--policy', join(fixtures, 'plans-policy.yaml'), '--catalog', join(fixtures, 'plans-catalog.json')];
  const allowed = '{"name":"consultar_plano","arguments":{"customer_id":"c-1"}}';
  const denied = '{"name":"alterar_plano","arguments":{}}';
  /** @type {[string[], string, number, (boolean | null)[]][]} args, stdin, exit, each decision's ok */
  const cases = [
    [['--call', allowed], '', 0, [true]],
    [['--call', denied], '', 0, [false]],
    [['--call', allowed, '--fail-on-deny'], '', 0, [true]],
    [['--fail-on-deny', `--call=${denied}`], '', 1, [false]],
    [['--call', ''], `${allowed}\n`, 0, [false]], // the call given, not stdin: an empty one is a BAD_REQUEST
    [['--fail-on-deny'], `${allowed}\n${denied}\n${allowed}\n`, 1, [true, false, true]],
    [['--fail-on-deny'], `${allowed}\n\n`, 0, [true]],
  ];
  // Node decoded the command line already, U+FFFD for bytes that are not
  // UTF-8: such an argument's bytes are lost, so it is refused (the Rust CLI
  // refuses argv that is not UTF-8); on stdin a call's bytes are decided.
  for (const [flag, value] of [['--call', '{"name":"consultar_plano\\0377","arguments":{}}'], ['--scopes', 'plans:write\\0377']]) {
    const lossy = spawnSync('/bin/sh', ['-c', 'exec "$@" "$FLAG" "$(printf %b "$VALUE")"', 'sh', process.execPath, bin, 'eval', ...plans], {
      env: { ...process.env, FLAG: flag, VALUE: value }, input: `${allowed}\n`,
    });
    assert.equal(lossy.status, 64, `${flag}: ${lossy.stderr}`);
    assert.equal(lossy.stdout.length, 0);
    assert.match(lossy.stderr.toString(), /U\+FFFD/);
  }
  for (const [flags, stdin, status, oks] of cases) {
    const r = node(['eval', ...plans, ...flags], stdin);
    const what = `${flags.join(' ')} < ${JSON.stringify(stdin)}`;
    assert.equal(r.status, status, `${what}: ${r.stderr}`);
    assert.deepEqual(r.stdout.toString().trim().split('\n').map((l) => JSON.parse(l).ok), oks, what);
    if (haveRust) {
      const n = rust(['eval', ...plans, ...flags], stdin);
      assert.equal(n.status, status, what);
      assert.ok(r.stdout.equals(n.stdout), what);
    }
  }
  for (const args of [['eval', ...plans, '--fail-on-deny', '--fail-on-deny'], ['eval', ...plans, '--fail-on-deny=true'], ['eval', ...plans, '--call', '{}', '--call', '{}'], ['list', ...plans, '--call', '{}'], ['list', ...plans, '--fail-on-deny']]) {
    const r = node(args);
    assert.equal(r.status, 64, args.join(' '));
    assert.equal(r.stdout.length, 0);
    if (haveRust) assert.equal(rust(args).status, 64, args.join(' '));
  }
});

test('cli: usage errors exit 64, load errors exit 2 with file:line:column', () => {
  for (const args of [[], ['frob'], ['eval'], ['eval', '--catalog'], ['eval', '--catalog', 'x', '--surface', 'sideways'], ['list', '--catalog', 'x', '--nope']]) {
    const r = node(args);
    assert.equal(r.status, 64, `${args.join(' ')}: ${r.stderr}`);
    if (haveRust) assert.equal(rust(args).status, 64, args.join(' '));
  }
  const dir = mkdtempSync(join(tmpdir(), 'toolgate-cli-'));
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, 'version: 1\ndefaults:\n  require_confirmation: "true"\n');
  const r = node(['list', '--policy', policy, '--catalog', join(fixtures, 'plans-catalog.json')]);
  assert.equal(r.status, 2);
  assert.match(r.stderr.toString(), new RegExp(`^toolgate: ${policy.replace(/[.]/g, '\\.')}:3:\\d+: .* \\(POLICY_[A-Z_]+\\)\\n$`));
  const catalog = join(dir, 'catalog.json');
  writeFileSync(catalog, '{"tools": [}');
  const c = node(['list', '--catalog', catalog]);
  assert.equal(c.status, 2);
  assert.match(c.stderr.toString(), /^toolgate: .*catalog\.json:1:\d+: .* \(CATALOG_SYNTAX\)\n$/);
  if (haveRust) {
    for (const args of [['list', '--policy', policy, '--catalog', join(fixtures, 'plans-catalog.json')], ['list', '--catalog', catalog], ['list', '--catalog', join(dir, 'missing.json')]]) {
      const a = node(args); const b = rust(args);
      assert.equal(a.stderr.toString(), b.stderr.toString(), args.join(' '));
      assert.equal(a.status, b.status, args.join(' '));
    }
  }
});

test('cli: a repeated flag and a separate value that reads as a flag are usage errors, as clap has them (issue 11 (7))', () => {
  const seed = ['--catalog', join(fixtures, 'seed-catalog.json')];
  for (const [flags, status] of /** @type {[string[], number][]} */ ([
    [['--allow', 'a', '--allow', 'b'], 64],
    [['--scopes=a', '--scopes=a'], 64],
    [['--surface', 'direct', '--surface', 'direct'], 64],
    [['--scopes', '-x'], 64],
    [['--scopes', '-1'], 64],
    [['--allow', '--'], 64],
    [['--scopes=-1'], 0],
    [['--allow', '-'], 0],
    [['--allow', '\u00a0get_capabilities\u3000,\u2003'], 0],
  ])) {
    const r = node(['list', ...seed, ...flags]);
    assert.equal(r.status, status, `${flags.join(' ')}: ${r.stderr}`);
    if (haveRust) {
      const rr = rust(['list', ...seed, ...flags]);
      assert.equal(rr.status, status, flags.join(' '));
      assert.ok(r.stdout.equals(rr.stdout), flags.join(' '));
    }
  }
  const trimmed = node(['list', ...seed, '--allow', '\u00a0get_capabilities\u3000,\u2003']);
  assert.deepEqual(JSON.parse(trimmed.stdout.toString()).tools.map((/** @type {any} */ t) => t.name), ['get_capabilities']);
});

test('cli: npx toolgate runs this package\'s bin', () => {
  const r = spawnSync('npx', ['--no-install', 'toolgate', 'list', ...plans], { cwd: pkgDir });
  assert.equal(r.status, 0, r.stderr.toString());
  assert.deepEqual(r.stdout, node(['list', ...plans]).stdout);
});

test(`cli parity with the Rust CLI ${rustCli}: ${haveRust ? 'compared' : rustProblem}`, { skip: !haveRust && !requireRust && `Rust CLI ${rustProblem}` }, () => {
  assert.ok(haveRust, `Rust CLI ${rustProblem}`);
});
