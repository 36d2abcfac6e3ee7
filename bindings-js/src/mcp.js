// MCP middleware for the official TypeScript SDK (@modelcontextprotocol/sdk):
// tools/list shows only the exposable tools, with derived annotations;
// tools/call is decided by the engine's call pipeline (`decide`) before the
// tool's handler runs: the handler gets exactly the arguments the engine
// forwards, a blocked call gets exactly the engine's blocked result. This
// host never adds, removes or reads the confirmation fields itself.
import { createRequire } from 'node:module';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { callJson, sortedJson } from './calljson.js';
import { parseExact } from './results.js';
import { optionsOf } from './inputs.js';
import { Toolgate } from './index.js';

/**
 * The low-level `Server` inside an McpServer → that McpServer, recorded when
 * McpServer installs its tools handlers there (`setToolRequestHandlers`, run
 * by the first `registerTool` / `tool()` or by a `tools` capability given to
 * its constructor). Guarding that `Server` instead of the McpServer would
 * decide on the arguments as sent and let the handlers get the output of
 * their zod schemas undecided, so guardServer refuses it. The wrapper only
 * records the pair; McpServer's own method runs as before.
 * @type {WeakMap<object, object>}
 */
const toolsOwner = new WeakMap();
const OWNED_SERVER = 'this Server belongs to an McpServer (McpServer installed its tools handlers): guard the McpServer itself, guardServer(mcpServer, options), not mcpServer.server, so that the arguments its zod schemas hand the tool handlers are decided too';
/** Set on an McpServer given to guardServer, whose own handler check runs. */
const kMcpGuarded = Symbol.for('toolgate.mcp.mcpGuarded');
/** McpServer prototypes already given the checks below. */
const patchedPrototypes = new WeakSet();
/**
 * Gives one copy of McpServer the owned-Server checks: the pair record and
 * the per-call refusal.
 * @param {any} proto
 */
function watchMcpServerCopy(proto) {
  if (!proto || patchedPrototypes.has(proto)) return;
  patchedPrototypes.add(proto);
  const install = proto.setToolRequestHandlers;
  if (typeof install === 'function') {
    proto.setToolRequestHandlers = function (/** @type {any[]} */ ...args) {
      if (this?.server && typeof this.server === 'object') toolsOwner.set(this.server, this);
      return install.apply(this, args);
    };
  }
  // The pair above is recorded only for McpServers that install their tools
  // handlers after this copy is patched. Every path to a tool handler
  // passes these two methods, looked up on the instance at call time, so an
  // McpServer whose Server was guarded on its own (whenever it was built) runs
  // no handler: the guard decided the arguments as sent, the handler would
  // get its zod output undecided. An McpServer guarded itself has its own
  // checks in front (guardServer) and passes.
  for (const method of ['executeToolHandler', 'handleAutomaticTaskPolling']) {
    const original = proto[method];
    if (typeof original !== 'function') continue;
    proto[method] = function (/** @type {any[]} */ ...args) {
      if (this?.server?.[kGuarded] && !this[kMcpGuarded]) return ownedServerRefusal();
      return original.apply(this, args);
    };
  }
}
watchMcpServerCopy(McpServer.prototype);

/**
 * The SDK ships a CommonJS copy beside its ES modules
 * (`require('@modelcontextprotocol/sdk/server/mcp.js')`), with its own
 * McpServer class that the import above does not reach. An McpServer exists
 * before its `.server` can be given to guardServer, so its module is loaded
 * by then: every CommonJS copy in the module cache (any version, any path)
 * gets the same checks when a low-level Server is guarded. An ES module copy
 * other than the one this package resolves cannot be found this way
 * (documented in the README).
 */
function watchLoadedCommonJsCopies() {
  for (const [path, entry] of Object.entries(requireHere.cache)) {
    if (!COMMONJS_MCP.test(path)) continue;
    watchMcpServerCopy(/** @type {any} */ (entry)?.exports?.McpServer?.prototype);
  }
}
const requireHere = createRequire(import.meta.url);
const COMMONJS_MCP = /[\\/]@modelcontextprotocol[\\/]sdk[\\/]dist[\\/]cjs[\\/]server[\\/]mcp\.js$/;
const ownedServerRefusal = () => ({ content: [{ type: 'text', text: `toolgate: ${OWNED_SERVER}; no tool runs` }], isError: true });

/**
 * @typedef {object} GuardOptions
 * @property {import('./core.js').Toolgate} [gate]
 *   Rules already loaded, with the catalog you give them: tools the server has
 *   that this catalog lacks are hidden. Leave it out with an `McpServer` to have
 *   the catalog derived from the server's registered tools (`policy`).
 * @property {string | null} [policy]
 *   Without `gate` (McpServer only): the policy text (tool_policies.yaml); the
 *   catalog is what the server lists (every enabled tool registered with
 *   `registerTool` or `tool()`, with its JSON Schemas and annotations), so a
 *   tool the policy does not name is classified like any other, never dropped.
 *   Loaded on the first tools/list or tools/call and again after the tools
 *   change (a tool registered, updated, enabled, disabled or removed: whatever
 *   makes McpServer send `notifications/tools/list_changed`). Absent or null:
 *   no policy, the catalog's own fields decide. A policy that does not load
 *   fails closed: tools/list is an error, every call is refused.
 * @property {(info: { gate: import('./core.js').Toolgate | null, catalog: string, error: Error | null }) => void} [onLoad]
 *   Without `gate`: called after each load of the derived catalog (the gate,
 *   or the error that refused it).
 * @property {(extra: any, request: any) => import('./core.js').ContextInput | Promise<import('./core.js').ContextInput>} [context]
 *   The per-request context. Default (`defaultContext`): confirming surface,
 *   scopes from `extra.authInfo` when present; an HTTP request without it is
 *   granted no scope, a stdio or in-memory one gets no scope check.
 * @property {'argument' | 'none'} [confirmation]
 *   How a call that needs confirmation gets it (the engine's confirmation
 *   source). `'none'` (default): the model's confirmation fields never count,
 *   so a write that needs confirmation is always denied here: it can only run
 *   after a person confirmed it through the host (an elicitation, an
 *   approval, a seal: `Toolgate#decide` with `'person'` or a seal), which this
 *   middleware does not do. `'argument'` (opt-in only): the model's literal
 *   `confirmed: true` counts, the seed runtime's path, for a server author who
 *   keeps turn state and trusts the model to set it only after the person said
 *   yes (SPEC §8: the model's word counts only where the host is configured to
 *   trust it; a default is not a configuration). A client that declared form
 *   elicitation (in its handshake or a 2026-07-28 request's `_meta`) can be
 *   asked, so its model's word is never taken: its calls are decided as with
 *   `'none'`.
 * @property {(decision: import('./core.js').Decision, info: { name: string, extra: any }) => void} [onDecision]
 *   Called with every decision (audit). It cannot change the call: what is
 *   enforced (allow or deny, the arguments forwarded, the result answered) is
 *   read from the engine's bytes before it runs, and `decision.toJSON()` is a
 *   fresh copy. A hook that throws stops the call: no handler runs.
 * @property {(name: unknown) => Record<string, unknown>} [unknownTool]
 *   The result for a tool the engine does not let this caller see (NOT_FOUND),
 *   so that it answers exactly as the server answers a tool it does not have.
 *   Default: McpServer's answer (`unknownToolResult`); a low-level Server that
 *   answers unknown tools another way gives its own here.
 */
/**
 * @typedef {object} ToolErrorResult
 * @property {{ type: 'text', text: string }[]} content
 * @property {true} isError
 * @property {Record<string, unknown>} [structuredContent]
 */

/**
 * The catalog an McpServer lists (`{"tools":[…]}`, JSON text): what
 * guardServer derives without a `gate`, and a file `toolgate check --catalog`
 * or `Toolgate.load` can read.
 * @param {any} server an `McpServer` of @modelcontextprotocol/sdk
 * @returns {Promise<string>}
 */
export async function serverCatalog(server) {
  const list = listHandlerOf(server);
  return catalogText(await list({ method: 'tools/list', params: {} }, {}));
}

/** @param {any} result */
function catalogText(result) {
  return JSON.stringify({ tools: Array.isArray(result?.tools) ? result.tools : [] });
}

/**
 * McpServer's own tools/list handler (not the guard's).
 * @param {any} server
 * @returns {(request: any, extra: any) => Promise<any>}
 */
function listHandlerOf(server) {
  if (typeof server?.registerTool !== 'function' || typeof server?.server?.setRequestHandler !== 'function') {
    throw new TypeError('the catalog is derived from an McpServer of @modelcontextprotocol/sdk; for a low-level Server give { gate } loaded with its catalog');
  }
  const s = server.server;
  if (!s._requestHandlers.has('tools/list') && typeof server.setToolRequestHandlers === 'function') server.setToolRequestHandlers();
  const h = s[kBaseList] ?? s._requestHandlers.get('tools/list');
  if (typeof h !== 'function') throw new TypeError('this McpServer has no tools/list handler');
  return h;
}

const kBaseList = Symbol('toolgate.mcp.baseList');
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
 * What the middleware enforces for one outcome, taken from the engine's bytes
 * before any hook sees the decision: allowed only when the engine forwards
 * arguments and its decision says `ok` (the two agree, or `decide` already
 * made it an `ENGINE_TRAP`); then `forward` is a fresh parse of the forwarded
 * arguments. Denied: the engine's blocked result (the decision JSON as text
 * and, unless the tool's catalog entry declares an `outputSchema`, as
 * `structuredContent`), or, with none (`NOT_FOUND`), the SDK's answer for a
 * tool it does not have.
 * @param {string} name
 * @param {import('./core.js').CallOutcome} outcome
 * @param {(name: string) => Record<string, unknown>} [unknownTool]
 * @returns {{ forward: Record<string, unknown>, denied: null } | { forward: null, denied: Record<string, unknown> }}
 */
function enforced(name, outcome, unknownTool = unknownToolResult) {
  if (outcome.forwardJson !== null && outcome.decision.ok) {
    return { forward: parseExact(outcome.forwardJson), denied: null };
  }
  const denied = outcome.blockedResultJson !== null ? JSON.parse(outcome.blockedResultJson) : unknownTool(/** @type {string} */ (name));
  return { forward: null, denied };
}

const isPlainObject = (/** @type {unknown} */ v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Loads one call waits for while the server's tools keep changing under it. */
const MAX_RELOADS = 8;

/** The context sent when a `context` callback returned nothing: JSON the engine refuses (not an object). */
const NO_CONTEXT = '"the context callback returned nothing"';

/** The rules for the server's tools could not be had (a load failed, or the tools never held still). */
class RulesNotLoaded extends Error {
  /** @param {Error} cause */
  constructor(cause) {
    super(cause?.message ?? String(cause), { cause });
  }
}

const GUARD_OPTION_KEYS = ['gate', 'policy', 'onLoad', 'context', 'confirmation', 'onDecision', 'unknownTool', 'structuredContent'];

/** Where an MCP 2026-07-28 request declares its client's capabilities. */
const CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';

/**
 * Whether a client's capabilities declare form elicitation (docs/spec.md §8;
 * the table every host is tested on: tests/vectors/fixtures/form-elicitation.json).
 * `elicitation: {}` means form, as in MCP 2025-06-18; a member that is null
 * is absent; a URL-only client cannot be asked a form; an `elicitation` that
 * is not an object cannot be read, and counts as declared.
 * @param {unknown} capabilities
 */
export const declaresFormElicitation = (capabilities) => {
  if (!isPlainObject(capabilities) || !Object.hasOwn(/** @type {object} */ (capabilities), 'elicitation')) return false;
  const elicitation = /** @type {any} */ (capabilities).elicitation;
  if (elicitation === null || elicitation === undefined) return false;
  if (!isPlainObject(elicitation)) return true;
  const member = (/** @type {string} */ key) => (Object.hasOwn(elicitation, key) ? elicitation[key] : null) ?? null;
  return member('form') !== null || member('url') === null;
};

/**
 * The default per-request context: the confirming surface, and the scopes of
 * the request's auth info when the transport authenticated it. A request that
 * came over HTTP (`extra.requestInfo`) without auth info is granted no scope
 * (a route served without `requireBearerAuth`, by mistake or by design, must
 * not skip the policy's scope checks); one with neither (stdio, in memory: the
 * process that started the server is the caller) gets no scope check.
 * @param {any} extra
 * @returns {{ surface: 'confirming', scopes?: string[] }}
 */
export function defaultContext(extra) {
  const auth = extra?.authInfo;
  if (auth) return { surface: 'confirming', scopes: Array.isArray(auth.scopes) ? auth.scopes : [] };
  return extra?.requestInfo ? { surface: 'confirming', scopes: [] } : { surface: 'confirming' };
}

/**
 * Wraps an MCP server (McpServer or the low-level Server) with a Toolgate.
 *
 * @template T
 * @param {T} guarded an `McpServer` or a `Server` of @modelcontextprotocol/sdk
 * @param {GuardOptions} guardOptions
 * @returns {T}
 */
export function guardServer(guarded, guardOptions) {
  // Read once, never from Object.prototype (an inherited `confirmation:
  // 'argument'` would take every model's word): inputs.js optionsOf.
  const options = /** @type {GuardOptions & { structuredContent?: unknown }} */ (optionsOf(guardOptions, GUARD_OPTION_KEYS));
  const target = /** @type {any} */ (guarded);
  if (target && typeof target === 'object' && toolsOwner.has(target)) {
    throw new TypeError(`guardServer: ${OWNED_SERVER}`);
  }
  const { gate: fixedGate } = options;
  if (fixedGate !== undefined && (!fixedGate || typeof fixedGate.decide !== 'function')) throw new TypeError('guardServer: gate must be a Toolgate');
  if (fixedGate === undefined && typeof target?.registerTool !== 'function') {
    throw new TypeError('guardServer needs { gate: Toolgate } (a low-level Server), or an McpServer to derive the catalog from');
  }
  if (fixedGate !== undefined && options.policy !== undefined) throw new TypeError('guardServer: give either gate or policy, not both');
  const policy = options.policy ?? null;
  if (policy !== null && typeof policy !== 'string') throw new TypeError('guardServer: policy must be the policy text (a string) or null');
  const givenContext = options.context;
  if (givenContext !== undefined && typeof givenContext !== 'function') throw new TypeError('guardServer: context must be a function of (extra, request)');
  // A callback that returns nothing (a forgotten `return`, `authInfo && {…}`)
  // is a host bug, never "no scope check" (that is `{}`): the engine is sent
  // a context it refuses (INVALID_CONTEXT), as inputs.js does for a key left
  // undefined.
  const contextOf = givenContext
    ? async (/** @type {any} */ extra, /** @type {any} */ request) => {
        const context = await givenContext(extra, request);
        // '' too (`token && …`): an empty text is the default context to the engine.
        return context === undefined || context === null || context === '' ? NO_CONTEXT : context;
      }
    : defaultContext;
  const unknownTool = options.unknownTool ?? unknownToolResult;
  if (typeof unknownTool !== 'function') throw new TypeError('guardServer: unknownTool must be a function of the tool name');
  // SPEC §8: the model's own `confirmed: true` counts only where the host is
  // configured to trust it, so `'argument'` must be asked for.
  const confirmation = options.confirmation ?? 'none';
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
  if (server === target) watchLoadedCommonJsCopies();
  // McpServer installs its tools handlers on the first registerTool; install
  // them now so they are wrapped even when tools are registered later.
  if (typeof target.registerTool === 'function' && !server._requestHandlers.has(CALL) && typeof target.setToolRequestHandlers === 'function') {
    target.setToolRequestHandlers();
  }
  if (server._requestHandlers.has(LIST)) server[kBaseList] = server._requestHandlers.get(LIST);

  // Without a gate: the rules are loaded from the policy and the catalog the
  // server lists, again whenever its tools change (McpServer calls
  // sendToolListChanged on every registration, update, enable, disable and
  // removal, connected or not).
  let toolsVersion = 0;
  /** @type {{ version: number, catalog: string, gate: import('./core.js').Toolgate | null, error: Error | null } | null} */
  let loaded = null;
  /** @type {{ version: number, promise: Promise<import('./core.js').Toolgate> } | null} */
  let loading = null;
  if (fixedGate === undefined) {
    const notify = target.sendToolListChanged;
    target.sendToolListChanged = function (/** @type {any[]} */ ...args) {
      toolsVersion++;
      return typeof notify === 'function' ? notify.apply(this, args) : undefined;
    };
  }
  /**
   * The gate loaded for the server's tools at `version` (a load's error as
   * RulesNotLoaded).
   * @param {number} version
   * @returns {Promise<import('./core.js').Toolgate>}
   */
  const gateFor = async (version) => {
    if (fixedGate !== undefined) return fixedGate;
    const use = (/** @type {NonNullable<typeof loaded>} */ l) => {
      if (l.gate) return l.gate;
      throw new RulesNotLoaded(/** @type {Error} */ (l.error));
    };
    if (loaded && loaded.version === version) return use(loaded);
    if (loading && loading.version === version) return loading.promise;
    const promise = (async () => {
      const catalog = catalogText(await listHandlerOf(target)({ method: LIST, params: {} }, {}));
      /** @type {NonNullable<typeof loaded>} */
      let next;
      if (loaded && loaded.catalog === catalog) {
        next = { ...loaded, version };
      } else {
        try {
          next = { version, catalog, gate: await Toolgate.load({ policy, catalog }), error: null };
        } catch (e) {
          next = { version, catalog, gate: null, error: /** @type {Error} */ (e) };
        }
        options.onLoad?.({ gate: next.gate, catalog, error: next.error });
      }
      if (version === toolsVersion) loaded = next;
      return use(next);
    })();
    loading = { version, promise };
    try {
      return await promise;
    } finally {
      if (loading?.promise === promise) loading = null;
    }
  };
  /**
   * `use(gate, version)` with the gate for the server's tools as they are
   * when it runs: called synchronously after checking that no tool changed
   * while the rules loaded, so a call is never decided on rules read from a
   * tool the SDK has since replaced (review 30 F1: a tool updated during the
   * load ran on its old, read-only entry). Loads again while they change;
   * refuses (RulesNotLoaded) after MAX_RELOADS loads in a row.
   * @template R
   * @param {(gate: import('./core.js').Toolgate, version: number) => R} use
   * @returns {Promise<R>}
   */
  const withCurrentGate = async (use) => {
    for (let attempt = 0; attempt < MAX_RELOADS; attempt++) {
      const version = toolsVersion;
      const gate = await gateFor(version);
      if (version === toolsVersion) return use(gate, version);
    }
    throw new RulesNotLoaded(new Error(`the server's tools changed during ${MAX_RELOADS} loads in a row`));
  };
  /** The refusal of every call while the rules do not load (fail closed). @param {unknown} e */
  const notLoaded = (e) => ({
    content: [{ type: 'text', text: `toolgate: the policy did not load, no tool runs: ${/** @type {Error} */ (e)?.message ?? e}` }],
    isError: true,
  });

  /**
   * The confirmation source for one request: `'argument'` only when set up
   * so and the client did not declare form elicitation, in its handshake or
   * in the request's own `_meta` (MCP 2026-07-28). SPEC §8: a client that can
   * be asked gets its person asked, never its model's word taken; this
   * middleware does not ask, so such a call waits for a person confirming
   * through the host (`CONFIRMATION_REQUIRED`).
   * @param {any} extra
   * @returns {'argument' | 'none'}
   */
  const confirmationFor = (extra) => {
    if (confirmation === 'none') return 'none';
    const meta = isPlainObject(extra?._meta) ? extra._meta : undefined;
    const declared = [server.getClientCapabilities?.(), meta?.[CLIENT_CAPABILITIES]];
    return declared.some(declaresFormElicitation) ? 'none' : 'argument';
  };

  /**
   * Decides one call through the engine's pipeline; reports the decision.
   * What is enforced (allow or deny, the arguments to forward, the result to
   * answer with) is read before `onDecision` runs, so the hook sees the
   * decision and can change nothing about the call.
   * @param {import('./core.js').Toolgate} gate
   * @param {string} name (anything else, from a malformed request, is written as it is for the engine to refuse)
   * @param {unknown} args
   * @param {import('./core.js').ContextInput} context
   * @param {any} extra
   */
  const decide = (gate, name, args, context, extra) => {
    // The exact values the handler gets: nothing JSON cannot say is rewritten
    // (calljson.js); Infinity, NaN and the like are refused by the engine.
    const outcome = gate.decide(callJson(name, args), context, confirmationFor(extra));
    const result = enforced(name, outcome, unknownTool);
    options.onDecision?.(outcome.decision, { name, extra });
    return result;
  };

  /** @param {(request: any, extra: any) => Promise<any>} inner */
  const wrapList = (inner) => async (/** @type {any} */ request, /** @type {any} */ extra) => {
    const context = await contextOf(extra, request);
    let exposed;
    try {
      exposed = await withCurrentGate((gate) => gate.listExposable(context));
    } catch (e) {
      if (!(e instanceof RulesNotLoaded)) throw e;
      throw new McpError(ErrorCode.InternalError, `toolgate: the policy did not load: ${e.message}`);
    }
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
   * @type {WeakMap<object, { gate: import('./core.js').Toolgate, version: number, name: string, sent: unknown, forward: Record<string, unknown>, forwarded: string, context: any }>}
   */
  const allowed = new WeakMap();

  /** @param {(request: any, extra: any) => Promise<any>} inner */
  const wrapCall = (inner) => async (/** @type {any} */ request, /** @type {any} */ extra) => {
    const params = request?.params;
    // A name that is not a string is decided too (the engine refuses the
    // call): a handler registered under a looser schema than the SDK's, or
    // the fallback handler, would get it undecided, and `tools[["x"]]` is
    // `tools.x`.
    const name = params?.name;
    // An McpServer that installed its tools handlers on a Server guarded as a
    // low-level one (its first registerTool came after guardServer): its zod
    // output would reach the handlers undecided, so nothing runs.
    if (!mcpServer && toolsOwner.has(server)) return ownedServerRefusal();
    const context = await contextOf(extra, request);
    try {
      return await withCurrentGate((gate, version) => {
        const { forward, denied } = decide(gate, name, params?.arguments, context, extra);
        if (denied) return denied;
        // Allowed: the handler gets exactly the arguments the engine forwards.
        if (extra && typeof extra === 'object') {
          allowed.set(extra, { gate, version, name, sent: params.arguments, forward, forwarded: sortedJson(forward), context });
        }
        return inner({ ...request, params: { ...params, arguments: forward } }, extra);
      });
    } catch (e) {
      if (e instanceof RulesNotLoaded) return notLoaded(e.cause);
      throw e;
    }
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
    // The name the engine decided for this request, whatever became of the
    // registry since (a tool removed while its arguments were validated);
    // without a decision, the tool's own name, and no name refuses.
    const name = sent ? sent.name : Object.entries(mcpServer._registeredTools ?? {}).find(([, t]) => t === tool)?.[0];
    if (typeof name !== 'string') return notRegistered();
    // The decision holds only while the tools are those it was made on: a
    // tool updated since (while zod validated, say) is decided again, on
    // rules loaded from the tools as they are now.
    // The SDK runs the tool object it looked up; after a change, decide
    // again only if that object is still the tool registered under the
    // decided name (one removed and registered anew under it is another
    // tool, whatever the rules now say of the name).
    if (sent !== undefined && sent.version !== toolsVersion && mcpServer._registeredTools?.[name] !== tool) return notRegistered();
    const current = sent !== undefined && sent.version === toolsVersion ? sent : undefined;
    if (current && sortedJson(args ?? {}) === current.forwarded) return run(args);
    const decided = sent ? withTakenOff(sent, args) : args;
    const context = sent ? sent.context : await contextOf(extra, { method: CALL, params: { name, arguments: args } });
    const decideAgain = (/** @type {import('./core.js').Toolgate} */ gate) => {
      const { forward, denied } = decide(gate, name, decided, context, extra);
      if (denied) return denied;
      return run(isPlainObject(args) ? forward : args);
    };
    if (current) return decideAgain(current.gate);
    try {
      return await withCurrentGate(decideAgain);
    } catch (e) {
      if (e instanceof RulesNotLoaded) return notLoaded(e.cause);
      throw e;
    }
  };

  /**
   * `args` with the keys the engine took off the call put back as the call
   * carried them, to be decided again: the engine decides what they mean,
   * as on the first decision.
   * @param {{ sent: unknown, forward: Record<string, unknown> }} sent
   * @param {unknown} args
   */
  const withTakenOff = (sent, args) => {
    if (!isPlainObject(args) || !isPlainObject(sent.sent)) return args;
    const carried = /** @type {Record<string, unknown>} */ (sent.sent);
    const takenOff = Object.keys(carried).filter((k) => !Object.hasOwn(sent.forward, k) && !Object.hasOwn(/** @type {object} */ (args), k));
    if (takenOff.length === 0) return args;
    const decided = { ...(/** @type {object} */ (args)) };
    for (const k of takenOff) /** @type {Record<string, unknown>} */ (decided)[k] = carried[k];
    return decided;
  };

  const notRegistered = () => ({ content: [{ type: 'text', text: 'toolgate: this tool is not registered on the server; it was not run' }], isError: true });

  /**
   * A low-level handler registered (after guardServer) with a request schema
   * of its own gets that schema's output, not the request the engine
   * decided: defaults, coercions and transforms run in between. Its
   * arguments are compared with those the engine forwarded and, when they
   * differ, decided again, as McpServer's are.
   * @param {(request: any, extra: any) => any} handler
   */
  const checkParsed = (handler) => async (/** @type {any} */ parsed, /** @type {any} */ extra) => {
    const sent = extra && typeof extra === 'object' ? allowed.get(extra) : undefined;
    if (!sent || parsed?.method !== CALL) return handler(parsed, extra);
    if (parsed?.params?.name !== sent.name) return notRegistered(); // a schema that renamed the tool
    const args = parsed?.params?.arguments;
    if (sortedJson(args ?? {}) === sent.forwarded) return handler(parsed, extra);
    const { forward, denied } = decide(sent.gate, sent.name, withTakenOff(sent, args), sent.context, extra);
    if (denied) return denied;
    return handler({ ...parsed, params: { ...parsed.params, arguments: isPlainObject(args) ? forward : args } }, extra);
  };

  // McpServer: every path to a tool handler passes executeToolHandler (the
  // zod output in hand) or, for optional-task tools called without a task,
  // handleAutomaticTaskPolling (which validates itself).
  const mcpServer = target !== server && typeof target.executeToolHandler === 'function' ? target : null;
  if (mcpServer) {
    mcpServer[kMcpGuarded] = true;
    const execute = mcpServer.executeToolHandler;
    mcpServer.executeToolHandler = function (/** @type {any} */ tool, /** @type {any} */ args, /** @type {any} */ extra) {
      return checkHandlerArgs(tool, args, extra, (forward) => execute.call(this, tool, forward, extra));
    };
    const polling = mcpServer.handleAutomaticTaskPolling;
    if (typeof polling === 'function') {
      mcpServer.handleAutomaticTaskPolling = async function (/** @type {any} */ tool, /** @type {any} */ request, /** @type {any} */ extra) {
        const args = await this.validateToolInput(tool, request?.params?.arguments, request?.params?.name);
        // The SDK's polling validates the request again and hands createTask
        // that second output, which a stateful schema (a counter, a default
        // from the clock) can make differ from the one checked here: it runs
        // with a `this` whose validateToolInput answers the checked arguments.
        return checkHandlerArgs(tool, args, extra, (forward) => {
          const checked = Object.create(this, { validateToolInput: { value: async () => forward } });
          return polling.call(checked, tool, request, extra);
        });
      };
    }
  }

  const handlers = server._requestHandlers;
  if (handlers.has(LIST)) handlers.set(LIST, wrapList(handlers.get(LIST)));
  if (handlers.has(CALL)) handlers.set(CALL, wrapCall(handlers.get(CALL)));
  const setRequestHandler = server.setRequestHandler.bind(server);
  server.setRequestHandler = (/** @type {any} */ schema, /** @type {any} */ handler) => {
    setRequestHandler(schema, typeof handler === 'function' ? checkParsed(handler) : handler);
    for (const [method, wrap] of /** @type {const} */ ([[LIST, wrapList], [CALL, wrapCall]])) {
      const h = handlers.get(method);
      if (h && !h[kGuarded]) { const w = /** @type {any} */ (wrap(h)); w[kGuarded] = true; handlers.set(method, w); }
    }
  };
  for (const method of [LIST, CALL]) { const h = handlers.get(method); if (h) h[kGuarded] = true; }
  // The SDK hands a request whose method has no handler of its own to
  // `fallbackRequestHandler` (a relay serves every method there): tools/call
  // and tools/list reaching it are decided and filtered like the others,
  // whether it was set before guarding or after.
  /** @type {((request: any, extra: any) => Promise<any>) | undefined} */
  let fallback;
  const guardFallback = (/** @type {any} */ h) => {
    if (typeof h !== 'function') return h;
    const call = wrapCall(h);
    const list = wrapList(h);
    return (/** @type {any} */ request, /** @type {any} */ extra) =>
      request?.method === CALL ? call(request, extra) : request?.method === LIST ? list(request, extra) : h(request, extra);
  };
  fallback = guardFallback(server.fallbackRequestHandler);
  Object.defineProperty(server, 'fallbackRequestHandler', {
    configurable: true,
    enumerable: true,
    get: () => fallback,
    set: (/** @type {any} */ h) => { fallback = guardFallback(h); },
  });
  return guarded;
}
