#!/usr/bin/env bash
# The published artifacts, as a user gets them: packs `toolgate` and its
# platform package `@toolgate/linux-x64` (with the native binary given),
# installs both tarballs into an empty temporary project (nothing refers to
# this checkout afterwards), then drives
#   npx toolgate proxy --policy p.yaml -- npx -y @modelcontextprotocol/server-filesystem@VERSION DIR
# with the MCP SDK's real Client over stdio: tools/list is the policy's,
# a read runs, write_file without a person's confirmation is refused
# (CONFIRMATION_REQUIRED) and nothing is written, an unknown tool is refused,
# closing the client stops every process; `npx toolgate eval` and `list` run
# in JS from the installed package, byte-identical to the native binary.
#
#   bash scripts/test-packed.sh /path/to/toolgate      (default: ../target/release/toolgate)
#
# Needs the npm registry (the SDK and the filesystem server are installed from
# it, at the versions toolgate-proxy/tests/e2e pins). Exits non-zero on the
# first failed check.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BINARY="$(realpath "${1:-$HERE/../target/release/toolgate}")"
SDK_VERSION=1.32.2
FS_VERSION=2026.8.31
[[ -x "$BINARY" ]] || { echo "test-packed: $BINARY is not an executable (build it: cargo build --release)" >&2; exit 1; }
unset TOOLGATE_BINARY   # the installed platform package must be what runs

WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-packed-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== pack toolgate (prepack builds gen/ when missing) and @toolgate/linux-x64 ($BINARY)"
MAIN_TGZ="$WORK/$(cd "$HERE" && npm pack --silent --pack-destination "$WORK" | tail -n1)"
PLAT_TGZ="$(node "$HERE/scripts/platform-package.mjs" --platform linux-x64 --binary "$BINARY" --pack "$WORK")"
[[ -f "$MAIN_TGZ" && -f "$PLAT_TGZ" ]] || fail "tarballs missing: $MAIN_TGZ $PLAT_TGZ"
MAIN_FILES="$(tar tzf "$MAIN_TGZ")"   # (grep -q on a pipe would SIGPIPE tar under pipefail)
for f in package/gen/toolgate_policy.js package/gen/toolgate_policy.core.wasm package/bin/toolgate.mjs package/bin/native.mjs; do
  grep -qx "$f" <<<"$MAIN_FILES" || fail "$f is not in $(basename "$MAIN_TGZ")"
done
ok "$(basename "$MAIN_TGZ") carries the engine (gen/toolgate_policy.js, gen/toolgate_policy.core.wasm) and the bin"
PLAT_FILES="$(tar tvzf "$PLAT_TGZ")"
grep -E ' package/bin/toolgate$' <<<"$PLAT_FILES" | grep -q '^-rwx' || fail "bin/toolgate is not executable in $(basename "$PLAT_TGZ")"
ok "$(basename "$PLAT_TGZ") carries bin/toolgate, executable"
grep -qE ' package/bin/toolgate_policy-[^ ]+\.cwasm$' <<<"$PLAT_FILES" || fail "$(basename "$PLAT_TGZ") carries no native code beside bin/toolgate"
ok "$(basename "$PLAT_TGZ") carries the engine's native code beside it (bin/toolgate_policy-*.cwasm)"

APP="$WORK/app"
mkdir -p "$APP/root"
cd "$APP"
echo "== install both tarballs into an empty project ($APP)"
npm init -y >/dev/null
npm install --no-audit --no-fund --loglevel=error "$MAIN_TGZ" "$PLAT_TGZ" \
  "@modelcontextprotocol/sdk@$SDK_VERSION" "@modelcontextprotocol/server-filesystem@$FS_VERSION"
rm -f "$MAIN_TGZ" "$PLAT_TGZ"   # nothing from the packing is left to lean on
[[ -x node_modules/@toolgate/linux-x64/bin/toolgate ]] || fail "node_modules/@toolgate/linux-x64/bin/toolgate is not installed"
ok "installed: toolgate $(node -p 'require("toolgate/package.json").version'), @toolgate/linux-x64 $(node -p 'require("@toolgate/linux-x64/package.json").version')"

version="$(npx --no-install toolgate --version)"
[[ "$version" == "toolgate $(node -p 'require("toolgate/package.json").version')" ]] || fail "npx toolgate --version said $version"
ok "npx toolgate --version (native): $version"

echo "== npx toolgate eval / list (JS, from the installed package)"
cat > catalog.json <<'EOF'
{"tools": [
  {"name": "read_note", "description": "Reads a note", "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}, "annotations": {"readOnlyHint": true}},
  {"name": "delete_note", "description": "Deletes a note", "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}, "annotations": {"readOnlyHint": false, "destructiveHint": true}}
]}
EOF
printf '%s\n' '{"name":"read_note","arguments":{"id":"n1"}}' '{"name":"delete_note","arguments":{"id":"n1"}}' '{"name":"nope","arguments":{}}' > calls.jsonl
npx --no-install toolgate eval --catalog catalog.json < calls.jsonl > eval.js.out
TOOLGATE_CACHE_DIR="$WORK/empty-cache" node_modules/@toolgate/linux-x64/bin/toolgate eval --catalog catalog.json < calls.jsonl > eval.native.out
[[ ! -e "$WORK/empty-cache" ]] || fail "the installed native binary compiled the component instead of loading the code shipped beside it"
ok "the installed native binary's first start loads the shipped code (its empty cache stays empty)"
cmp eval.js.out eval.native.out || fail "npx toolgate eval differs from the native binary"
node -e '
const lines = require("fs").readFileSync("eval.js.out", "utf8").trim().split("\n").map((l) => JSON.parse(l));
const codes = lines.map((d) => d.ok ? "ALLOWED" : d.error.code);
if (JSON.stringify(codes) !== JSON.stringify(["ALLOWED", "CONFIRMATION_REQUIRED", "NOT_FOUND"])) { console.error("codes:", codes); process.exit(1); }
' || fail "npx toolgate eval: unexpected decisions: $(cat eval.js.out)"
ok "npx toolgate eval: read allowed, delete CONFIRMATION_REQUIRED, unknown NOT_FOUND; byte-identical to the native binary"
npx --no-install toolgate list --catalog catalog.json --surface direct > list.js.out
node_modules/@toolgate/linux-x64/bin/toolgate list --catalog catalog.json --surface direct > list.native.out
cmp list.js.out list.native.out || fail "npx toolgate list differs from the native binary"
grep -q '"read_note"' list.js.out && ! grep -q '"delete_note"' list.js.out || fail "list --surface direct: $(cat list.js.out)"
ok "npx toolgate list --surface direct: only read_note; byte-identical to the native binary"

echo "== npx toolgate proxy in front of @modelcontextprotocol/server-filesystem@$FS_VERSION, driven by the SDK's Client"
printf 'hello from the packed test\n' > root/hello.txt
cat > p.yaml <<'EOF'
version: 1
trust_catalog_hints: true
tool_policies:
  write_file:
    require_confirmation: true
  move_file:
    hold: not needed by this test
EOF
cat > drive.mjs <<'EOF'
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [policy, root, fsVersion] = process.argv.slice(2);
const fail = (msg, detail) => { console.error(`FAIL: ${msg}${detail === undefined ? '' : `\n  ${JSON.stringify(detail)}`}`); process.exit(1); };
const ok = (msg) => console.log(`ok: ${msg}`);
const codeOf = (r) => { try { return JSON.parse(r.content[0].text).error.code; } catch { return null; } };

const command = ['npx', 'toolgate', 'proxy', '--policy', policy, '--', 'npx', '-y', `@modelcontextprotocol/server-filesystem@${fsVersion}`, root];
const transport = new StdioClientTransport({ command: command[0], args: command.slice(1), env: process.env, stderr: 'inherit' });
// No elicitation capability: the gateway cannot ask a person, so a write that needs one is refused.
const client = new Client({ name: 'toolgate-packed-test', version: '1.0.0' }, { capabilities: {} });
await client.connect(transport);
ok(`connected: ${command.join(' ')}`);

const { tools } = await client.listTools();
const names = tools.map((t) => t.name);
for (const want of ['read_text_file', 'write_file', 'list_directory']) if (!names.includes(want)) fail(`tools/list lacks ${want}`, names);
if (names.includes('move_file')) fail('tools/list shows move_file, which the policy holds back', names);
if (tools.find((t) => t.name === 'read_text_file').annotations?.readOnlyHint !== true) fail('read_text_file is not annotated read-only', tools.find((t) => t.name === 'read_text_file'));
if (tools.find((t) => t.name === 'write_file').annotations?.readOnlyHint !== false) fail('write_file is not annotated as a write', tools.find((t) => t.name === 'write_file'));
ok(`tools/list: ${names.length} tools, read_text_file and write_file listed, move_file (held) not`);

const read = await client.callTool({ name: 'read_text_file', arguments: { path: join(root, 'hello.txt') } });
if (read.isError || !JSON.stringify(read.content).includes('hello from the packed test')) fail('read_text_file did not read the file', read);
ok('read_text_file ran and returned the file');

const target = join(root, 'written.txt');
for (const [label, args] of [['without confirmation', { path: target, content: 'no\n' }],
                             ["with the model's own confirmed: true", { path: target, content: 'no\n', confirmed: true }]]) {
  const w = await client.callTool({ name: 'write_file', arguments: args });
  if (w.isError !== true || codeOf(w) !== 'CONFIRMATION_REQUIRED') fail(`write_file ${label} was not refused with CONFIRMATION_REQUIRED`, w);
  if (existsSync(target)) fail(`write_file ${label}: ${target} exists on disk`);
  ok(`write_file ${label}: refused (isError, CONFIRMATION_REQUIRED), nothing on disk`);
}

let unknown;
try { unknown = await client.callTool({ name: 'no_such_tool', arguments: {} }); } catch (e) { unknown = { thrown: String(e) }; }
if (!(unknown.thrown || unknown.isError === true)) fail('an unknown tool was not refused', unknown);
ok(`unknown tool refused: ${JSON.stringify(unknown).slice(0, 120)}`);
const held = await client.callTool({ name: 'move_file', arguments: { source: join(root, 'hello.txt'), destination: join(root, 'moved.txt') } }).catch((e) => ({ thrown: String(e) }));
if (!(held.thrown || held.isError === true) || !existsSync(join(root, 'hello.txt'))) fail('the held move_file ran', held);
ok('held tool (move_file) refused like an unknown one, the file not moved');

await client.close();
// Closing the client stops the whole chain: npx, the toolgate bin, the native gateway, the server.
const deadline = Date.now() + 10_000;
const alive = () => readdirSync('/proc').filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid).filter((p) => {
  try { return readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').includes(resolve(root)); } catch { return false; }
});
while (alive().length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
if (alive().length) fail('processes left running after the client closed', alive().map((p) => readFileSync(`/proc/${p}/cmdline`, 'utf8').replaceAll('\0', ' ')));
ok('client closed: no process of the chain left running');
EOF
node drive.mjs "$APP/p.yaml" "$APP/root" "$FS_VERSION"
[[ ! -e root/written.txt ]] || fail "root/written.txt exists"

echo "== a missing platform package is named, exit 2"
mv node_modules/@toolgate/linux-x64 "$WORK/moved-away"
set +e
npx --no-install toolgate proxy --policy p.yaml -- true 2> missing.err
status=$?
set -e
mv "$WORK/moved-away" node_modules/@toolgate/linux-x64
[[ $status == 2 ]] && grep -q '@toolgate/linux-x64' missing.err && grep -q 'linux-x64' missing.err \
  || fail "without the platform package: exit $status, $(cat missing.err)"
ok "without @toolgate/linux-x64: exit 2, $(cut -c1-110 missing.err)…"

echo "test-packed: every check passed"
