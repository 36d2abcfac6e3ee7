// MCP middleware for the official TypeScript SDK (@modelcontextprotocol/sdk):
// tools/list shows only the exposable tools, with derived annotations;
// tools/call is decided by the engine's call pipeline (`decide`) before the
// tool's handler runs: the handler gets exactly the arguments the engine
// forwards, a blocked call gets exactly the engine's blocked result. This
// host never adds, removes or reads the confirmation fields itself.
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { callJson, sortedJson } from './calljson.js';

/**
 * @typedef {object} GuardOptions
 * @property {import('./core.js').Toolgate} gate
 * @property {(extra: any, request: any) => import('./core.js').ContextInput | Promise<import('./core.js').ContextInput>} [context]
 *   The per-request context. Default: confirming surface, scopes from `extra.authInfo` when present.
 * @property {'argument' | 'none'} [confirmation]
 *   How a call that needs confirmation gets it (the engine's confirmation
 *   source). `'argument'` (default): the model's literal `confirmed: true`
 *   counts, the seed runtime's path, for a server author who keeps turn state
 *   (the model sets it after the person said yes). `'none'`: the model's
 *   confirmation fields never count, so a write that needs confirmation is
 *   always denied here: it can only run after a person confirmed it through
 *   the host (an elicitation, an approval, a seal: `Toolgate#decide` with
 *   `'person'` or a seal), which this middleware does not do.
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
const CONFIRMATIONS = /** @type {const} */ (['argument', 'none']);

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
 * The tool result for a denied outcome, or null when it is allowed: the
 * engine's blocked result (the decision JSON as text and, unless the tool's
 * catalog entry declares an `outputSchema`, as `structuredContent`), or, with
 * none (`NOT_FOUND`), the SDK's answer for a tool it does not have.
 * @param {string} name
 * @param {import('./core.js').CallOutcome} outcome
 * @returns {Record<string, unknown> | null}
 */
function deniedResult(name, outcome) {
  if (outcome.ok) return null;
  return outcome.blockedResult ?? unknownToolResult(name);
}

const isPlainObject = (/** @type {unknown} */ v) => v !== null && typeof v === 'object' && !Array.isArray(v);

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
  if (!gate || typeof gate.decide !== 'function') throw new TypeError('guardServer needs { gate: Toolgate }');
  const contextOf = options.context ?? defaultContext;
  const confirmation = options.confirmation ?? 'argument';
  if (!CONFIRMATIONS.includes(confirmation)) throw new TypeError("confirmation must be 'argument' or 'none'");
  if ('structuredContent' in options) {
    throw new TypeError('the structuredContent option was removed: the engine leaves structuredContent out of a blocked result for tools whose catalog entry declares an outputSchema');
  }
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

  /**
   * Decides one call through the engine's pipeline; reports the decision.
   * @param {string} name
   * @param {unknown} args
   * @param {import('./core.js').ContextInput} context
   * @param {any} extra
   */
  const decide = (name, args, context, extra) => {
    // The exact values the handler gets: nothing JSON cannot say is rewritten
    // (calljson.js); Infinity, NaN and the like are refused by the engine.
    const outcome = gate.decide(callJson(name, args), context, confirmation);
    options.onDecision?.(outcome.decision, { name, extra });
    return outcome;
  };

  /** @param {(request: any, extra: any) => Promise<any>} inner */
  const wrapList = (inner) => async (/** @type {any} */ request, /** @type {any} */ extra) => {
    const exposed = gate.listExposable(await contextOf(extra, request));
    const result = await inner(request, extra);
    const served = new Map((result?.tools ?? []).map((/** @type {any} */ t) => [t.name, t]));
    const tools = [];
    for (const entry of exposed.tools) {
      const tool = served.get(entry.name);
      if (!tool) continue; // in the catalog, not on this server
      tools.push({ ...tool, annotations: { ...(tool.annotations ?? {}), ...(entry.annotations ?? {}) } });
    }
    return { ...result, tools };
  };

  /**
   * What the engine allowed, per request (keyed by the SDK's per-request
   * `extra`), for McpServer's check of the arguments its zod schemas hand the
   * handler: the name, the arguments as the call carried them, what the
   * engine forwarded (parsed, and as sorted JSON to compare), and the context
   * it decided in.
   * @type {WeakMap<object, { name: string, sent: unknown, forward: Record<string, unknown>, forwarded: string, context: any }>}
   */
  const allowed = new WeakMap();

  /** @param {(request: any, extra: any) => Promise<any>} inner */
  const wrapCall = (inner) => async (/** @type {any} */ request, /** @type {any} */ extra) => {
    const params = request?.params;
    const name = params?.name;
    if (typeof name !== 'string') return inner(request, extra); // the SDK rejects the malformed request
    const context = await contextOf(extra, request);
    const outcome = decide(name, params.arguments, context, extra);
    const denied = deniedResult(name, outcome);
    if (denied) return denied;
    // Allowed: the handler gets exactly the arguments the engine forwards.
    const forward = /** @type {Record<string, unknown>} */ (outcome.forward);
    if (mcpServer && extra && typeof extra === 'object') {
      allowed.set(extra, { name, sent: params.arguments, forward, forwarded: sortedJson(forward), context });
    }
    return inner({ ...request, params: { ...params, arguments: forward } }, extra);
  };

  /**
   * McpServer hands its tool handlers the output of their zod input schemas,
   * not the arguments forwarded: defaults, coercions, transforms and stripped
   * keys change them. The handler must run only on what the engine allowed,
   * so the arguments it is about to get are compared with those the engine
   * forwarded; when they differ the call is decided again on them (with the
   * keys the engine took off the call as the call carried them: the engine
   * decides what they mean, as on the first decision), and a deny is the
   * tool's result instead of the handler's; an allow runs the handler on
   * what the engine forwards this time.
   * @param {any} tool
   * @param {unknown} args
   * @param {any} extra
   * @param {(forward: unknown) => Promise<any>} run
   */
  const checkHandlerArgs = async (tool, args, extra, run) => {
    const sent = extra && typeof extra === 'object' ? allowed.get(extra) : undefined;
    const name = sent && mcpServer._registeredTools?.[sent.name] === tool
      ? sent.name
      : Object.entries(mcpServer._registeredTools ?? {}).find(([, t]) => t === tool)?.[0];
    if (typeof name !== 'string') return run(args); // not a registered tool: the SDK answers
    if (sent && sent.name === name && sortedJson(args ?? {}) === sent.forwarded) return run(args);
    let decided = args;
    if (sent && sent.name === name && isPlainObject(args) && isPlainObject(sent.sent)) {
      const carried = /** @type {Record<string, unknown>} */ (sent.sent);
      const takenOff = Object.keys(carried).filter((k) => !Object.hasOwn(sent.forward, k) && !Object.hasOwn(/** @type {object} */ (args), k));
      if (takenOff.length > 0) {
        decided = { ...(/** @type {object} */ (args)) };
        for (const k of takenOff) /** @type {Record<string, unknown>} */ (decided)[k] = carried[k];
      }
    }
    const context = sent ? sent.context : await contextOf(extra, { method: CALL, params: { name, arguments: args } });
    const outcome = decide(name, decided, context, extra);
    const denied = deniedResult(name, outcome);
    if (denied) return denied;
    return run(isPlainObject(args) ? outcome.forward : args);
  };

  // McpServer: every path to a tool handler passes executeToolHandler (the
  // zod output in hand) or, for optional-task tools called without a task,
  // handleAutomaticTaskPolling (which validates itself).
  const mcpServer = target !== server && typeof target.executeToolHandler === 'function' ? target : null;
  if (mcpServer) {
    const execute = mcpServer.executeToolHandler;
    mcpServer.executeToolHandler = function (/** @type {any} */ tool, /** @type {any} */ args, /** @type {any} */ extra) {
      return checkHandlerArgs(tool, args, extra, (forward) => execute.call(this, tool, forward, extra));
    };
    const polling = mcpServer.handleAutomaticTaskPolling;
    if (typeof polling === 'function') {
      mcpServer.handleAutomaticTaskPolling = async function (/** @type {any} */ tool, /** @type {any} */ request, /** @type {any} */ extra) {
        const args = await this.validateToolInput(tool, request?.params?.arguments, request?.params?.name);
        // The polling path validates the request again itself (it cannot be handed other arguments).
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
