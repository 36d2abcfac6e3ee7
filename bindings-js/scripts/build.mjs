#!/usr/bin/env node
// Builds the package from the component: finds (or builds with cargo) the
// toolgate component, transpiles it with jco into gen/, then patches jco's
// hot path. Run from anywhere: `npm run build`.
//
// Component source, in order:
//   1. $TOOLGATE_COMPONENT (a path to a built component),
//   2. ../dist/toolgate_policy.wasm when it is newer than the engine sources,
//   3. `cargo run -q --bin component-build -- ../dist/toolgate_policy.wasm`.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync, copyFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repoDir = resolve(pkgDir, '..');
const genDir = join(pkgDir, 'gen');
// The component's SHA-256 as a module the runtime imports (generated, not in
// git): src/ rather than gen/ so the published types stay rooted at src/.
const originFile = join(pkgDir, 'src', 'origin.js');
const buildDir = join(pkgDir, '.build');

function log(msg) { process.stderr.write(`build: ${msg}\n`); }

function newestMtime(path) {
  if (!existsSync(path)) return 0;
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = 0;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

function findComponent() {
  if (process.env.TOOLGATE_COMPONENT) return resolve(process.env.TOOLGATE_COMPONENT);
  const dist = join(repoDir, 'dist', 'toolgate_policy.wasm');
  const sources = ['policy-core', 'policy-component', 'component-build', 'wit', 'Cargo.lock']
    .map((p) => newestMtime(join(repoDir, p)));
  if (existsSync(dist) && statSync(dist).mtimeMs >= Math.max(...sources)) return dist;
  log(existsSync(dist) ? 'dist/toolgate_policy.wasm is older than the engine sources: rebuilding' : 'no dist/toolgate_policy.wasm: building it');
  execFileSync('cargo', ['run', '-q', '--bin', 'component-build', '--', dist], { cwd: repoDir, stdio: 'inherit' });
  return dist;
}

const component = findComponent();
const bytes = readFileSync(component);
const digest = createHash('sha256').update(bytes).digest('hex');
const stamp = join(genDir, 'BUILD.json');
const jcoVersion = JSON.parse(readFileSync(join(pkgDir, 'node_modules/@bytecodealliance/jco/package.json'), 'utf8')).version;
const buildScriptHash = createHash('sha256').update(readFileSync(fileURLToPath(import.meta.url))).digest('hex');

if (existsSync(stamp)) {
  try {
    const prev = JSON.parse(readFileSync(stamp, 'utf8'));
    if (prev.component_sha256 === digest && prev.jco === jcoVersion && prev.build_script === buildScriptHash && existsSync(originFile)) {
      log(`gen/ is up to date (component sha256:${digest.slice(0, 12)})`);
      process.exit(0);
    }
  } catch { /* rebuild */ }
}

rmSync(buildDir, { recursive: true, force: true });
mkdirSync(buildDir, { recursive: true });
copyFileSync(component, join(buildDir, 'toolgate_policy.wasm'));
const jco = join(pkgDir, 'node_modules/@bytecodealliance/jco/dist/jco.js');
execFileSync(process.execPath, [jco, 'transpile', join(buildDir, 'toolgate_policy.wasm'),
  '-o', join(buildDir, 'out'), '--name', 'toolgate_policy', '--instantiation', 'async', '--quiet'],
{ cwd: pkgDir, stdio: 'inherit' });

const out = join(buildDir, 'out');
let js = readFileSync(join(out, 'toolgate_policy.js'), 'utf8');

// 1. jco's _debugLog reads process.env.JCO_DEBUG on every call (about a fifth
//    of a decision): read it once, at instantiation.
const debugLog = `  const _debugLog = (...args) => {
    if (!globalThis?.process?.env?.JCO_DEBUG) { return; }
    console.debug(...args);
  };`;
if (!js.includes(debugLog)) throw new Error('jco output changed: _debugLog not found; update scripts/build.mjs');
js = js.replace(debugLog, `  const _debugLog = globalThis?.process?.env?.JCO_DEBUG ? (...args) => console.debug(...args) : () => {};`);
if (/process\?\.env/.test(js.replace('globalThis?.process?.env?.JCO_DEBUG ?', ''))) {
  throw new Error('jco output reads process.env elsewhere; check the hot path');
}

// 2. At every instantiation jco wraps each export in `WebAssembly.promising`
//    (JSPI) inside a try/catch, falling back to the export itself. Where JSPI
//    is missing (Node 20 and 22; not measured in workerd) each of those six calls throws
//    "WebAssembly.promising is not a function", and V8 words that message by
//    re-parsing the call site's function (jco's whole 1 700-line instantiation
//    generator) for its source positions: about 2.6 ms of a 4 ms
//    instantiation here, paid by every load and every replacement after a
//    trap. One helper asks whether the function exists first; where it does,
//    it is called exactly as before, and a throw still falls back the same way.
const promisingTry = /    try \{\n      (\w+) = WebAssembly\.promising\(([^;\n]+)\);\n    \} catch\(err\) \{\n      \1 = \2;\n    \}/g;
let promisingCount = 0;
js = js.replace(promisingTry, (_, name, fn) => {
  promisingCount += 1;
  return `    ${name} = _promisingOr(${fn});`;
});
if (promisingCount === 0) throw new Error('jco output changed: no WebAssembly.promising try/catch found; update scripts/build.mjs');
if (js.includes('WebAssembly.promising(')) throw new Error('jco output calls WebAssembly.promising elsewhere; update scripts/build.mjs');
const generatorStart = '  let gen= (function* _initGenerator () {\n';
if (!js.includes(generatorStart)) throw new Error('jco output changed: _initGenerator not found; update scripts/build.mjs');
js = js.replace(generatorStart, `  const _promisingOr = (f) => {
    if (typeof WebAssembly.promising !== 'function') return f;
    try { return WebAssembly.promising(f); } catch { return f; }
  };
${generatorStart}`);

// 3. jco writes every string argument into the guest by counting its UTF-8
//    length in a JS loop over the string and then encoding it: for a rule
//    set's catalog (100 KB for the seed, run once per load, so in V8's
//    interpreter or baseline tier) about 1.3 ms of a 12 ms load here. The
//    encoder's own `encode` measures and encodes in one native pass; one copy
//    into the guest follows. Same bytes (lone surrogates become U+FFFD either
//    way) and the same allocation: realloc(0, 0, 1, byteLength).
const encodeStart = '  function _utf8AllocateAndEncode(s, realloc, memory) {\n';
const encodeEnd = '    const res = { ptr, len, codepoints };\n    return res;\n  }\n';
const encodeAt = js.indexOf(encodeStart);
const encodeEndAt = encodeAt < 0 ? -1 : js.indexOf(encodeEnd, encodeAt);
if (encodeAt < 0 || encodeEndAt < 0 || js.indexOf(encodeStart, encodeAt + 1) >= 0) {
  throw new Error('jco output changed: _utf8AllocateAndEncode not found once; update scripts/build.mjs');
}
if (!js.slice(encodeAt, encodeEndAt).includes('TEXT_ENCODER_UTF8.encodeInto(') || /\.codepoints\b/.test(js)) {
  throw new Error('jco output changed: _utf8AllocateAndEncode is not the counting encoder this patch replaces; update scripts/build.mjs');
}
js = js.slice(0, encodeAt) + `  function _utf8AllocateAndEncode(s, realloc, memory) {
    if (typeof s !== 'string') {
      throw new TypeError('expected a string, received [' + typeof s + ']');
    }
    if (s.length === 0) { return { ptr: 1, len: 0 }; }
    const bytes = TEXT_ENCODER_UTF8.encode(s);
    const ptr = realloc(0, 0, 1, bytes.length);
    new Uint8Array(memory.buffer, ptr, bytes.length).set(bytes);
    return { ptr, len: bytes.length };
  }
` + js.slice(encodeEndAt + encodeEnd.length);

// 4. The two tiny helper modules wit-component adds for the resource
//    destructor (a funcref table and its filler) are replaced in JS by
//    src/abi.js, so the package needs exactly one compiled core module,
//    which a worker imports. Check they are what the JS shim assumes.
function checkShim(name, expectImports, expectExports) {
  const mod = new WebAssembly.Module(readFileSync(join(out, name)));
  const imports = WebAssembly.Module.imports(mod).map((i) => `${i.module}:${i.name}:${i.kind}`).sort();
  const exports = WebAssembly.Module.exports(mod).map((e) => `${e.name}:${e.kind}`).sort();
  if (JSON.stringify(imports) !== JSON.stringify(expectImports) || JSON.stringify(exports) !== JSON.stringify(expectExports)) {
    throw new Error(`jco output changed: ${name} imports ${imports} exports ${exports}; update src/abi.js`);
  }
}
checkShim('toolgate_policy.core2.wasm', [], ['$imports:table', '0:function']);
checkShim('toolgate_policy.core3.wasm', [':$imports:table', ':0:function'], []);
for (const [i, name] of ['toolgate_policy.core.wasm', 'toolgate_policy.core2.wasm', 'toolgate_policy.core3.wasm'].entries()) {
  if (!js.includes(`const module${i} = getCoreModule('${name}');`)) throw new Error(`jco output changed: module${i} is not ${name}`);
}

rmSync(genDir, { recursive: true, force: true });
mkdirSync(genDir, { recursive: true });
writeFileSync(join(genDir, 'toolgate_policy.js'), js);
copyFileSync(join(out, 'toolgate_policy.core.wasm'), join(genDir, 'toolgate_policy.core.wasm'));
copyFileSync(join(out, 'toolgate_policy.d.ts'), join(genDir, 'toolgate_policy.d.ts'));
mkdirSync(join(genDir, 'interfaces'), { recursive: true });
for (const f of readdirSync(join(out, 'interfaces'))) copyFileSync(join(out, 'interfaces', f), join(genDir, 'interfaces', f));
writeFileSync(originFile, `// Generated by scripts/build.mjs from the component gen/ was built from; do not edit (not in git).
/**
 * The SHA-256 (hex) of the component this package's core module came from:
 * a prepared core module (\`toolgate prepare\`) names the component it was
 * prepared from in its \`toolgate:prepared-from\` section, and this package
 * loads only one prepared from its own.
 */
export const COMPONENT_SHA256 = '${digest}';
`);
writeFileSync(stamp, JSON.stringify({ component_sha256: digest, component_bytes: bytes.length, jco: jcoVersion, build_script: buildScriptHash }, null, 2) + '\n');
rmSync(buildDir, { recursive: true, force: true });
log(`gen/ built from ${component} (sha256:${digest.slice(0, 12)}, jco ${jcoVersion})`);
