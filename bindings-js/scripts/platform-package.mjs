#!/usr/bin/env node
// Fills one platform package (npm/<platform>/, e.g. @toolgate/linux-x64)
// with a native toolgate binary, so that `npm pack` / `npm publish` there
// makes its tarball:
//
//   node scripts/platform-package.mjs --binary ../target/release/toolgate [--platform linux-x64] [--pack DIR]
//
// --platform defaults to this machine's; --pack DIR also runs `npm pack` into
// DIR and prints the tarball's path on stdout. Checks first that the platform
// package, the main package and its optionalDependencies agree on the version,
// and, when the binary can run here, that `toolgate --version` says that
// version too; then `toolgate precompile` ships the engine's native code
// beside it (bin/toolgate_policy-*.cwasm), so the package's first start
// loads code instead of compiling for seconds. A binary for another platform
// ships without it and compiles at its first start. Neither is ever
// committed (npm/*/bin/ is ignored).
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function fail(/** @type {string} */ msg) {
  process.stderr.write(`platform-package: ${msg}\n`);
  process.exit(1);
}

/** @type {Record<string, string>} */
const opts = {};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (!['--binary', '--platform', '--pack'].includes(a) || i + 1 >= argv.length) {
    fail(`usage: platform-package.mjs --binary PATH [--platform linux-x64|linux-arm64|darwin-x64|darwin-arm64|win32-x64] [--pack DIR] (at ${JSON.stringify(a)})`);
  }
  opts[a.slice(2)] = argv[++i];
}
if (!opts.binary) fail('--binary PATH is required');
const platform = opts.platform ?? `${process.platform}-${process.arch}`;
const dir = join(pkgDir, 'npm', platform);
if (!existsSync(join(dir, 'package.json'))) fail(`no platform package npm/${platform}/`);

const main = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
const plat = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
if (plat.name !== `@toolgate/${platform}`) fail(`npm/${platform}/package.json is named ${plat.name}`);
if (plat.version !== main.version) fail(`${plat.name} is ${plat.version}, toolgate is ${main.version}`);
if (main.optionalDependencies?.[plat.name] !== main.version) {
  fail(`toolgate's optionalDependencies["${plat.name}"] is ${main.optionalDependencies?.[plat.name]}, not exactly ${main.version}`);
}
const [os, cpu] = platform.split('-');
if (plat.os?.[0] !== os || plat.cpu?.[0] !== cpu) fail(`${plat.name} says os ${plat.os} cpu ${plat.cpu}`);

const binary = resolve(opts.binary);
if (!existsSync(binary) || !statSync(binary).isFile()) fail(`${binary} is not a file`);
const exe = os === 'win32' ? 'toolgate.exe' : 'toolgate';
if (`${process.platform}-${process.arch}` === platform) {
  let said;
  try {
    said = execFileSync(binary, ['--version'], { encoding: 'utf8' }).trim();
  } catch (e) {
    fail(`${binary} --version failed: ${/** @type {Error} */ (e).message}`);
  }
  if (said !== `toolgate ${main.version}`) fail(`${binary} --version says ${JSON.stringify(said)}, the packages are ${main.version}`);
}

rmSync(join(dir, 'bin'), { recursive: true, force: true });
mkdirSync(join(dir, 'bin'), { recursive: true });
const dest = join(dir, 'bin', exe);
copyFileSync(binary, dest);
chmodSync(dest, 0o755);
process.stderr.write(`platform-package: ${plat.name}@${plat.version}: bin/${exe} from ${binary} (${statSync(dest).size} bytes)\n`);
if (`${process.platform}-${process.arch}` === platform) {
  let code;
  try {
    code = execFileSync(dest, ['precompile'], { encoding: 'utf8' }).trim();
  } catch (e) {
    fail(`${dest} precompile failed: ${/** @type {Error} */ (e).message}`);
  }
  if (dirname(code) !== join(dir, 'bin')) fail(`precompile wrote ${code}, not into bin/`);
  process.stderr.write(`platform-package: bin/${basename(code)}: the native code (${statSync(code).size} bytes)\n`);
}

if (opts.pack) {
  const out = resolve(opts.pack);
  mkdirSync(out, { recursive: true });
  const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', out], { cwd: dir, encoding: 'utf8', shell: process.platform === 'win32' }));
  const files = packed[0].files.map((/** @type {{path: string}} */ f) => f.path).sort();
  if (!files.includes(`bin/${exe}`)) fail(`the tarball has no bin/${exe}: ${files.join(' ')}`);
  process.stderr.write(`platform-package: ${packed[0].filename}: ${packed[0].size} bytes packed, ${files.join(', ')}\n`);
  process.stdout.write(join(out, packed[0].filename) + '\n');
}
