import type { HostFaultCode } from './faults.js';
import type { Problem } from './errors.js';
export * from './errors.js';
export { HOST_FAULTS, MAX_INPUT_BYTES } from './faults.js';
export type { HostFaultCode } from './faults.js';

/** The WIT contract version this package speaks: "0.1.0". */
export const CONTRACT_VERSION: '0.1.0';
/** Default cap on the component's memory per Toolgate (1 GiB), checked after every call. */
export const DEFAULT_MAX_MEMORY_BYTES: number;
/** Default per-call deadline (5000 ms), checked when a call returns. */
export const DEFAULT_DEADLINE_MS: number;

export type Surface = 'confirming' | 'direct';
/** Per-call context. Absent `scopes`: no scope check; absent allowlist: every tool. */
export interface Context {
  surface?: Surface | null;
  scopes?: readonly string[] | null;
  allowedTools?: readonly string[] | null;
  /** The wire name; same as `allowedTools`. */
  allowed_tools?: readonly string[] | null;
}
/** A context object, or its JSON text (passed to the engine as is). */
export type ContextInput = Context | string | null | undefined;
/** A call: `{name, arguments}`, its JSON text, or its raw bytes (sent as is). */
export type CallInput = { name: string; arguments?: Record<string, unknown> | null } | string | Uint8Array | ArrayBuffer | ArrayBufferView;

export type Outcome = 'rejected' | 'error' | (string & {});
export interface DecisionErrorBody {
  code: string;
  message: string;
  retryable: boolean;
  outcome: Outcome;
  details?: Record<string, unknown>;
}
export interface DecisionMetadata {
  tool: string | null;
  blocked_by_policy: boolean;
  operation_type?: 'read_only' | 'transactional';
  effect?: string;
  policy_source?: 'tool_policies' | 'tools_yaml' | 'catalog' | 'defaults' | 'builtin';
  confirmation_required?: boolean;
  confirmation_received?: boolean;
  policy_revision?: string;
  [key: string]: unknown;
}
export interface DecisionValue {
  ok: boolean;
  error: DecisionErrorBody | null;
  metadata: DecisionMetadata;
}

/** A decision: the engine's canonical JSON (`json`, exact bytes) and its typed form. */
export class Decision {
  constructor(json: string);
  /** The canonical decision JSON exactly as the engine wrote it. */
  readonly json: string;
  readonly value: DecisionValue;
  readonly ok: boolean;
  readonly error: DecisionErrorBody | null;
  readonly metadata: DecisionMetadata;
  /** The error code, or null when allowed. */
  readonly code: string | null;
  readonly tool: string | null;
  readonly retryable: boolean;
  toString(): string;
  toJSON(): DecisionValue;
}

export interface ListedTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean; [k: string]: unknown };
  [key: string]: unknown;
}
/** The `tools/list` result a context may see (`json`: exact bytes). */
export class ToolList {
  constructor(json: string);
  readonly json: string;
  readonly value: { tools: ListedTool[] };
  readonly tools: ListedTool[];
  readonly names: string[];
  toString(): string;
  toJSON(): { tools: ListedTool[] };
}
/** The transactional runtime's state after a turn (`json`: exact bytes). */
export class TurnState {
  constructor(json: string);
  readonly json: string;
  readonly value: Record<string, any>;
  toString(): string;
  toJSON(): Record<string, any>;
}

export interface Finding {
  severity: 'error' | 'warning' | (string & {});
  problem: Problem;
}
export interface RulesText {
  /** The policy (tool_policies.yaml) text; absent/null: legacy, the catalog decides. */
  policy?: string | null;
  /** The catalog text (tools/list JSON, published catalog, or tools.yaml). */
  catalog: string;
  /** false: `evaluate` goes through jco's generated wrapper instead of the canonical-ABI fast path. */
  fastPath?: boolean;
  /** Cap on the component's linear memory, bytes (default 1 GiB; Infinity: none). Checked after every call: over it, ENGINE_OUT_OF_MEMORY and a new instance. */
  maxMemoryBytes?: number;
  /** Per-call deadline, ms (default 5000; Infinity: none). Checked when the call returns: a later answer is dropped, ENGINE_LIMIT. */
  deadlineMs?: number;
}
export interface LoadOptions extends RulesText {
  /** The compiled core module (`toolgate/core.wasm`), a promise of it, or its bytes. Default: the runtime's. */
  module?: WebAssembly.Module | PromiseLike<WebAssembly.Module> | BufferSource;
}

/** Loaded rules: one component instance, one rule set. Immutable. */
export class Toolgate {
  /** Loads synchronously from an already compiled core module. Throws LoadError. */
  constructor(module: WebAssembly.Module, rules: RulesText);
  /** Loads synchronously from an already compiled core module (workers). */
  static fromModule(options: RulesText & { module: WebAssembly.Module }): Toolgate;
  /** Loads rules; rejects with LoadError / ContractVersionError. */
  static load(options: LoadOptions): Promise<Toolgate>;
  /** The `policy_revision` every decision carries. */
  readonly revision: string;
  /** Lints on the loaded rules. */
  readonly findings: readonly Finding[];
  /** How many times the instance was replaced after a trap. */
  readonly recoveries: number;
  /** The memory cap in bytes (see RulesText.maxMemoryBytes); may be changed. */
  maxMemoryBytes: number;
  /** The per-call deadline in ms (see RulesText.deadlineMs); may be changed. */
  deadlineMs: number;
  /** Decides one tools/call; never throws for a bad call or a failing engine (deny with a code). */
  evaluate(call: CallInput, context?: ContextInput): Decision;
  /** The tools/list result for this context. Throws ProblemError (bad context), EngineFaultError (EngineTrapError, EngineLimitError, EngineOutOfMemoryError), InputTooLargeError. */
  listExposable(context?: ContextInput): ToolList;
  /** One turn of the state machine (SPEC §6). `state` null: a new conversation. */
  turn(state: Record<string, unknown> | string | null, input: Record<string, unknown> | string): TurnState;
  /** Engine fields to remove from this tool's arguments before its handler runs. */
  stripFields(tool: string): readonly string[];
  /** Frees the rule set. */
  close(): void;
  [Symbol.dispose](): void;
}

/** Sets how `Toolgate.load` gets the core module when none is given. */
export function setDefaultModule(provider: () => Promise<WebAssembly.Module>): void;
/** A host-built decision (SPEC §7) as a Decision. */
export function faultDecision(code: HostFaultCode): Decision;
/** The context JSON the engine gets for a context input. */
export function contextJson(context: ContextInput): string;
