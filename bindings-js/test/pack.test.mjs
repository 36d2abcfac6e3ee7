// The published artifact is what is tested: npm pack, install the tarball
// into an empty folder, import it, evaluate one call, run its bin.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Toolgate } from '../src/index.js';
import { pkgDir, vectorsDir } from './lib/vectors.mjs';

test('npm pack, install into an empty folder, import, evaluate', async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'toolgate-pack-'));
  const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: pkgDir, encoding: 'utf8' }));
  const { filename, size, unpackedSize, files } = packed[0];
  const tarball = join(work, filename);
  t.diagnostic(`${filename}: ${size} bytes packed, ${unpackedSize} unpacked, ${files.length} files`);
  const paths = files.map((f) => f.path).sort();
  for (const p of ['bin/toolgate.mjs', 'gen/toolgate_policy.core.wasm', 'gen/toolgate_policy.js', 'package.json', 'src/core.js', 'src/abi.js', 'src/origin.js', 'src/index.js', 'src/mcp.js', 'src/worker.js', 'README.md']) {
    assert.ok(paths.includes(p), `${p} is in the tarball`);
  }
  // The types are generated from the JSDoc at pack time (prepack): every
  // `types` the package.json names is in the tarball, and no hand-written .d.ts.
  const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
  const typePaths = [pkg.types, ...Object.values(pkg.exports).map((/** @type {any} */ e) => e?.types).filter(Boolean)].map((p) => p.replace(/^\.\//, ''));
  assert.ok(typePaths.length >= 5);
  for (const p of typePaths) assert.ok(paths.includes(p), `${p} is in the tarball`);
  assert.ok(!paths.some((p) => p.startsWith('src/') && p.endsWith('.d.ts')), 'no hand-written .d.ts');
  assert.ok(!paths.some((p) => p.startsWith('test/') || p.startsWith('node_modules/') || p.startsWith('scripts/')), paths.join(' '));

  const app = join(work, 'app');
  execFileSync('mkdir', ['-p', app]);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }));
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--offline', tarball], { cwd: app, stdio: 'pipe' });
  const catalog = join(vectorsDir, 'fixtures', 'seed-catalog.json');
  writeFileSync(join(app, 'main.mjs'), `
import { readFileSync } from 'node:fs';
import { Toolgate, LoadError } from 'toolgate';
const gate = await Toolgate.load({ catalog: readFileSync(${JSON.stringify(catalog)}, 'utf8') });
const d = gate.evaluate({ name: 'send_whatsapp', arguments: { to: 'x', text: 'y', idempotency_key: 'abcdefgh' } }, { scopes: ['mcp:read', 'mcp:write'] });
process.stdout.write(d.json + '\\n' + d.code + '\\n' + (typeof LoadError) + '\\n');
`);
  const out = execFileSync(process.execPath, ['main.mjs'], { cwd: app, encoding: 'utf8' }).split('\n');
  const here = await Toolgate.load({ catalog: readFileSync(catalog, 'utf8') });
  const expect = here.evaluate({ name: 'send_whatsapp', arguments: { to: 'x', text: 'y', idempotency_key: 'abcdefgh' } }, { scopes: ['mcp:read', 'mcp:write'] });
  assert.equal(out[0], expect.json);
  assert.equal(out[1], 'CONFIRMATION_REQUIRED');
  assert.equal(out[2], 'function');

  // Its bin, as installed.
  const bin = spawnSync(join(app, 'node_modules', '.bin', 'toolgate'), ['list', '--catalog', catalog, '--surface', 'direct'], { cwd: app });
  assert.equal(bin.status, 0, bin.stderr.toString());
  assert.equal(bin.stdout.toString(), here.listExposable({ surface: 'direct' }).json + '\n');
  assert.ok(statSync(tarball).size === size);
  const installedPkg = JSON.parse(readFileSync(join(app, 'node_modules', 'toolgate', 'package.json'), 'utf8'));
  assert.equal(installedPkg.name, 'toolgate');
});
