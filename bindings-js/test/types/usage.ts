// Compiled by `npm run lint` (tsc --noEmit): the published types, as a user sees them.
import { Toolgate, Decision, CallOutcome, LoadError, ProblemError, ToolgateError, ComponentError, HOST_FAULTS, MAX_INPUT_BYTES, StateKeys, InvalidStateError, StateKeyError, type Context, type Confirmation } from 'toolgate';
import { guardServer, serverCatalog } from 'toolgate/mcp';
import { Toolgate as CoreToolgate } from 'toolgate/core';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';

export async function usage(catalog: string, policy?: string): Promise<string> {
  const gate = await Toolgate.load({ catalog, policy });
  const ctx: Context = { surface: 'direct', scopes: ['mcp:read'], allowedTools: null };
  const d: Decision = gate.evaluate({ name: 'wa_health', arguments: {} }, ctx);
  const code: string | null = d.code;
  const ok: boolean = d.ok && d.metadata.blocked_by_policy === false;
  const names: string[] = gate.listExposable('{"surface":"confirming"}').names;
  const state = gate.turn(null, { calls: [] });
  const confirmation: Confirmation = { seal: { payload: '{}', caller: 'u', nowMs: 1n } };
  const outcome: CallOutcome = gate.decide({ name: 'wa_send_text', arguments: {} }, ctx, confirmation);
  const forward: Record<string, unknown> | null = outcome.forward;
  const forwardJson: string | null = outcome.forwardJson;
  const blocked: Record<string, unknown> | null = outcome.blockedResult;
  const digest: string | null = outcome.digest;
  const byDefault: Decision = gate.decide('{}').decision;
  let payload = '';
  try {
    payload = gate.sealPayload({ name: 'wa_send_text', arguments: {} }, 'u', 'AAAAAAAAAAAAAAAAAAAAAA', Date.now() + 60_000);
  } catch (e) {
    if (e instanceof ProblemError) payload = e.code;
  }
  const keys = new StateKeys([process.env.TOOLGATE_STATE_SECRET ?? '', new Uint8Array(32)]);
  const fingerprint: string = keys.fingerprint;
  let opened: string | 'invalid' = 'invalid';
  try {
    opened = keys.open(keys.seal(payload));
  } catch (e) {
    if (e instanceof InvalidStateError) opened = `${e.code} ${e.reason satisfies 'malformed' | 'unknown-key' | 'forged'}`;
    if (e instanceof StateKeyError) opened = `${e.code} ${e.reason} ${e.index}`;
  }
  void StateKeys.fromText('a\nb'); void fingerprint; void opened;
  const severity: string = gate.findings[0]?.severity ?? 'none';
  try {
    await Toolgate.load({ catalog: '{' });
  } catch (e) {
    if (e instanceof LoadError) return `${e.code} ${e.line}:${e.column} ${e.origin}`;
    if (e instanceof ComponentError) return e.code satisfies 'COMPONENT_INVALID';
    if (e instanceof ToolgateError) return e.code;
  }
  const server = guardServer(new McpServer({ name: 'x', version: '1' }), { gate, confirmation: 'none', context: (extra) => ({ scopes: extra.authInfo?.scopes ?? null }) });
  // Without a gate: the catalog is derived from the McpServer's registered tools.
  const derived = guardServer(new McpServer({ name: 'y', version: '1' }), {
    policy: 'version: 1\n',
    onLoad: ({ gate: loaded, catalog, error }) => { void (loaded?.revision satisfies string | undefined); void (catalog satisfies string); void error?.message; },
  });
  const catalogText: string = await serverCatalog(derived);
  void catalogText;
  void server; void CoreToolgate; void HOST_FAULTS.ENGINE_TRAP; void (MAX_INPUT_BYTES satisfies number);
  return `${code} ${ok} ${names.length} ${state.json} ${d.json} ${JSON.stringify([forward, forwardJson, blocked, digest, byDefault.json, payload, severity])}`;
}
