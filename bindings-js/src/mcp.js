// MCP middleware for the official TypeScript SDK (@modelcontextprotocol/sdk):
// tools/list shows only the exposable tools, with derived annotations;
// tools/call is decided before the tool's handler runs.
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { EngineFaultError } from './errors.js';
import { faultDecision } from './core.js';

const LIST = 'tools/list';
const CALL = 'tools/call';
const kGuarded = Symbol.for('toolgate.mcp.guarded');

/**
 * The answer McpServer gives for a tool it does not have; a hidden tool gets
 * exactly this, so it cannot be told apart from a missing one.
 * @param {string} name
 */
export function unknownToolResult(name) {
  return { content: [{ type: 'text', text: new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`).message }], isError: true };
}

/**
 * The tool error result for a blocked call: the decision's canonical JSON as
 * text, and (see `structuredContent`) the decision as structured content.
 * @param {import('./core.js').Decision} decision
 * @param {boolean} structured
 */
export function blockedResult(decision, structured) {
  /** @type {{ content: {type: 'text', text: string}[], isError: true, structuredContent?: any }} */
  const result = { content: [{ type: 'text', text: decision.json }], isError: true };
  if (structured) result.structuredContent = decision.value;
  return result;
}

/**
 * The default per-request context: the confirming surface, and the scopes of
 * the request's auth info when the transport authenticated it (no auth info:
 * no scope check).
 * @param {any} extra
 */
export function defaultContext(extra) {
  const auth = extra?.authInfo;
  return { surface: 'confirming', ...(auth ? { scopes: Array.isArray(auth.scopes) ? auth.scopes : [] } : {}) };
}

/**
 * Wraps an MCP server (McpServer or the low-level Server) with a Toolgate.
 *
 * @param {any} target an `McpServer` or a `Server` of @modelcontextprotocol/sdk
 * @param {{
 *   gate: import('./core.js').Toolgate,
 *   context?: (extra: any, request: any) => unknown,
 *   structuredContent?: 'auto' | 'always' | 'never',
 *   onDecision?: (decision: import('./core.js').Decision, info: { name: string, extra: any }) => void,
 * }} options
 */
export function guardServer(target, options) {
  const { gate } = options ?? {};
  if (!gate || typeof gate.evaluate !== 'function') throw new TypeError('guardServer needs { gate: Toolgate }');
  const contextOf = options.context ?? defaultContext;
  const structuredMode = options.structuredContent ?? 'auto';
  if (!['auto', 'always', 'never'].includes(structuredMode)) throw new TypeError('structuredContent must be auto, always or never');
  const server = target?.server && typeof target.server.setRequestHandler === 'function' ? target.server : target;
  if (!server || typeof server.setRequestHandler !== 'function' || !(server._requestHandlers instanceof Map)) {
    throw new TypeError('guardServer needs an McpServer or a Server of @modelcontextprotocol/sdk');
  }
  if (server[kGuarded]) throw new Error('this server is already guarded');
  server[kGuarded] = true;
  // McpServer installs its tools handlers on the first registerTool; install
  // them now so they are wrapped even when tools are registered later.
  if (typeof target.registerTool === 'function' && !server._requestHandlers.has(CALL) && typeof target.setToolRequestHandlers === 'function') {
    target.setToolRequestHandlers();
  }

  /** Tools whose last listing declared an output schema. @type {Map<string, boolean>} */
  const outputSchemas = new Map();
  /** @type {(request: any, extra: any) => Promise<any>} */
  let innerList = async () => ({ tools: [] });

  /** @param {any} tools */
  const remember = (tools) => {
    for (const t of Array.isArray(tools) ? tools : []) if (t && typeof t.name === 'string') outputSchemas.set(t.name, t.outputSchema !== undefined);
  };

  /** Whether a blocked result may carry structuredContent (see README: SDK v1 clients validate error results against the success schema). */
  const structured = async (/** @type {string} */ name, /** @type {any} */ extra) => {
    if (structuredMode !== 'auto') return structuredMode === 'always';
    if (!outputSchemas.has(name)) {
      try { remember((await innerList({ method: LIST, params: {} }, extra))?.tools); } catch { /* unknown: be safe */ }
    }
    return outputSchemas.get(name) === false;
  };

  /** @param {(request: any, extra: any) => Promise<any>} inner */
  const wrapList = (inner) => {
    innerList = inner;
    return async (/** @type {any} */ request, /** @type {any} */ extra) => {
      const exposed = gate.listExposable(await contextOf(extra, request));
      const result = await inner(request, extra);
      const served = new Map((result?.tools ?? []).map((/** @type {any} */ t) => [t.name, t]));
      remember(result?.tools);
      const tools = [];
      for (const entry of exposed.tools) {
        const tool = served.get(entry.name);
        if (!tool) continue; // in the catalog, not on this server
        tools.push({ ...tool, annotations: { ...(tool.annotations ?? {}), ...(entry.annotations ?? {}) } });
      }
      return { ...result, tools };
    };
  };

  /** @param {(request: any, extra: any) => Promise<any>} inner */
  const wrapCall = (inner) => async (/** @type {any} */ request, /** @type {any} */ extra) => {
    const params = request?.params;
    const name = params?.name;
    if (typeof name !== 'string') return inner(request, extra); // the SDK rejects the malformed request
    const context = await contextOf(extra, request);
    const decision = gate.evaluate(JSON.stringify({ name, arguments: params.arguments }), context);
    options.onDecision?.(decision, { name, extra });
    if (!decision.ok) {
      if (decision.code === 'NOT_FOUND') return unknownToolResult(name);
      return blockedResult(decision, await structured(name, extra));
    }
    let fields;
    try {
      fields = gate.stripFields(name);
    } catch (e) {
      if (e instanceof EngineFaultError) return blockedResult(faultDecision(e.code), await structured(name, extra));
      throw e;
    }
    let args = params.arguments;
    if (fields.length > 0 && args && typeof args === 'object' && fields.some((f) => Object.hasOwn(args, f))) {
      args = { ...args };
      for (const f of fields) delete args[f];
    }
    return inner(args === params.arguments ? request : { ...request, params: { ...params, arguments: args } }, extra);
  };

  const handlers = server._requestHandlers;
  if (handlers.has(LIST)) handlers.set(LIST, wrapList(handlers.get(LIST)));
  if (handlers.has(CALL)) handlers.set(CALL, wrapCall(handlers.get(CALL)));
  const setRequestHandler = server.setRequestHandler.bind(server);
  server.setRequestHandler = (/** @type {any} */ schema, /** @type {any} */ handler) => {
    setRequestHandler(schema, handler);
    for (const [method, wrap] of /** @type {const} */ ([[LIST, wrapList], [CALL, wrapCall]])) {
      const h = handlers.get(method);
      if (h && !h[kGuarded]) { const w = wrap(h); w[kGuarded] = true; handlers.set(method, w); }
    }
  };
  for (const method of [LIST, CALL]) { const h = handlers.get(method); if (h) h[kGuarded] = true; }
  return target;
}
