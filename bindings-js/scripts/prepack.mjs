#!/usr/bin/env node
// `npm pack` / `npm publish` (prepack): the tarball must carry the engine.
// Builds gen/ (scripts/build.mjs: jco from devDependencies, the component from
// $TOOLGATE_COMPONENT, else ../dist/toolgate_policy.wasm as it is (the
// repository's `cargo build` makes it), else cargo) when any file the package
// ships from it is missing, then generates the types from the JSDoc. An
// existing gen/ is left alone: `npm run build` refreshes it (and rebuilds a
// component older than the engine sources).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const shipped = ['gen/toolgate_policy.js', 'gen/toolgate_policy.core.wasm', 'gen/BUILD.json', 'src/origin.js'];
const missing = () => shipped.filter((f) => !existsSync(join(pkgDir, f)));

function fail(/** @type {string} */ msg) {
  process.stderr.write(`prepack: ${msg}\n`);
  process.exit(1);
}

for (const dev of ['@bytecodealliance/jco', 'typescript']) {
  if (!existsSync(join(pkgDir, 'node_modules', dev, 'package.json'))) fail(`${dev} is not installed: run \`npm ci\` in bindings-js first`);
}
if (missing().length > 0) {
  process.stderr.write(`prepack: ${missing().join(', ')} missing: building the engine (scripts/build.mjs)\n`);
  const dist = resolve(pkgDir, '..', 'dist', 'toolgate_policy.wasm');
  const env = { ...process.env };
  if (!env.TOOLGATE_COMPONENT && existsSync(dist)) env.TOOLGATE_COMPONENT = dist;
  execFileSync(process.execPath, [join(pkgDir, 'scripts', 'build.mjs')], { cwd: pkgDir, stdio: 'inherit', env });
  if (missing().length > 0) fail(`the build left ${missing().join(', ')} missing`);
}
execFileSync('npm', ['run', '--silent', 'types'], { cwd: pkgDir, stdio: 'inherit', shell: process.platform === 'win32' });
