// What the engine answers, as objects that keep its exact bytes: decisions,
// tool lists, turn states; and the host's own answers when the engine cannot
// decide (SPEC §7).
import { HOST_FAULTS } from './faults.js';
import { EngineLimitError, EngineOutOfMemoryError, EngineTrapError } from './errors.js';

/** @typedef {import('./faults.js').HostFaultCode} HostFaultCode */
/** @typedef {'ENGINE_TRAP' | 'ENGINE_LIMIT' | 'ENGINE_OUT_OF_MEMORY'} EngineFaultCode */
/** @typedef {'rejected' | 'error' | (string & {})} Outcome */
/**
 * @typedef {object} DecisionErrorBody
 * @property {string} code
 * @property {string} message
 * @property {boolean} retryable
 * @property {Outcome} outcome
 * @property {Record<string, unknown>} [details]
 */
/**
 * @typedef {object} DecisionMetadata
 * @property {string | null} tool
 * @property {boolean} blocked_by_policy
 * @property {'read_only' | 'transactional'} [operation_type]
 * @property {string} [effect]
 * @property {'tool_policies' | 'tools_yaml' | 'catalog' | 'defaults' | 'builtin'} [policy_source]
 * @property {boolean} [confirmation_required]
 * @property {boolean} [confirmation_received]
 * @property {string} [policy_revision]
 */
/**
 * @typedef {object} DecisionValue
 * @property {boolean} ok
 * @property {DecisionErrorBody | null} error
 * @property {DecisionMetadata & Record<string, unknown>} metadata
 */
/**
 * @typedef {object} ListedTool
 * @property {string} name
 * @property {string} [title]
 * @property {string} [description]
 * @property {Record<string, unknown>} inputSchema
 * @property {Record<string, unknown>} [outputSchema]
 * @property {{ readOnlyHint?: boolean, destructiveHint?: boolean, idempotentHint?: boolean, openWorldHint?: boolean, [k: string]: unknown }} [annotations]
 */

/**
 * A decision: the engine's canonical JSON (`json`, exact bytes) and its typed form.
 *
 * `ok` is always read from the bytes, never from the parsed object: `value`
 * (and the getters built on it: `error`, `metadata`, `code`, …) is one parsed
 * object, kept and shared, that a caller could edit; `toJSON()` hands out a
 * fresh copy each time. So an audit hook that edits what it was given cannot
 * turn a deny into an allow (`bindings-js/test/mcp-hooks.test.mjs`).
 */
export class Decision {
  /** @type {DecisionValue | undefined} */
  #value;
  /**
   * The canonical decision JSON exactly as the engine wrote it.
   * @readonly @type {string}
   */
  json;
  /** @param {string} json */
  constructor(json) {
    this.json = json;
  }
  /** The parsed decision object (parsed once, then the same object: edit `toJSON()`'s copy instead). @returns {DecisionValue} */
  get value() { return this.#value ??= JSON.parse(this.json); }
  /**
   * Whether the call is allowed, read from the bytes. SPEC §5: the canonical
   * writer puts `ok` first (`{"ok":true,` / `{"ok":false,`), so no parse is
   * needed (a parse is ~15 % of a decision in Node); anything else is parsed
   * afresh, never taken from `value`, which a caller may have edited.
   * @returns {boolean}
   */
  get ok() {
    if (this.json.startsWith('{"ok":true,')) return true;
    if (this.json.startsWith('{"ok":false,')) return false;
    return JSON.parse(this.json)?.ok === true;
  }
  /** @returns {DecisionErrorBody | null} */
  get error() { return this.value.error; }
  /** @returns {DecisionMetadata & Record<string, unknown>} */
  get metadata() { return this.value.metadata; }
  /** The error code, or null when the call is allowed. @returns {string | null} */
  get code() { return this.value.error?.code ?? null; }
  /** @returns {string | null} */
  get tool() { return this.value.metadata?.tool ?? null; }
  /** @returns {boolean} */
  get retryable() { return this.value.error?.retryable ?? false; }
  toString() { return this.json; }
  /** A fresh copy of the parsed decision (a new object on every call: editing it changes nothing here). @returns {DecisionValue} */
  toJSON() { return JSON.parse(this.json); }
}

/** The `tools/list` result a context may see (`json`: exact bytes). */
export class ToolList {
  /** @type {{ tools: ListedTool[] } | undefined} */
  #value;
  /** The engine's JSON, exact bytes. @readonly @type {string} */
  json;
  /** @param {string} json */
  constructor(json) {
    this.json = json;
  }
  /** @returns {{ tools: ListedTool[] }} */
  get value() { return this.#value ??= JSON.parse(this.json); }
  /** @returns {ListedTool[]} */
  get tools() { return this.value.tools; }
  /** @returns {string[]} */
  get names() { return this.tools.map((t) => t.name); }
  toString() { return this.json; }
  /** A fresh copy of the parsed list (a new object on every call). @returns {{ tools: ListedTool[] }} */
  toJSON() { return JSON.parse(this.json); }
}

/**
 * JSON.parse for text whose values are forwarded to a tool: refuses an
 * integer the engine read exactly (one a 64-bit integer holds) that a
 * JavaScript number rounds to another, which JSON.stringify would then send
 * as other digits than the engine decided on. (Digits JSON.stringify writes
 * back as they are pass; so do integers past 64 bits, which the engine
 * itself reads as the same double.)
 * @param {string} text
 * @returns {any}
 */
export function parseExact(text) {
  const value = JSON.parse(text);
  for (const digits of longIntegers(text)) {
    const exact = BigInt(digits);
    if (exact >= -(2n ** 63n) && exact < 2n ** 64n && String(Number(digits)) !== digits) {
      throw new RangeError(`the engine's JSON holds ${digits.slice(0, 24)}…, an integer a JavaScript number cannot hold exactly; read the exact text (\`json\`) instead`);
    }
  }
  return value;
}

/**
 * The integer literals of JSON text longer than a double always holds (15
 * digits), outside strings.
 * @param {string} text
 * @returns {Generator<string>}
 */
function* longIntegers(text) {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) { // a string: skip to its closing quote
      for (i++; i < text.length && text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c) i++;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      let end = i + 1;
      while (end < text.length && /[0-9.eE+-]/.test(text[end])) end++;
      const token = text.slice(i, end);
      if (token.length > 15 && /^-?[0-9]+$/.test(token)) yield token;
      i = end - 1;
    }
  }
}

/** The transactional runtime's state after a turn (SPEC §6; `json`: exact bytes). */
export class TurnState {
  /** @type {Record<string, any> | undefined} */
  #value;
  /** The engine's JSON, exact bytes. @readonly @type {string} */
  json;
  /** @param {string} json */
  constructor(json) {
    this.json = json;
  }
  /**
   * The parsed state. Throws a RangeError when it holds an integer a
   * JavaScript number would round (`execute` would then forward another
   * number than was decided): persist and read `json` then.
   * @returns {Record<string, any>}
   */
  get value() { return this.#value ??= parseExact(this.json); }
  toString() { return this.json; }
  /** A fresh copy of the parsed state (a new object on every call; throws as `value`). @returns {Record<string, any>} */
  toJSON() { return parseExact(this.json); }
}

/**
 * The MCP `CallToolResult` text for a blocked call, in the engine's shape
 * (`blocked_result` in policy-core/src/pipeline.rs): the decision JSON as
 * text and as `structuredContent`. Used for the host's own fault decisions
 * (no tool, so no output schema), byte for byte as every host builds them.
 * @param {string} decisionJson
 * @returns {string}
 */
export function blockedResultJson(decisionJson) {
  return `{"content":[{"type":"text","text":${JSON.stringify(decisionJson)}}],"structuredContent":${decisionJson},"isError":true}`;
}

/**
 * What `decide` answers (WIT `outcome`): the decision, the arguments to
 * forward when allowed, the MCP result to answer with when denied (absent for
 * NOT_FOUND: answer as the server answers an unknown tool), and the call
 * digest. The `…Json` fields are the engine's exact bytes; `forward` and
 * `blockedResult` are parsed on first use (each its own object per outcome).
 */
export class CallOutcome {
  /** @type {Record<string, unknown> | null | undefined} */
  #forward;
  /** @type {Record<string, unknown> | null | undefined} */
  #blocked;
  /** The decision. @readonly @type {Decision} */
  decision;
  /** Allowed: the arguments to forward, canonical JSON object text exactly as the engine wrote it; else null. @readonly @type {string | null} */
  forwardJson;
  /** Denied about a tool the caller may see: the `CallToolResult` JSON to answer with; else null. @readonly @type {string | null} */
  blockedResultJson;
  /** The call digest (`sha256:…`) approvals and seals bind, when the call names a visible tool with object arguments. @readonly @type {string | null} */
  digest;
  /**
   * @param {Decision} decision
   * @param {string | null} forwardJson
   * @param {string | null} blockedResultJson
   * @param {string | null} digest
   */
  constructor(decision, forwardJson, blockedResultJson, digest) {
    this.decision = decision;
    this.forwardJson = forwardJson;
    this.blockedResultJson = blockedResultJson;
    this.digest = digest;
  }
  /** Whether the call is allowed (`decision.ok`). @returns {boolean} */
  get ok() { return this.decision.ok; }
  /** The arguments to forward, parsed (null when denied; throws a RangeError, as `TurnState.value`, for an integer a number would round: use `forwardJson`). @returns {Record<string, unknown> | null} */
  get forward() {
    if (this.#forward === undefined) this.#forward = this.forwardJson === null ? null : parseExact(this.forwardJson);
    return /** @type {Record<string, unknown> | null} */ (this.#forward);
  }
  /** The blocked `CallToolResult`, parsed (null when allowed or NOT_FOUND). @returns {Record<string, unknown> | null} */
  get blockedResult() {
    if (this.#blocked === undefined) this.#blocked = this.blockedResultJson === null ? null : JSON.parse(this.blockedResultJson);
    return /** @type {Record<string, unknown> | null} */ (this.#blocked);
  }
  /** The outcome as the conformance vectors write it. */
  toJSON() {
    return { decision: this.decision.json, forward: this.forwardJson, blocked_result: this.blockedResultJson, digest: this.digest };
  }
}

/**
 * The outcome of a call the engine could not decide (SPEC §7): the host-built
 * decision and its blocked result, nothing forwarded, no digest (as
 * `Outcome::fault` in toolgate).
 * @param {HostFaultCode} code
 * @returns {CallOutcome}
 */
export function faultOutcome(code) {
  return new CallOutcome(faultDecision(code), null, FAULT_BLOCKED[code], null);
}

/** The blocked results of the host-built decisions. @type {Readonly<Record<HostFaultCode, string>>} */
const FAULT_BLOCKED = Object.freeze(
  /** @type {Record<HostFaultCode, string>} */ (Object.fromEntries(Object.entries(HOST_FAULTS).map(([code, bytes]) => [code, blockedResultJson(bytes)]))),
);

/**
 * A host-built decision (SPEC §7) as a Decision: a new one for every fault,
 * as for every decision the engine makes, so a caller that edits the one it
 * was handed (an audit hook filling in `metadata.tool`) cannot change what a
 * later call's fault says.
 * @param {HostFaultCode} code
 * @returns {Decision}
 */
export function faultDecision(code) {
  return new Decision(HOST_FAULTS[code]);
}

/**
 * The typed error for a fault on a call that returns a value (list, turn, sealPayload).
 * @param {EngineFaultCode} code
 * @param {unknown} cause
 */
export function engineFault(code, cause) {
  if (code === 'ENGINE_OUT_OF_MEMORY') return new EngineOutOfMemoryError('the policy engine went over its memory cap on this request; it was not served', cause);
  if (code === 'ENGINE_LIMIT') return new EngineLimitError('the policy engine ran out of its compute budget (or deadline) on this request; it was not served');
  return new EngineTrapError('the policy engine failed on this request; it was not served', cause);
}
