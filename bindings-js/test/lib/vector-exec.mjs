// Runtime-neutral: runs the cases of one vector file against loaded rules and
// returns what the engine produced. Used by the Node tests and, unchanged,
// inside the workerd worker. Comparing is done by vector-check.mjs.

/** @param {string} hex */
export function hexBytes(hex) {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) throw new Error(`bad call_hex ${JSON.stringify(hex)}`);
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** The call bytes of a case: `call` as its JSON, `call_text` as UTF-8, `call_hex` as bytes. @param {any} c */
function callOf(c) {
  if ('call' in c) return new TextEncoder().encode(JSON.stringify(c.call));
  if ('call_text' in c) return new TextEncoder().encode(c.call_text);
  return hexBytes(c.call_hex);
}

/** @param {any} c */
const contextOf = (c) => ('context_text' in c ? c.context_text : JSON.stringify(c.context ?? {}));

/**
 * A case's confirmation (absent: none) as `Toolgate#decide` takes it.
 * @param {any} k
 */
function confirmationOf(k) {
  if (k === undefined) return 'none';
  if (typeof k === 'string') return k;
  return { seal: { payload: k.seal.payload, caller: k.seal.caller, nowMs: BigInt(k.seal.now_ms) } };
}

/**
 * @param {any} gate a Toolgate
 * @param {any} c one case (already validated)
 * @returns {{ output?: string | string[], error?: { name: string, code: string, message: string } }}
 */
export function runCase(gate, c) {
  try {
    switch (c.op) {
      case 'evaluate':
        return { output: gate.evaluate(callOf(c), contextOf(c)).json };
      case 'decide': {
        const o = gate.decide(callOf(c), contextOf(c), confirmationOf(c.confirmation));
        return { output: { decision: o.decision.json, forward: o.forwardJson, blocked_result: o.blockedResultJson, digest: o.digest } };
      }
      case 'seal_payload':
        try {
          return { output: gate.sealPayload(callOf(c), c.caller ?? '', c.id ?? '', c.expires_ms ?? 0) };
        } catch (e) {
          // A problem is the case's answer, as the Rust runner writes it.
          const err = /** @type {any} */ (e);
          if (err?.name === 'ProblemError') return { output: { error: err.code } };
          throw e;
        }
      case 'list':
        return { output: gate.listExposable(JSON.stringify(c.context ?? {})).json };
      case 'turn':
        return { output: gate.turn(JSON.stringify(c.state ?? null), JSON.stringify(c.input)).json };
      default:
        throw new Error(`unknown op ${c.op}`);
    }
  } catch (e) {
    const err = /** @type {any} */ (e);
    return { error: { name: err?.name ?? 'Error', code: err?.code ?? '', message: String(err?.message ?? err) } };
  }
}

/**
 * Loads the rules of one resolved vector file and runs its cases.
 * @param {(rules: {policy?: string, catalog: string}) => Promise<any>} load
 * @param {{ policy_text: string | null, catalog_text: string, cases: any[] }} file
 */
export async function runFile(load, file) {
  let gate;
  try {
    gate = await load({ policy: file.policy_text ?? undefined, catalog: file.catalog_text });
  } catch (e) {
    const err = /** @type {any} */ (e);
    return { load_error: { name: err?.name, code: err?.code, line: err?.line, column: err?.column, message: String(err?.message) } };
  }
  try {
    return { revision: gate.revision, cases: file.cases.map((c) => ({ name: c.name, ...runCase(gate, c) })) };
  } finally {
    gate.close();
  }
}
