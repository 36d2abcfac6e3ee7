// Turns vector files into CLI runs: evaluate cases grouped by the context,
// expressed as the CLI's flags (cases whose context or call cannot be said
// on a command line are left to the API tests).
import { hexBytes } from './vector-exec.mjs';

/** @param {any} context */
export function contextFlags(context) {
  const ctx = context ?? {};
  const flags = [];
  for (const key of Object.keys(ctx)) if (!['surface', 'scopes', 'allowed_tools'].includes(key)) return null;
  if (ctx.surface !== undefined) {
    // A `null` (refused by the engine) has no flag either.
    if (ctx.surface !== 'confirming' && ctx.surface !== 'direct') return null;
    flags.push('--surface', ctx.surface);
  }
  for (const [key, flag] of [['scopes', '--scopes'], ['allowed_tools', '--allow']]) {
    const v = ctx[key];
    if (v === undefined || v === null) continue;
    if (!Array.isArray(v) || v.some((s) => typeof s !== 'string' || s === '' || s.includes(',') || s.trim() !== s)) return null;
    flags.push(flag, v.join(','));
  }
  return flags;
}

const isBlank = (/** @type {Uint8Array} */ b) => b.every((x) => x === 0x20 || x === 0x09 || x === 0x0a || x === 0x0c || x === 0x0d);

/** @param {any} c an evaluate case */
export function callLine(c) {
  let bytes;
  if ('call' in c) bytes = new TextEncoder().encode(JSON.stringify(c.call));
  else if ('call_text' in c) bytes = new TextEncoder().encode(c.call_text);
  else bytes = hexBytes(c.call_hex);
  if (bytes.includes(0x0a) || isBlank(bytes) || bytes[bytes.length - 1] === 0x0d) return null;
  return bytes;
}

/**
 * @param {{ policy_path: string | null, catalog_path: string, cases: any[] }} file (texts already on disk)
 * @returns {{ args: string[], stdin: Buffer, expect: string, names: string[] }[]}
 */
export function cliRuns(file) {
  const base = [...(file.policy_path ? ['--policy', file.policy_path] : []), '--catalog', file.catalog_path];
  /** @type {Map<string, { args: string[], lines: Uint8Array[], expect: string, names: string[] }>} */
  const groups = new Map();
  const runs = [];
  for (const c of file.cases) {
    const flags = 'context_text' in c ? null : contextFlags(c.context);
    if (!flags) continue;
    if (c.op === 'list') {
      runs.push({ args: ['list', ...base, ...flags], stdin: Buffer.alloc(0), expect: c.expect + '\n', names: [c.name] });
    } else if (c.op === 'evaluate') {
      const line = callLine(c);
      if (!line) continue;
      const key = JSON.stringify(flags);
      let g = groups.get(key);
      if (!g) groups.set(key, g = { args: ['eval', ...base, ...flags], lines: [], expect: '', names: [] });
      g.lines.push(line);
      g.expect += c.expect + '\n';
      g.names.push(c.name);
    }
  }
  for (const g of groups.values()) {
    const stdin = Buffer.concat(g.lines.flatMap((l) => [Buffer.from(l), Buffer.from('\n')]));
    runs.push({ args: g.args, stdin, expect: g.expect, names: g.names });
  }
  return runs;
}
