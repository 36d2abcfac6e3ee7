import type { ContextInput, Decision, Toolgate } from './core.js';

export interface GuardOptions {
  gate: Toolgate;
  /** The per-request context. Default: confirming surface, scopes from `extra.authInfo` when present. */
  context?: (extra: any, request: any) => ContextInput | Promise<ContextInput>;
  /**
   * Whether a blocked result carries the decision as `structuredContent`:
   * `auto` (default) only for tools without an `outputSchema` (SDK 1.x clients
   * validate error results against the success schema), `always`, or `never`.
   */
  structuredContent?: 'auto' | 'always' | 'never';
  /** Called with every decision (audit). */
  onDecision?: (decision: Decision, info: { name: string; extra: any }) => void;
}
export interface ToolErrorResult {
  content: { type: 'text'; text: string }[];
  isError: true;
  structuredContent?: Record<string, unknown>;
}
/** Wraps an McpServer or a low-level Server; returns it. */
export function guardServer<T>(server: T, options: GuardOptions): T;
/** McpServer's answer for a tool it does not have. */
export function unknownToolResult(name: string): ToolErrorResult;
/** The tool error result for a blocked call. */
export function blockedResult(decision: Decision, structured: boolean): ToolErrorResult;
/** The default per-request context. */
export function defaultContext(extra: any): { surface: 'confirming'; scopes?: string[] };
