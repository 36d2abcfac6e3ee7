// MCP middleware for the official TypeScript SDK (@modelcontextprotocol/sdk):
// tools/list shows only the exposable tools, with derived annotations;
// tools/call is decided before the tool's handler runs.
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { EngineFaultError } from './errors.js';
import { faultDecision } from './core.js';
import { callJson, engineJson } from './calljson.js';

/**
 * @typedef {object} GuardOptions
 * @property {import('./core.js').Toolgate} gate
 * @property {(extra: any, request: any) => import('./core.js').ContextInput | Promise<import('./core.js').ContextInput>} [context]
 *   The per-request context. Default: confirming surface, scopes from `extra.authInfo` when present.
 * @property {'auto' | 'always' | 'never'} [structuredContent]
 *   Whether a blocked result carries the decision as `structuredContent`:
 *   `auto` (default) only for tools without an `outputSchema` (SDK 1.x clients
 *   validate error results against the success schema), `always`, or `never`.
 * @property {(decision: import('./core.js').Decision, info: { name: string, extra: any }) => void} [onDecision]
 *   Called with every decision (audit).
 */
/**
 * @typedef {object} ToolErrorResult
 * @property {{ type: 'text', text: string }[]} content
 * @property {true} isError
 * @property {Record<string, unknown>} [structuredContent]
 */

const LIST = 'tools/list';
const CALL = 'tools/call';
const kGuarded = Symbol.for('toolgate.mcp.guarded');

/**
 * The answer McpServer gives for a tool it does not have; a hidden tool gets
 * exactly this, so it cannot be told apart from a missing one.
 * @param {string} name
 * @returns {ToolErrorResult}
 */
export function unknownToolResult(name) {
  return { content: [{ type: 'text', text: new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`).message }], isError: true };
}

/**
 * The tool error result for a blocked call: the decision's canonical JSON as
 * text, and (see `structuredContent`) the decision as structured content.
 * @param {import('./core.js').Decision} decision
 * @param {boolean} structured
 * @returns {ToolErrorResult}
 */
export function blockedResult(decision, structured) {
  /** @type {ToolErrorResult} */
  const result = { content: [{ type: 'text', text: decision.json }], isError: true };
  if (structured) result.structuredContent = decision.value;
  return result;
}

/**
 * The default per-request context: the confirming surface, and the scopes of
 * the request's auth info when the transport authenticated it (no auth info:
 * no scope check).
 * @param {any} extra
 * @returns {{ surface: 'confirming', scopes?: string[] }}
 */
export function defaultContext(extra) {
  const auth = extra?.authInfo;
  return { surface: 'confirming', ...(auth ? { scopes: Array.isArray(auth.scopes) ? auth.scopes : [] } : {}) };
}

/**
 * Wraps an MCP server (McpServer or the low-level Server) with a Toolgate.
 *
 * @template T
 * @param {T} guarded an `McpServer` or a `Server` of @modelcontextprotocol/sdk
 * @param {GuardOptions} options
 * @returns {T}
 */
export function guardServer(guarded, options) {
  const target = /** @type {any} */ (guarded);
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

  /**
   * What the engine allowed, per request (keyed by the SDK's per-request
   * `extra`), for McpServer's check of the arguments its zod schemas hand the
   * handler: the name, the JSON of the arguments the tool was sent, and the
   * engine fields taken off them, and the context it decided in.
   * @type {WeakMap<object, { name: string, sent: string, engineFields: Record<string, unknown> | null, context: any }>}
   */
  const allowed = new WeakMap();

  /** @param {(request: any, extra: any) => Promise<any>} inner */
  const wrapCall = (inner) => async (/** @type {any} */ request, /** @type {any} */ extra) => {
    const params = request?.params;
    const name = params?.name;
    if (typeof name !== 'string') return inner(request, extra); // the SDK rejects the malformed request
    const context = await contextOf(extra, request);
    // The exact values the handler gets: nothing JSON cannot say is rewritten
    // (calljson.js); Infinity, NaN and the like are refused by the engine.
    const decision = gate.evaluate(callJson(name, params.arguments), context);
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
    /** @type {Record<string, unknown> | null} */
    let engineFields = null;
    if (fields.length > 0 && args && typeof args === 'object' && fields.some((f) => Object.hasOwn(args, f))) {
      args = { ...args };
      engineFields = {};
      for (const f of fields) {
        if (Object.hasOwn(args, f)) engineFields[f] = args[f];
        delete args[f];
      }
    }
    if (mcpServer && extra && typeof extra === 'object') {
      allowed.set(extra, { name, sent: args === undefined ? '' : engineJson(args), engineFields, context });
    }
    return inner(args === params.arguments ? request : { ...request, params: { ...params, arguments: args } }, extra);
  };

  /**
   * McpServer hands its tool handlers the output of their zod input schemas,
   * not the arguments sent: defaults, coercions, transforms and stripped keys
   * change them. The handler must run only on what the engine allowed, so the
   * arguments it is about to get are compared with those the engine decided
   * on; when they differ they are decided again (with the engine fields the
   * call carried, which the handler never gets), and a deny is the tool's
   * result instead of the handler's.
   * @param {any} tool
   * @param {unknown} args
   * @param {any} extra
   * @param {() => Promise<any>} run
   */
  const checkHandlerArgs = async (tool, args, extra, run) => {
    const sent = extra && typeof extra === 'object' ? allowed.get(extra) : undefined;
    const name = sent && mcpServer._registeredTools?.[sent.name] === tool
      ? sent.name
      : Object.entries(mcpServer._registeredTools ?? {}).find(([, t]) => t === tool)?.[0];
    if (typeof name !== 'string') return run(); // not a registered tool: the SDK answers
    const got = args === undefined ? '' : engineJson(args);
    if (sent && sent.name === name && got === sent.sent) return run();
    const decided = sent?.engineFields && args && typeof args === 'object' && !Array.isArray(args)
      ? { ...args, ...sent.engineFields }
      : args;
    const context = sent ? sent.context : await contextOf(extra, { method: CALL, params: { name, arguments: args } });
    const decision = gate.evaluate(callJson(name, decided), context);
    options.onDecision?.(decision, { name, extra });
    if (!decision.ok) {
      if (decision.code === 'NOT_FOUND') return unknownToolResult(name);
      return blockedResult(decision, await structured(name, extra));
    }
    return run();
  };

  // McpServer: every path to a tool handler passes executeToolHandler (the
  // zod output in hand) or, for optional-task tools called without a task,
  // handleAutomaticTaskPolling (which validates itself).
  const mcpServer = target !== server && typeof target.executeToolHandler === 'function' ? target : null;
  if (mcpServer) {
    const execute = mcpServer.executeToolHandler;
    mcpServer.executeToolHandler = function (/** @type {any} */ tool, /** @type {any} */ args, /** @type {any} */ extra) {
      return checkHandlerArgs(tool, args, extra, () => execute.call(this, tool, args, extra));
    };
    const polling = mcpServer.handleAutomaticTaskPolling;
    if (typeof polling === 'function') {
      mcpServer.handleAutomaticTaskPolling = async function (/** @type {any} */ tool, /** @type {any} */ request, /** @type {any} */ extra) {
        const args = await this.validateToolInput(tool, request?.params?.arguments, request?.params?.name);
        return checkHandlerArgs(tool, args, extra, () => polling.call(this, tool, request, extra));
      };
    }
  }

  const handlers = server._requestHandlers;
  if (handlers.has(LIST)) handlers.set(LIST, wrapList(handlers.get(LIST)));
  if (handlers.has(CALL)) handlers.set(CALL, wrapCall(handlers.get(CALL)));
  const setRequestHandler = server.setRequestHandler.bind(server);
  server.setRequestHandler = (/** @type {any} */ schema, /** @type {any} */ handler) => {
    setRequestHandler(schema, handler);
    for (const [method, wrap] of /** @type {const} */ ([[LIST, wrapList], [CALL, wrapCall]])) {
      const h = handlers.get(method);
      if (h && !h[kGuarded]) { const w = /** @type {any} */ (wrap(h)); w[kGuarded] = true; handlers.set(method, w); }
    }
  };
  for (const method of [LIST, CALL]) { const h = handlers.get(method); if (h) h[kGuarded] = true; }
  return guarded;
}
