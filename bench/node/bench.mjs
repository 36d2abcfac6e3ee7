#!/usr/bin/env node
// toolgate's Node benchmark against Cedar: the `toolgate` npm package (packed
// from bindings-js and installed as users get it) vs @cedar-policy/cedar-wasm
// (pinned in package-lock.json), in one process, one run, on the shared
// workload that `target/release/bench gen DIR` writes. Plus the floor: the
// same WIT component with no engine, run through the same package code.
//
//   bash bench/node/setup.sh                      # npm ci, pack+install toolgate, the floor
//   node bench/node/bench.mjs --data target/bench-data [--quick|--smoke] [--json OUT]
//
// - toolgate: `Toolgate.fromModule({ module, policy, catalog })` once per scale
//   (catalog.json, and catalog-structural.json: argument-value validation off,
//   like for like with what Cedar checks); per call `gate.evaluate(bytes, ctx).ok`
//   with the call as the UTF-8 bytes of its JSON (`Uint8Array`, handed to the
//   engine as is: the package's fastest documented form) and the context as JSON
//   text (built once, as a host does per session).
// - Cedar, as an expert would run it: the policy set and the schema preparsed
//   once (`preparsePolicySet`, `preparseSchema`; the policies validated against
//   the schema once, at start); per call `statefulIsAuthorized` with the request
//   and only the entities the call needs (the Agent, and the Tool when it exists,
//   looked up by name in a Map built once from that scale's entities.json), with
//   `preparsedSchemaName` and `validateRequest: true`: request validation is what
//   rejects `confirmed: "true"` (the schema types it Bool); without it that call
//   is allowed. The API ties entity parsing to the same schema. There is no way
//   to preload entities in this API, so the catalog size enters Cedar only
//   through the Map lookup; Cedar is still timed at every scale, in the same
//   rounds. The request is built per call from the same call bytes toolgate
//   gets, by the gateway's adapter (`cedarRequest`: decode, JSON.parse, the
//   request as the workload's adapter writes it; checked equal to mix.json's
//   `cedar_request` before timing), as the Rust and Python harnesses do.
// - The floor: target/bench/floor.wasm transpiled by bindings-js's build script
//   into target/bench/node-floor (a copy of the installed package with the
//   floor's gen/, see floor.mjs), loaded and called exactly like toolgate.
// - Every call of the mix is checked before timing: toolgate's `ok` (both
//   catalogs) and Cedar's decision must equal `expect_allowed`, else exit 1.
// - Timing: every scale is loaded first, then one race: round-robin over
//   toolgate, toolgate structural and Cedar at 34, 1 000 and 10 000 tools and the
//   floor, then the next round, so machine noise hits all alike (the scale ratio
//   included); each contender's slice runs
//   whole mixes for about the same wall time; the figure is the median over
//   rounds of the mean ns per decision over the mix. Every decision is consumed
//   (`.ok`, Cedar's `decision`) and the allowed count is checked every round.
// - Ready to decide, per scale, as `bench rust` prints it for rust-native and
//   rust-wasmtime: `load node TOOLS NS CEDAR_NS RATIO`, a fresh load of policy
//   and catalog plus the first decision on every tool of the catalog
//   (`{"name":<tool>,"arguments":{}}`, so work a load defers is counted),
//   against Cedar's preparation in this harness, timed again beside it
//   (`preparsePolicySet` + `preparseSchema`, what `cedar_prepare_ms` counts).
// - Cold start: `cold node MS`, the wall time of a fresh `node` child that
//   imports the installed package, loads the seed rules and prints one decision
//   (median of 3 runs, 1 in --smoke), and beside it `cold node-bare MS`, the
//   same interpreter doing nothing (`node -e 0`). Figures, never asserted.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { prepareFloor, repoDir } from './floor.mjs';

const PSET = 'toolgate-bench';
const SCHEMA = 'toolgate-bench';
/** The ready-to-decide measurement preparses under its own ids: the race's stay as they are. */
const READY_PSET = 'toolgate-bench-ready';
const READY_SCHEMA = 'toolgate-bench-ready';

/** @param {string} msg */
function fail(msg) {
  process.stderr.write(`bench/node: ${msg}\n`);
  process.exit(1);
}

// ---- arguments -------------------------------------------------------------
const argv = process.argv.slice(2);
/** @param {string} name */
const option = (name) => {
  const i = argv.indexOf(name);
  if (i < 0) return undefined;
  const v = argv[i + 1];
  if (v === undefined || v.startsWith('--')) fail(`${name} needs a value`);
  return v;
};
for (const a of argv) {
  if (a.startsWith('--') && !['--data', '--json', '--quick', '--smoke', '--scales', '--prepared'].includes(a)) {
    fail(`unknown option ${a}\nusage: node bench/node/bench.mjs --data DIR [--quick|--smoke] [--scales 34,1000] [--json OUT] [--prepared DIR]`);
  }
}
/** Catalog sizes to run (`--scales 34,1000`; bench/run --smoke runs only 34). */
const SCALES = (option('--scales') ?? '34,1000,10000').split(',');
const dataDir = resolve(option('--data') ?? join(repoDir, 'target', 'bench-data'));
const jsonOut = option('--json');
/**
 * A directory holding, per scale N, `N/` as `toolgate prepare` wrote it for
 * that catalog and policy.yaml (bench/run): a `load node-prepared N` line for
 * each scale run that has one.
 */
const preparedDir = option('--prepared');
const mode = argv.includes('--smoke') ? 'smoke' : argv.includes('--quick') ? 'quick' : 'default';
/** rounds; sliceMs: wall time of one contender's slice of a round; warmupMs: per contender; coldRuns: fresh processes;
 * readyRounds: fresh loads per `load` line, toolgate's and Cedar's alternating, medians kept. */
const BUDGETS = {
  smoke: { rounds: 1, sliceMs: 0, warmupMs: 0, seedReloads: 1, coldRuns: 1, readyRounds: 1 },
  quick: { rounds: 9, sliceMs: 25, warmupMs: 200, seedReloads: 1, coldRuns: 3, readyRounds: 3 },
  default: { rounds: 31, sliceMs: 60, warmupMs: 600, seedReloads: 3, coldRuns: 3, readyRounds: 5 },
};
const budget = BUDGETS[mode];
if (!existsSync(join(dataDir, 'mix.json'))) {
  fail(`no workload in ${dataDir}: run \`target/release/bench gen ${dataDir}\` (cargo build --release -p bench)`);
}

// ---- helpers ---------------------------------------------------------------
const nowNs = () => process.hrtime.bigint();
/** @param {bigint} ns */
const toMs = (ns) => Number(ns) / 1e6;
/** @param {number[]} xs */
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
/**
 * @template T
 * @param {() => T} f
 * @returns {[T, number]} the value and the wall time in ms
 */
const timed = (f) => {
  const t = nowNs();
  const v = f();
  return [v, toMs(nowNs() - t)];
};
/** @param {string} path */
const text = (path) => readFileSync(path, 'utf8');
/** @param {string} dir @returns {number} */
const treeBytes = (dir) => readdirSync(dir, { withFileTypes: true, recursive: true })
  .filter((e) => e.isFile())
  .reduce((n, e) => n + statSync(join(e.parentPath ?? /** @type {any} */ (e).path, e.name)).size, 0);

// ---- workload ----------------------------------------------------------------
/**
 * @typedef {{ type: string, id: string }} Uid
 * @typedef {import('@cedar-policy/cedar-wasm/nodejs').EntityJson & { uid: Uid }} Entity
 * @typedef {{ principal: Uid, action: Uid, resource: Uid, context: import('@cedar-policy/cedar-wasm/nodejs').Context }} CedarRequest
 * @typedef {{ label: string, call: { name: string }, call_json: string, context_json: string,
 *   cedar_request: CedarRequest, cedar_entities: Entity[], expect_allowed: boolean }} MixCall
 */
const mix = /** @type {MixCall[]} */ (JSON.parse(text(join(dataDir, 'mix.json'))).calls);
const n = mix.length;
if (n === 0) fail('mix.json has no calls');
const encoder = new TextEncoder();
const callBytes = mix.map((m) => encoder.encode(m.call_json));
const contexts = mix.map((m) => m.context_json);
const expectAllowed = mix.filter((m) => m.expect_allowed).length;
const policy = text(join(dataDir, 'policy.yaml'));
const cedarPolicies = text(join(dataDir, 'policies.cedar'));
const cedarSchema = text(join(dataDir, 'schema.cedarschema'));
const loadAtStart = loadavg()[0];

// ---- start: toolgate ---------------------------------------------------------
const start = /** @type {Record<string, number | string>} */ ({});
const [tg, importMs] = await (async () => {
  const t = nowNs();
  const m = await import('toolgate');
  return /** @type {const} */ ([m, toMs(nowNs() - t)]);
})();
const { Toolgate } = tg;
const coreBytes = readFileSync(tg.coreModuleUrl);
const module = await (async () => {
  const t = nowNs();
  const m = await WebAssembly.compile(coreBytes);
  start.compile_ms = toMs(nowNs() - t);
  return m;
})();
start.import_ms = importMs;
{
  const [empty, ms] = timed(() => Toolgate.fromModule({ module, catalog: '[]' }));
  start.instantiate_ms = ms; // first instance + contract check + an empty rule set
  empty.close();
  // Later instances (every load and every replacement after a trap pays one): median of 21.
  const again = [];
  for (let i = 0; i < 21; i++) {
    const [g, ms2] = timed(() => Toolgate.fromModule({ module, catalog: '[]' }));
    g.close();
    again.push(ms2);
  }
  start.instantiate_again_ms = median(again);
  const seedCatalog = text(join(dataDir, '34', 'catalog.json'));
  const [cold, coldMs] = timed(() => Toolgate.fromModule({ module, policy, catalog: seedCatalog }));
  cold.close();
  start.seed_load_cold_ms = coldMs; // the first real load in the process (V8 still tiering up)
  const warm = [];
  for (let i = 0; i < budget.seedReloads; i++) {
    const [g, ms2] = timed(() => Toolgate.fromModule({ module, policy, catalog: seedCatalog }));
    g.close();
    warm.push(ms2);
  }
  start.seed_load_ms = median(warm); // instantiate + load the 34 tools, later in the process
}
start.core_module_bytes = coreBytes.length;
const pkgDir = resolve(new URL('.', tg.coreModuleUrl).pathname, '..');
const pkg = JSON.parse(text(join(pkgDir, 'package.json')));
start.package_unpacked_bytes = treeBytes(pkgDir) - (existsSync(join(pkgDir, '.bench-tarball-sha256')) ? statSync(join(pkgDir, '.bench-tarball-sha256')).size : 0);
{
  const tarball = join(repoDir, 'target', 'bench', 'npm', `toolgate-${pkg.version}.tgz`);
  if (existsSync(tarball)) start.package_tarball_bytes = statSync(tarball).size;
}

// ---- start: Cedar ------------------------------------------------------------
const cedarPkgDir = join(repoDir, 'bench', 'node', 'node_modules', '@cedar-policy', 'cedar-wasm');
const cedarVersion = JSON.parse(text(join(cedarPkgDir, 'package.json'))).version;
{
  // What the package's nodejs entry compiles at import, timed apart (a second, discarded compile).
  const bytes = readFileSync(join(cedarPkgDir, 'nodejs', 'cedar_wasm_bg.wasm'));
  const t = nowNs();
  await WebAssembly.compile(bytes);
  start.cedar_compile_ms = toMs(nowNs() - t);
  start.cedar_module_bytes = bytes.length;
  start.cedar_package_unpacked_bytes = treeBytes(cedarPkgDir);
}
const [cedar, cedarImportMs] = await (async () => {
  const t = nowNs();
  const m = await import('@cedar-policy/cedar-wasm/nodejs');
  return /** @type {const} */ ([m, toMs(nowNs() - t)]);
})();
start.cedar_import_ms = cedarImportMs; // read + synchronous compile + instantiate, in the package's entry
if (cedar.getCedarVersion() !== cedarVersion) fail(`cedar-wasm says ${cedar.getCedarVersion()}, package.json ${cedarVersion}`);
{
  const [validation, validateMs] = timed(() => cedar.validate({ policies: { staticPolicies: cedarPolicies }, schema: cedarSchema, validationSettings: { mode: 'strict' } }));
  if (validation.type !== 'success' || validation.validationErrors.length > 0) {
    fail(`the Cedar policies do not validate against the schema: ${JSON.stringify(validation)}`);
  }
  start.cedar_validate_ms = validateMs; // once, at start (strict), as the Rust harness does
  const [pset, psetMs] = timed(() => cedar.preparsePolicySet(PSET, { staticPolicies: cedarPolicies }));
  if (pset.type !== 'success') fail(`preparsePolicySet: ${JSON.stringify(pset)}`);
  const [schema, schemaMs] = timed(() => cedar.preparseSchema(SCHEMA, cedarSchema));
  if (schema.type !== 'success') fail(`preparseSchema: ${JSON.stringify(schema)}`);
  start.cedar_prepare_ms = psetMs + schemaMs;
  start.cedar_preparse_policies_ms = psetMs;
  start.cedar_preparse_schema_ms = schemaMs;
}

// ---- the floor ---------------------------------------------------------------
const floorEntry = prepareFloor();
const floorPkg = /** @type {typeof tg} */ (await import(pathToFileURL(floorEntry).href));
const floorModule = await floorPkg.compileCoreModule();
const floor = floorPkg.Toolgate.fromModule({ module: floorModule, catalog: '[]' });
start.floor_core_module_bytes = statSync(floorPkg.coreModuleUrl).size;

// ---- contenders --------------------------------------------------------------
/**
 * @typedef {{ name: string, run: (i: number) => boolean, allowedPerMix: number }} Contender
 */
/** @param {import('toolgate').Toolgate} gate @param {string} name @param {number} allowedPerMix @returns {Contender} */
const toolgateContender = (gate, name, allowedPerMix) => ({
  name,
  run: (i) => gate.evaluate(callBytes[i], contexts[i]).ok,
  allowedPerMix,
});

const decoder = new TextDecoder();
const AGENT = { type: 'Agent', id: 'agent' };
const CALL_ACTION = { type: 'Action', id: 'call' };
const CONFIRMATION_FIELDS = ['confirmed', 'confirmation'];
/**
 * The gateway's adapter, from the same bytes toolgate gets: the Cedar request
 * for an MCP call (as the workload's adapter writes it in mix.json), or null
 * for a call that is not a JSON object with a string name (a deny).
 * `confirmed`/`confirmation` go in as given: the schema types them Bool, so
 * request validation refuses anything but a JSON boolean.
 * @param {Uint8Array} bytes
 * @returns {CedarRequest | null}
 */
function cedarRequest(bytes) {
  let call;
  try {
    call = JSON.parse(decoder.decode(bytes));
  } catch {
    return null;
  }
  if (call === null || typeof call !== 'object' || Array.isArray(call) || typeof call.name !== 'string') return null;
  let args = call.arguments;
  if (args === undefined || args === null) args = {};
  else if (typeof args !== 'object' || Array.isArray(args)) return null;
  /** @type {import('@cedar-policy/cedar-wasm/nodejs').Context} */
  const context = { surface: 'confirming', args: Object.keys(args) };
  for (const field of CONFIRMATION_FIELDS) if (Object.hasOwn(args, field)) context[field] = args[field];
  return { principal: AGENT, action: CALL_ACTION, resource: { type: 'Tool', id: call.name }, context };
}

/**
 * Cedar per call: the adapter's request from the call bytes, and the entities the call needs.
 * @param {Map<string, Entity>} tools
 * @param {Entity} agent
 * @param {string} scale
 * @returns {Contender}
 */
function cedarContender(tools, agent, scale) {
  return {
    name: `cedar at ${scale}`,
    run: (i) => {
      const r = cedarRequest(callBytes[i]);
      if (r === null) return false;
      const tool = tools.get(r.resource.id);
      const answer = cedar.statefulIsAuthorized({
        principal: r.principal,
        action: r.action,
        resource: r.resource,
        context: r.context,
        entities: tool === undefined ? [agent] : [agent, tool],
        preparsedPolicySetId: PSET,
        preparsedSchemaName: SCHEMA,
        validateRequest: true,
      });
      return answer.type === 'success' && answer.response.decision === 'allow';
    },
    allowedPerMix: expectAllowed,
  };
}

/**
 * Runs whole mixes for about `ms` (at least one); returns ns per decision.
 * @param {Contender} c @param {number} ms
 */
function warm(c, ms) {
  const t0 = nowNs();
  const until = t0 + BigInt(Math.round(ms * 1e6));
  let mixes = 0;
  let t = t0;
  do {
    for (let i = 0; i < n; i++) c.run(i);
    mixes++;
    t = nowNs();
  } while (t < until);
  return Number(t - t0) / (mixes * n);
}

/**
 * Median over rounds of the mean ns per decision, round-robin.
 * @param {Contender[]} contenders
 */
function race(contenders) {
  const iters = contenders.map((c) => {
    if (budget.sliceMs === 0) return 1;
    // Two passes: the first warms up (tier-up), the second calibrates the slice.
    warm(c, budget.warmupMs);
    const per = warm(c, Math.max(budget.sliceMs, budget.warmupMs / 4));
    return Math.max(1, Math.round((budget.sliceMs * 1e6) / (per * n)));
  });
  const samples = contenders.map(() => /** @type {number[]} */ ([]));
  for (let r = 0; r < budget.rounds; r++) {
    contenders.forEach((c, k) => {
      const run = c.run;
      let allowed = 0;
      const t0 = nowNs();
      for (let it = 0; it < iters[k]; it++) {
        for (let i = 0; i < n; i++) if (run(i)) allowed++;
      }
      const dt = Number(nowNs() - t0);
      if (allowed !== iters[k] * c.allowedPerMix) {
        fail(`${c.name} allowed ${allowed} of ${iters[k] * n} decisions in a timed round, expected ${iters[k] * c.allowedPerMix}`);
      }
      samples[k].push(dt / (iters[k] * n));
    });
  }
  return { ns: samples.map(median), iters };
}

// ---- ready to decide: load + the first decision on every tool, against Cedar's preparation ----
/**
 * toolgate: a fresh `Toolgate.fromModule` (the module compiled once, as a host
 * does) plus one decision per catalog tool on `{"name":<tool>,"arguments":{}}`
 * with the mix's context, as `bench rust` times rust-native and rust-wasmtime;
 * the median of `budget.readyRounds` such loads (bench rust takes one: wasmtime
 * compiles ahead, so its single shots repeat).
 * Cedar: what this harness prepares before Cedar can decide, `preparsePolicySet`
 * + `preparseSchema` (`cedar_prepare_ms`), timed again here beside toolgate's
 * load. cedar-wasm's stateful API takes the entities per call, so Cedar's side
 * has nothing catalog-sized: the same at every scale. Left out of it, and kept
 * apart in the JSON: the policies' validation against the schema (a check at
 * start, `cedar_validate_ms`, not needed to decide; `bench rust`'s Cedar load
 * includes it) and the JS Map of entities by tool this harness builds from
 * entities.json (`cedar_entities_map_ms`, the host's lookup, not Cedar's).
 * @param {string} catalogText
 * @param {string} scale
 * @returns {{ tools: number, toolgateNs: number, cedarNs: number }}
 */
function readyToDecide(catalogText, scale, coreModule = module) {
  const names = /** @type {{ tools: { name: string }[] }} */ (JSON.parse(catalogText)).tools.map((t) => t.name);
  const firstCalls = names.map((name) => encoder.encode(`{"name":${JSON.stringify(name)},"arguments":{}}`));
  const context = contexts[0];
  /** @type {number[]} */
  const toolgateSamples = [];
  /** @type {number[]} */
  const cedarSamples = [];
  // A single shot varied 2-10x between runs (V8's tiers and collections land in it): the median of
  // a few fresh loads, each a new instance that repeats every lazy step of the engine's.
  for (let round = 0; round < budget.readyRounds; round++) {
    const t0 = nowNs();
    const gate = Toolgate.fromModule({ module: coreModule, policy, catalog: catalogText });
    const decisions = firstCalls.map((call) => gate.evaluate(call, context));
    toolgateSamples.push(Number(nowNs() - t0));
    gate.close();
    decisions.forEach((d, i) => {
      const value = JSON.parse(d.json);
      if (typeof value.ok !== 'boolean' || /^(ENGINE_|INPUT_TOO_LARGE)/.test(value.error?.code ?? '')) {
        fail(`at ${scale} tools, the first decision on ${names[i]} is ${d.json}`);
      }
    });
    const t1 = nowNs();
    const pset = cedar.preparsePolicySet(READY_PSET, { staticPolicies: cedarPolicies });
    const schema = cedar.preparseSchema(READY_SCHEMA, cedarSchema);
    cedarSamples.push(Number(nowNs() - t1));
    if (pset.type !== 'success' || schema.type !== 'success') fail(`Cedar's preparse at ${scale} tools: ${JSON.stringify([pset, schema])}`);
  }
  return { tools: names.length, toolgateNs: median(toolgateSamples), cedarNs: median(cedarSamples) };
}

// ---- load every scale, check every call ------------------------------------------
/**
 * @typedef {{ scale: string, gate: import('toolgate').Toolgate, gateStructural: import('toolgate').Toolgate,
 *   loadMs: number, loadStructuralMs: number, contenders: Contender[], ready: Ready }} Scale
 * @typedef {{ tools: number, toolgateNs: number, cedarNs: number, entitiesMapMs: number }} Ready
 */
/** @type {Scale[]} */
const loaded = [];
const floorContender = { name: 'floor', run: (/** @type {number} */ i) => floor.evaluate(callBytes[i], contexts[i]).ok, allowedPerMix: n };
for (const scale of SCALES) {
  const dir = join(dataDir, scale);
  const [gate, loadMs] = timed(() => Toolgate.fromModule({ module, policy, catalog: text(join(dir, 'catalog.json')) }));
  const [gateStructural, loadStructuralMs] = timed(() => Toolgate.fromModule({ module, policy, catalog: text(join(dir, 'catalog-structural.json')) }));
  const [[entities, tools], entitiesMapMs] = timed(() => {
    const all = /** @type {Entity[]} */ (JSON.parse(text(join(dir, 'entities.json'))));
    return /** @type {const} */ ([all, new Map(all.filter((e) => e.uid.type === 'Tool').map((e) => [e.uid.id, e]))]);
  });
  const agent = entities.find((e) => e.uid.type === 'Agent');
  if (!agent) fail(`${scale}/entities.json has no Agent`);
  const contenders = [
    toolgateContender(gate, `toolgate at ${scale}`, expectAllowed),
    toolgateContender(gateStructural, `toolgate (structural schemas) at ${scale}`, expectAllowed),
    cedarContender(tools, /** @type {Entity} */ (agent), scale),
  ];
  // Everyone agrees with the mix before anything is timed.
  mix.forEach((m, i) => {
    if (!isDeepStrictEqual(cedarRequest(callBytes[i]), m.cedar_request)) {
      fail(`the adapter's Cedar request for \`${m.call_json}\` differs from mix.json's cedar_request`);
    }
    const tool = tools.get(m.cedar_request.resource.id);
    const perCall = tool === undefined ? [agent] : [agent, tool];
    if (!isDeepStrictEqual(perCall, m.cedar_entities)) {
      fail(`at ${scale} tools, the entities for \`${m.call_json}\` differ from mix.json's cedar_entities`);
    }
    for (const c of contenders) {
      const ok = c.run(i);
      if (ok !== m.expect_allowed) {
        fail(`${c.name} tools says ${ok ? 'allow' : 'deny'} on \`${m.call_json}\` (${m.label}); the mix expects ${m.expect_allowed ? 'allow' : 'deny'}`);
      }
    }
    const d = floor.evaluate(callBytes[i], contexts[i]);
    if (!(d.json.length > 100) || d.ok !== true) fail(`the floor returned ${JSON.stringify(d.json)}`);
  });
  const ready = { ...readyToDecide(text(join(dir, 'catalog.json')), scale), entitiesMapMs };
  loaded.push({ scale, gate, gateStructural, loadMs, loadStructuralMs, contenders, ready });
  process.stderr.write(`bench/node: ${scale} tools loaded (${Math.round(loadMs)} ms, structural ${Math.round(loadStructuralMs)} ms), every call agrees\n`);
}

// ---- prepared engines (`toolgate prepare`): rules ready without loading ----
/** @type {{ scale: string, tools: number, toolgateNs: number, cedarNs: number }[]} */
const preparedReady = [];
for (const scale of SCALES) {
  if (preparedDir === undefined) break;
  const dir = join(preparedDir, scale);
  if (!existsSync(join(dir, 'toolgate_policy.core.wasm'))) continue;
  const scaleCatalog = text(join(dataDir, scale, 'catalog.json'));
  const preparedModule = await WebAssembly.compile(readFileSync(join(dir, 'toolgate_policy.core.wasm')));
  // The same bytes as the package's module, checked before it is timed.
  const shipped = Toolgate.fromModule({ module, policy, catalog: scaleCatalog });
  const prepared = Toolgate.fromModule({ module: preparedModule, policy, catalog: scaleCatalog });
  mix.forEach((m, i) => {
    const [a, b] = [prepared.evaluate(callBytes[i], contexts[i]).json, shipped.evaluate(callBytes[i], contexts[i]).json];
    if (a !== b) fail(`the prepared and the package's module disagree at ${scale} tools on \`${m.call_json}\`:\n${a}\n${b}`);
  });
  shipped.close();
  prepared.close();
  // Warm, as the package's module is when its `load node` line is timed.
  preparedReady.push({ scale, ...readyToDecide(scaleCatalog, scale, preparedModule) });
}

// ---- one race: every contender at every scale, round-robin ----------------------
// All scales in the same rounds, so the 10 000 / 34 ratio is not a comparison
// of two moments of a shared machine. The floor needs no catalog: one floor.
const all = [...loaded.flatMap((l) => l.contenders), floorContender];
const { ns, iters } = race(all);
process.stderr.write(`bench/node: mixes per slice: ${all.map((c, k) => `${c.name} ${iters[k]}`).join(', ')}\n`);
const floorNs = ns[ns.length - 1];
/** @type {Record<string, Record<string, number>>} */
const scales = {};
const rows = loaded.map((l, k) => {
  const [toolgateNs, structuralNs, cedarNs] = ns.slice(3 * k, 3 * k + 3);
  scales[l.scale] = {
    toolgate_ns: toolgateNs,
    toolgate_structural_ns: structuralNs,
    cedar_ns: cedarNs,
    floor_ns: floorNs,
    toolgate_load_ms: l.loadMs,
    toolgate_structural_load_ms: l.loadStructuralMs,
    tools: l.ready.tools,
    toolgate_ready_ns: l.ready.toolgateNs,
    cedar_ready_ns: l.ready.cedarNs,
    cedar_entities_map_ms: l.ready.entitiesMapMs,
  };
  l.gate.close();
  l.gateStructural.close();
  return { scale: l.scale, toolgateNs, structuralNs, cedarNs, floorNs, loadMs: l.loadMs, loadStructuralMs: l.loadStructuralMs, ready: l.ready };
});
floor.close();
for (const r of preparedReady) if (scales[r.scale]) scales[r.scale].toolgate_prepared_ready_ns = r.toolgateNs;

// ---- cold start: a fresh process to its first decision ----------------------------
// A child `node` imports the installed package (from bench/node/node_modules,
// resolved from its working directory), compiles the core module, loads the
// seed policy and catalog and prints its decision on the mix's first call: what
// `Toolgate.load` does, in steps so the child can say where the time goes
// (`boot` is node's own start, `performance.now()` when the script begins).
// Nothing compiled is reused between processes: the package compiles its core
// module with `WebAssembly.compile` in every process (it keeps no code cache),
// Node has no on-disk cache for wasm code, and NODE_COMPILE_CACHE (Node >= 22.1,
// JavaScript only) is removed from the child's environment. The peer is the
// same interpreter doing nothing, `node -e 0`, in the same rounds.
const COLD_SCRIPT = `
const t0 = performance.now();
const { readFileSync } = await import('node:fs');
const tg = await import('toolgate');
const t1 = performance.now();
const module = await tg.compileCoreModule();
const t2 = performance.now();
const [policyPath, catalogPath, call, context] = process.argv.slice(1);
const gate = tg.Toolgate.fromModule({ module, policy: readFileSync(policyPath, 'utf8'), catalog: readFileSync(catalogPath, 'utf8') });
const t3 = performance.now();
const decision = gate.evaluate(call, context);
const t4 = performance.now();
process.stdout.write(JSON.stringify({ decision: JSON.parse(decision.json), phases_ms: { boot: t0, import: t1 - t0, compile: t2 - t1, load: t3 - t2, decide: t4 - t3 } }));
`;
/**
 * @param {string[]} args
 * @returns {[string, number]} stdout and the wall time in ms, spawn to exit
 */
function spawnTimed(args) {
  const env = { ...process.env };
  delete env.NODE_COMPILE_CACHE;
  const t = nowNs();
  const r = spawnSync(process.execPath, args, { cwd: join(repoDir, 'bench', 'node'), env, encoding: 'utf8' });
  const wall = toMs(nowNs() - t);
  if (r.status !== 0) fail(`a cold-start child (node ${args[0]}) exited with ${r.status ?? r.signal}: ${r.stderr}`);
  return [r.stdout, wall];
}
const coldSamples = /** @type {number[]} */ ([]);
const bareSamples = /** @type {number[]} */ ([]);
const phaseSamples = /** @type {Record<string, number[]>} */ ({});
for (let r = 0; r < budget.coldRuns; r++) {
  bareSamples.push(spawnTimed(['-e', '0'])[1]);
  const [stdout, wall] = spawnTimed(['--input-type=module', '-e', COLD_SCRIPT, join(dataDir, 'policy.yaml'), join(dataDir, '34', 'catalog.json'), mix[0].call_json, mix[0].context_json]);
  /** @type {{ decision?: { ok?: unknown }, phases_ms?: Record<string, number> }} */
  const child = (() => {
    try {
      return JSON.parse(stdout);
    } catch {
      return {};
    }
  })();
  if (child.decision === undefined || child.phases_ms === undefined) fail(`the cold-start child printed ${JSON.stringify(stdout)}, not its decision`);
  if (typeof child.decision?.ok !== 'boolean') fail(`the cold-start child's decision has no \`ok\`: ${stdout}`);
  if (child.decision?.ok !== mix[0].expect_allowed) fail(`the cold-start child decided ${stdout} on \`${mix[0].call_json}\`; the mix expects ok ${mix[0].expect_allowed}`);
  coldSamples.push(wall);
  for (const [k, v] of Object.entries(child.phases_ms ?? {})) (phaseSamples[k] ??= []).push(v);
}
const cold = {
  toolgate_ms: median(coldSamples),
  bare_ms: median(bareSamples),
  runs: budget.coldRuns,
  toolgate_samples_ms: coldSamples,
  bare_samples_ms: bareSamples,
  phases_ms: Object.fromEntries(Object.entries(phaseSamples).map(([k, v]) => [k, median(v)])),
};

// ---- report ----------------------------------------------------------------------
const loadAtEnd = loadavg()[0];
const peer = `@cedar-policy/cedar-wasm ${cedarVersion} (statefulIsAuthorized, per-call entities)`;
/** @param {number} x @param {number} w */
const num = (x, w) => Math.round(x).toLocaleString('en-US').padStart(w);
/** @param {number} x @param {number} w */
const ratio = (x, w) => x.toFixed(x < 0.1 ? 3 : 2).padStart(w);
const out = [];
out.push(`node ${process.version}: toolgate ${pkg.version} (npm pack; evaluate(Uint8Array call, context JSON text).ok) vs ${peer}`);
out.push('Cedar per call: adapter from the call bytes + statefulIsAuthorized (policies and schema preparsed; validateRequest on; entities: Agent + the Tool)');
out.push(`median of ${budget.rounds} round(s) of the ${n}-call mix, round-robin; ${mode} run; load average ${loadAtStart.toFixed(1)} -> ${loadAtEnd.toFixed(1)} (2 cores)`);
out.push(`${'tools'.padStart(6)} ${'toolgate ns'.padStart(12)} ${'structural'.padStart(11)} ${'cedar ns'.padStart(10)} ${'floor ns'.padStart(9)} ${'tg/cedar'.padStart(9)} ${'tg/floor'.padStart(9)} ${'load ms'.padStart(9)} ${'(struct.)'.padStart(9)}`);
for (const r of rows) {
  out.push(`${r.scale.padStart(6)} ${num(r.toolgateNs, 12)} ${num(r.structuralNs, 11)} ${num(r.cedarNs, 10)} ${num(r.floorNs, 9)} ${ratio(r.toolgateNs / r.cedarNs, 9)} ${ratio(r.toolgateNs / r.floorNs, 9)} ${num(r.loadMs, 9)} ${num(r.loadStructuralMs, 9)}`);
}
const first = rows[0];
const last = rows[rows.length - 1];
out.push(`toolgate at ${last.scale} vs ${first.scale} tools: ${(last.toolgateNs / first.toolgateNs).toFixed(2)}x (structural ${(last.structuralNs / first.structuralNs).toFixed(2)}x)`);
/** @param {string} k */
const f1 = (k) => (typeof start[k] === 'number' ? Number(start[k]).toFixed(1) : '?');
out.push(`start: toolgate core compile ${f1('compile_ms')} ms, instantiate ${f1('instantiate_ms')} ms (later ${f1('instantiate_again_ms')} ms), seed load (34 tools) ${f1('seed_load_ms')} ms (first in process ${f1('seed_load_cold_ms')} ms); core module ${start.core_module_bytes} B, tarball ${start.package_tarball_bytes ?? '?'} B, unpacked ${start.package_unpacked_bytes} B`);
out.push(`       cedar compile ${f1('cedar_compile_ms')} ms, import ${f1('cedar_import_ms')} ms, preparse policies+schema ${f1('cedar_prepare_ms')} ms, validate ${f1('cedar_validate_ms')} ms; module ${start.cedar_module_bytes} B, package unpacked ${start.cedar_package_unpacked_bytes} B`);
out.push(`cold start, median of ${cold.runs} fresh process(es): ${cold.toolgate_ms.toFixed(1)} ms to the first decision, node -e 0 ${cold.bare_ms.toFixed(1)} ms; in the child (ms): ${Object.entries(cold.phases_ms).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}`);
// The machine-readable lines (docs/benchmarks.md): ready to decide per scale, cold start.
for (const r of rows) {
  out.push(`load node ${r.ready.tools} ${r.ready.toolgateNs} ${r.ready.cedarNs} ${(r.ready.toolgateNs / r.ready.cedarNs).toFixed(3)}`);
}
for (const r of preparedReady) {
  out.push(`load node-prepared ${r.tools} ${r.toolgateNs} ${r.cedarNs} ${(r.toolgateNs / r.cedarNs).toFixed(3)}`);
}
out.push(`cold node ${cold.toolgate_ms.toFixed(1)}`);
out.push(`cold node-bare ${cold.bare_ms.toFixed(1)}`);
console.log(out.join('\n'));

if (jsonOut) {
  const result = {
    runtime: 'node',
    peer,
    node: process.version,
    toolgate: `${pkg.name} ${pkg.version} (npm pack of bindings-js)`,
    call_form: 'evaluate(Uint8Array of the call JSON, context JSON text).ok',
    cedar_call: 'adapter from the call bytes (decode, JSON.parse, request) + statefulIsAuthorized({ request, entities: [Agent, Tool if any], preparsedPolicySetId, preparsedSchemaName, validateRequest: true })',
    cedar_preloaded: 'policy set and schema (preparsePolicySet, preparseSchema); entities cannot be preloaded in this API',
    mode,
    rounds: budget.rounds,
    mix_calls: n,
    load_average: [loadAtStart, loadAtEnd],
    scales,
    start,
    ready_to_decide: 'per scale: toolgate_ready_ns = Toolgate.fromModule (policy + catalog) + evaluate on {"name":<tool>,"arguments":{}} for every tool; cedar_ready_ns = preparsePolicySet + preparseSchema (entities go per call in this API)',
    cold,
  };
  writeFileSync(jsonOut, `${JSON.stringify(result, null, 2)}\n`);
}
