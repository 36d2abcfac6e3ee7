#!/usr/bin/env bash
# The packed artifacts, end to end, as a user gets them:
#   bash bindings-py/scripts/test-wheel.sh NATIVE_BINARY     # e.g. target/release/toolgate
#
# 1. Builds the pure wheel (py3-none-any) and the platform wheel
#    (TOOLGATE_NATIVE_BINARY=NATIVE_BINARY: py3-none-manylinux_2_N_<arch>) with
#    `pip wheel` (isolated build: hatchling from PyPI) and checks their tags and
#    contents (the native binary executable, only in the platform wheel).
# 2. In a fresh `mktemp -d` directory and a fresh venv, nothing of the checkout
#    on any path: `pip install <platform wheel>` (+ the mcp SDK client and uv,
#    pinned), then the console script
#      mcp-toolgate proxy --policy p.yaml -- npx -y @modelcontextprotocol/server-filesystem@V DIR
#    driven by the mcp SDK's stdio client: tools/list, a read, and write_file
#    without confirmation refused (CONFIRMATION_REQUIRED) with no file on disk.
# 3. The same through `uvx --from <platform wheel> mcp-toolgate proxy ...`
#    (uv's cache inside the temp dir).
# 4. The pure wheel in its own venv: `import mcp_toolgate` decides a call,
#    `mcp-toolgate eval` works, `mcp-toolgate proxy` says to install the
#    platform wheel (exit 2).
# Needs network: PyPI (hatchling, wasmtime, mcp, uv) and npm (npx). Any failed
# check exits non-zero. TOOLGATE_TEST_WHEEL_KEEP=1 keeps the temp dir.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 NATIVE_BINARY" >&2
  exit 64
fi
NATIVE="$(realpath "$1")"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
PYTHON="${PYTHON:-python3}"
# The filesystem server as toolgate-proxy's e2e tests pin it (package.json).
FS_VERSION="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["dependencies"]["@modelcontextprotocol/server-filesystem"])' "$REPO/toolgate-proxy/tests/e2e/package.json")"
# The client side, pinned: the mcp SDK as requirements-dev.lock pins it, and uv.
MCP_PIN="$(grep -E '^mcp==' "$HERE/requirements-dev.lock" | cut -d' ' -f1)"
UV_PIN="uv==0.13.9"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-wheel.XXXXXX")"
if [ "${TOOLGATE_TEST_WHEEL_KEEP:-}" != "1" ]; then
  trap 'rm -rf "$WORK"' EXIT
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
pass() { echo "  ok: $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# objdump cross-checks the platform wheel's glibc tag (Debian's binutils).
bash "$REPO/scripts/debian-package" objdump binutils

echo "== test-wheel: building the wheels (work dir $WORK)"
"$PYTHON" -m venv "$WORK/build-venv"
"$WORK/build-venv/bin/python" -m pip install -q --upgrade pip
env -u TOOLGATE_NATIVE_BINARY "$WORK/build-venv/bin/python" -m pip wheel -q --no-deps -w "$WORK/pure" "$HERE"
TOOLGATE_NATIVE_BINARY="$NATIVE" "$WORK/build-venv/bin/python" -m pip wheel -q --no-deps -w "$WORK/platform" "$HERE"
PURE="$(ls "$WORK"/pure/mcp_toolgate-*.whl)"
PLATFORM="$(ls "$WORK"/platform/mcp_toolgate-*.whl)"
"$PYTHON" - "$PURE" "$PLATFORM" "$NATIVE" <<'PY'
import re, stat, subprocess, sys, zipfile
pure, platform, native = sys.argv[1:]
def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)
if not pure.endswith("-py3-none-any.whl"):
    fail(f"pure wheel tag: {pure}")
print(f"  ok: pure wheel {pure.rsplit('/', 1)[1]}")
m = re.search(r"-py3-none-manylinux_(\d+)_(\d+)_x86_64\.whl$", platform)
if not m:
    fail(f"platform wheel tag: {platform}")
# The tag's glibc is the newest GLIBC_2.N the binary needs (objdump, independently).
try:
    dump = subprocess.run(["objdump", "-T", native], capture_output=True, text=True, check=True).stdout
    need = max(tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_(\d+\.\d+)", dump))
    if need != (int(m.group(1)), int(m.group(2))):
        fail(f"tag glibc {m.groups()} but the binary needs GLIBC_{need}")
    print(f"  ok: platform wheel {platform.rsplit('/', 1)[1]} (objdump: newest GLIBC_{need[0]}.{need[1]})")
except FileNotFoundError:
    fail("objdump is needed to cross-check the platform wheel's glibc tag (Debian: binutils)")
with zipfile.ZipFile(platform) as z:
    info = z.getinfo("mcp_toolgate/_native/toolgate")
    mode = info.external_attr >> 16
    if not mode & stat.S_IXUSR:
        fail(f"native binary not executable in the wheel: {oct(mode)}")
    if z.read(info) != open(native, "rb").read():
        fail("the wheel's native binary differs from NATIVE_BINARY")
    wheel_meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))).decode()
    if "Root-Is-Purelib: false" not in wheel_meta:
        fail("platform wheel says Root-Is-Purelib: true")
    names = set(z.namelist())
for w in (pure, platform):
    with zipfile.ZipFile(w) as z:
        n = set(z.namelist())
        for need in ("mcp_toolgate/toolgate_policy.wasm", "mcp_toolgate/py.typed"):
            if need not in n:
                fail(f"{need} missing from {w}")
        if not any(x.endswith(".dist-info/licenses/LICENSE") for x in n):
            fail(f"LICENSE missing from {w}")
        eps = z.read(next(x for x in n if x.endswith(".dist-info/entry_points.txt"))).decode()
        if "mcp-toolgate = mcp_toolgate.cli:run" not in eps or "toolgate = mcp_toolgate.cli:run" not in eps:
            fail(f"console scripts missing from {w}: {eps}")
with zipfile.ZipFile(pure) as z:
    if any("_native" in x for x in z.namelist()):
        fail("the pure wheel carries a native binary")
print("  ok: both carry the component, py.typed, LICENSE and the console scripts; only the platform wheel the binary (0755)")
PY

# From here on nothing refers to the checkout: the wheels are copied into the
# temp dir and every command runs there.
mkdir -p "$WORK/run/files"
cp "$PURE" "$PLATFORM" "$WORK/run/"
PURE="$WORK/run/$(basename "$PURE")"
PLATFORM="$WORK/run/$(basename "$PLATFORM")"
cd "$WORK/run"
unset TOOLGATE_BINARY TOOLGATE_COMPONENT PYTHONPATH
export TOOLGATE_CACHE_DIR="$WORK/cache"
printf 'hello from the wheel test\n' >"$WORK/run/files/hello.txt"
cat >"$WORK/run/p.yaml" <<'YAML'
version: 1
tool_policies:
  read_text_file:
    operation_type: read_only
  write_file:
    operation_type: transactional
    require_confirmation: true
YAML

cat >"$WORK/run/client.py" <<'PY'
"""Drives `CMD... proxy --policy p.yaml -- npx ... server-filesystem DIR` with the mcp SDK's stdio client."""
import asyncio, json, os, sys
from pathlib import Path
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

root = Path(sys.argv[1])
command = sys.argv[2:]
failed = []

def check(what, ok, detail=""):
    print(f"  {'ok' if ok else 'FAIL'}: {what}" + ("" if ok else f" -- {detail}"))
    if not ok:
        failed.append(what)

async def main():
    # The whole environment (the SDK passes only HOME, PATH, ... by default): uv's cache dir and settings.
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        names = [t.name for t in (await s.list_tools()).tools]
        check(f"tools/list through the proxy ({len(names)} tools, read_text_file and write_file among them)",
              "read_text_file" in names and "write_file" in names, names)
        r = await s.call_tool("read_text_file", {"path": str(root / "hello.txt")})
        text = r.content[0].text if r.content else ""
        check("read_text_file runs and returns the file", not r.isError and "hello from the wheel test" in text, r)
        target = root / "written.txt"
        w = await s.call_tool("write_file", {"path": str(target), "content": "should not be written\n"})
        try:
            code = json.loads(w.content[0].text)["error"]["code"] if w.isError else None
        except (IndexError, KeyError, ValueError):
            code = "unreadable"
        check("write_file without confirmation is refused (CONFIRMATION_REQUIRED)", w.isError and code == "CONFIRMATION_REQUIRED", w)
        check("the refused write left no file on disk", not target.exists(), target)

asyncio.run(main())
sys.exit(1 if failed else 0)
PY

echo "== test-wheel: platform wheel in a fresh venv ($(basename "$PLATFORM"), $MCP_PIN, $UV_PIN)"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --upgrade pip
"$WORK/venv/bin/python" -m pip install -q "$PLATFORM" "$MCP_PIN" "$UV_PIN"
where="$("$WORK/venv/bin/python" -c 'import mcp_toolgate; print(mcp_toolgate.__file__)')"
case "$where" in "$WORK/venv/"*) pass "mcp_toolgate imported from the venv ($where)";; *) echo "FAIL: imported from $where" >&2; exit 1;; esac
"$WORK/venv/bin/mcp-toolgate" --help | grep -q "proxy" || fail "mcp-toolgate --help is not the native CLI's (no proxy)"
pass "mcp-toolgate --help is the native CLI's (lists proxy)"
"$WORK/venv/bin/toolgate" --help | grep -q "proxy" || fail "toolgate --help lists no proxy"
pass "toolgate --help too"
# The platform wheel's own native code (hatch_build.py): a first start with an
# empty cache loads it and compiles nothing, so the cache stays empty.
"$WORK/venv/bin/python" - "$PLATFORM" "$WORK/platform-cache" <<'PY'
import json, os, sys, zipfile
from importlib import metadata
wheel, cache = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    shipped = [n for n in z.namelist() if n.startswith("mcp_toolgate/_native/") and n.endswith(".cwasm")]
    code = [n for n in shipped if "-wasmtime" in n]
    binary_code = [n for n in shipped if n.startswith("mcp_toolgate/_native/toolgate_policy-")]
    requires = [l for l in z.read(next(n for n in z.namelist() if n.endswith("METADATA"))).decode().splitlines()
                if l.startswith("Requires-Dist: wasmtime")]
assert len(code) == 1 and len(binary_code) == 1 and len(shipped) == 2, shipped
version = metadata.version("wasmtime")
assert f"wasmtime{version}-" in code[0], (code, version)
assert f"Requires-Dist: wasmtime=={version}" in requires, requires
os.environ["TOOLGATE_CACHE_DIR"] = cache
from mcp_toolgate import Context, RuleSet
rules = RuleSet.load(catalog=json.dumps({"tools": [{"name": "r", "annotations": {"readOnlyHint": True}}]}))
assert rules.decide({"name": "r", "arguments": {}}, Context(), "none").ok
left = os.listdir(cache) if os.path.isdir(cache) else []
assert not left, f"the first start compiled into the cache: {left}"
print(f"  ok: the platform wheel carries {code[0].rsplit('/', 1)[1]}, pins wasmtime=={version}; a first start compiles nothing")
# The native binary beside its own code (toolgate precompile): its first start
# with an empty cache loads it too.
import pathlib, subprocess
import mcp_toolgate
native = pathlib.Path(mcp_toolgate.__file__).parent / "_native" / "toolgate"
catalog = pathlib.Path(cache).with_name("binary-catalog.json")
catalog.write_text(json.dumps({"tools": [{"name": "r", "annotations": {"readOnlyHint": True}}]}))
binary_cache = pathlib.Path(cache).with_name("binary-cache")
done = subprocess.run([str(native), "eval", "--catalog", str(catalog), "--call", '{"name":"r","arguments":{}}'],
                      env={**os.environ, "TOOLGATE_CACHE_DIR": str(binary_cache)}, capture_output=True, text=True)
assert done.returncode == 0 and json.loads(done.stdout)["ok"] is True, done
assert not binary_cache.exists(), f"the native binary compiled into {binary_cache}: {os.listdir(binary_cache)}"
print(f"  ok: the wheel's native binary loads {binary_code[0].rsplit('/', 1)[1]} beside it; its first start compiles nothing")
PY
SERVER=(npx -y "@modelcontextprotocol/server-filesystem@$FS_VERSION" "$WORK/run/files")
echo "== test-wheel: mcp-toolgate proxy -- ${SERVER[*]}"
"$WORK/venv/bin/python" client.py "$WORK/run/files" "$WORK/venv/bin/mcp-toolgate" proxy --policy "$WORK/run/p.yaml" -- "${SERVER[@]}"

echo "== test-wheel: uvx --from $(basename "$PLATFORM") mcp-toolgate proxy -- ${SERVER[*]}"
export UV_CACHE_DIR="$WORK/uv-cache" UV_TOOL_DIR="$WORK/uv-tools" UV_PYTHON_DOWNLOADS=never UV_NO_CONFIG=1
# uv reads TLS roots from its own bundle unless told; the platform store is what pip uses here too.
export UV_SYSTEM_CERTS="${UV_SYSTEM_CERTS:-1}"
"$WORK/venv/bin/python" client.py "$WORK/run/files" "$WORK/venv/bin/uvx" --cache-dir "$WORK/uv-cache" --python "$WORK/venv/bin/python" \
  --from "$PLATFORM" mcp-toolgate proxy --policy "$WORK/run/p.yaml" -- "${SERVER[@]}"

echo "== test-wheel: pure wheel in a fresh venv ($(basename "$PURE"))"
"$PYTHON" -m venv "$WORK/pure-venv"
"$WORK/pure-venv/bin/python" -m pip install -q --upgrade pip
"$WORK/pure-venv/bin/python" -m pip install -q "$PURE"
TOOLGATE_CACHE_DIR="$WORK/pure-cache" "$WORK/pure-venv/bin/python" - <<'PY'
import json, sys
import mcp_toolgate
from mcp_toolgate import Context, RuleSet
assert mcp_toolgate.__file__.startswith(sys.prefix), mcp_toolgate.__file__
catalog = json.dumps({"tools": [
    {"name": "read_text_file", "description": "read", "effect": "read", "inputSchema": {"type": "object"}},
    {"name": "write_file", "description": "write", "effect": "write", "inputSchema": {"type": "object"}},
]})
rules = RuleSet.load(catalog=catalog, policy=open("p.yaml").read())
read = rules.decide({"name": "read_text_file", "arguments": {"path": "a"}}, Context(), "none")
write = rules.decide({"name": "write_file", "arguments": {"path": "a", "content": "x"}}, Context(), "none")
assert read.ok and read.forward == {"path": "a"}, read.decision.json
assert not write.ok and write.decision.code == "CONFIRMATION_REQUIRED" and write.blocked_result is not None, write.decision.json
print("  ok: import mcp_toolgate decides: read_text_file allowed, write_file CONFIRMATION_REQUIRED")
import os
cache = os.environ["TOOLGATE_CACHE_DIR"]
assert [n for n in os.listdir(cache) if n.endswith(".cwasm")], "the pure wheel carries no code: it compiles and caches"
print("  ok: the pure wheel compiled the component into the cache")
PY
printf '{"name":"x","inputSchema":{"type":"object"}}' | "$PYTHON" -c 'import sys,json; print(json.dumps({"tools":[json.load(sys.stdin)]}))' >"$WORK/run/catalog.json"
out="$(echo '{"name":"x","arguments":{}}' | "$WORK/pure-venv/bin/mcp-toolgate" eval --catalog "$WORK/run/catalog.json")"
echo "$out" | grep -q '"tool":"x"' || fail "pure wheel: mcp-toolgate eval printed $out"
pass "pure wheel: mcp-toolgate eval decides in Python"
set +e
err="$("$WORK/pure-venv/bin/mcp-toolgate" proxy -- true 2>&1)"
rc=$?
set -e
if [ "$rc" -ne 2 ] || ! grep -q "platform wheel" <<<"$err"; then
  echo "FAIL: pure wheel's mcp-toolgate proxy: exit $rc, said: $err" >&2
  exit 1
fi
pass "pure wheel: mcp-toolgate proxy exits 2 and says to install the platform wheel"
echo "== test-wheel: all checks passed"
