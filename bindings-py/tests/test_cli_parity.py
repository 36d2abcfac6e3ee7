"""Security review, issue 11 (7): the CLIs read --scopes / --allow alike.

The same flags (Unicode whitespace around items, empty items, repeated flags)
go through ``python -m mcp_toolgate``, the Node CLI (bindings-js/bin, when its
component is built) and the Rust CLI (target/release/toolgate, when built);
stdout bytes and exit codes must be identical (stderr wording may differ).
Python's answers are also checked against the Rust rule itself
(``Context::from_flags``: split on ",", ``str::trim`` -- Unicode White_Space --,
empty items dropped; clap refuses a repeated flag with the usage exit 64).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, RUST_CLI
from mcp_toolgate import RuleSet

NODE_CLI = REPO / "bindings-js" / "bin" / "toolgate.mjs"
NODE_BUILT = (REPO / "bindings-js" / "gen" / "toolgate_policy.js").is_file()
NODE = shutil.which("node")

# Unicode's White_Space property (PropList.txt), which Rust's `str::trim` uses.
WHITE_SPACE = [
    *map(chr, range(0x09, 0x0E)),
    " ",
    "\x85",
    "\xa0",
    "\u1680",
    *map(chr, range(0x2000, 0x200B)),
    "\u2028",
    "\u2029",
    "\u202f",
    "\u205f",
    "\u3000",
]

CATALOG = {
    "formatVersion": 1,
    "tools": [
        {"name": n, "description": n, "effect": "read", "scopes": s, "inputSchema": {"type": "object"}}
        for n, s in (("alpha", ["s1"]), ("beta", ["s2"]), ("gamma", []))
    ],
}

WS = "".join(WHITE_SPACE)
ITEMS = [
    "alpha,beta",
    "alpha,,beta",
    ",",
    "",
    " ",
    "\xa0alpha,\u2003beta\u3000",
    "\x85alpha\t,\nbeta\x0b",
    f"{WS}alpha{WS},{WS}",
    "alpha\x1f,beta",  # U+001F: Python's str.strip() trims it, Rust's does not
    "\x1calpha,\x1dbeta\x1e",
    "alpha\u200b",  # zero width space: not White_Space
    "alpha\u180e",  # Mongolian vowel separator: not White_Space
    "alpha\ufeff",  # BOM: not White_Space
    "\u2028beta\u2029",
]
CASES: list[list[str]] = [
    *(["--allow", v] for v in ITEMS),
    *(["--scopes", v] for v in ITEMS),
    *(["--scopes", v.replace("alpha", "s1").replace("beta", "s2")] for v in ITEMS),
    ["--allow=alpha,\u3000beta"],
    ["--scopes=s1\xa0"],
    # Repeated flags: refused (exit 64), never "the last one wins".
    ["--allow", "alpha", "--allow", "beta"],
    ["--allow=alpha", "--allow=alpha"],
    ["--scopes", "s1", "--scopes", "s2"],
    ["--scopes", "", "--scopes", ""],
    ["--surface", "direct", "--surface", "direct"],
    ["--surface", "direct", "--surface", "confirming"],
    ["--policy", "{policy}", "--policy", "{policy}"],
    ["--catalog", "{catalog}"],
    # A separate value that reads as a flag: refused as clap refuses it ("-" alone is a value; `=` says it is one).
    ["--scopes", "-x"],
    ["--scopes", "-1"],
    ["--allow", "--"],
    ["--allow", "--scopes"],
    ["--allow", "-"],
    ["--scopes=-1"],
    ["--allow=--"],
]


def _rust_trim(item: str) -> str:
    start, end = 0, len(item)
    while start < end and item[start] in WHITE_SPACE:
        start += 1
    while end > start and item[end - 1] in WHITE_SPACE:
        end -= 1
    return item[start:end]


def _expected(flags: list[str], rules: RuleSet) -> tuple[int, bytes]:
    """The Rust CLI's rule, written out independently of mcp_toolgate.cli."""
    given: dict[str, str] = {}
    i = 0
    while i < len(flags):
        name, _, value = flags[i].partition("=")
        if not value and "=" not in flags[i]:
            i += 1
            value = flags[i]
            if value.startswith("-") and value != "-":
                return 64, b""
        if name in given:
            return 64, b""
        given[name] = value
        i += 1
    context: dict[str, object] = {"surface": given.get("--surface", "confirming")}
    for flag, key in (("--scopes", "scopes"), ("--allow", "allowed_tools")):
        if flag in given:
            context[key] = [t for t in map(_rust_trim, given[flag].split(",")) if t]
    return 0, rules.list_exposable_json(json.dumps(context)).encode() + b"\n"


def _run(cli: list[str], argv: list[str]) -> tuple[int, bytes]:
    r = subprocess.run([*cli, *argv], capture_output=True, timeout=120)
    return r.returncode, r.stdout


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("cli-parity")
    (d / "catalog.json").write_text(json.dumps(CATALOG), encoding="utf-8")
    (d / "policy.yaml").write_text("version: 1\n", encoding="utf-8")
    return {"catalog": str(d / "catalog.json"), "policy": str(d / "policy.yaml")}


def _argv(case: list[str], files: dict[str, str]) -> list[str]:
    tail = [a.format(**files) for a in case]
    return ["list", *([] if "--catalog" in case else ["--catalog", files["catalog"]]), *tail]


def _others() -> list[tuple[str, list[str]]]:
    out = []
    if NODE and NODE_BUILT:
        out.append(("node", [NODE, str(NODE_CLI)]))
    elif os.environ.get("TOOLGATE_REQUIRE_NODE_CLI") == "1":
        pytest.fail(f"TOOLGATE_REQUIRE_NODE_CLI=1 but node or {NODE_CLI.parent.parent / 'gen'} is missing")
    if RUST_CLI.is_file():
        out.append(("rust", [str(RUST_CLI)]))
    elif os.environ.get("TOOLGATE_REQUIRE_RUST_CLI") == "1":
        pytest.fail(f"TOOLGATE_REQUIRE_RUST_CLI=1 but {RUST_CLI} is not built")
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: ascii(c))
def test_flags_read_as_the_rust_cli_reads_them(case: list[str], files: dict[str, str]) -> None:
    argv = _argv(case, files)
    rules = RuleSet.load(catalog=json.dumps(CATALOG), policy="version: 1\n" if "--policy" in case else None)
    expected = _expected(argv[1:], rules)
    python = _run([sys.executable, "-m", "mcp_toolgate"], argv)
    assert python == expected, argv
    for name, cli in _others():
        assert _run(cli, argv) == python, (name, argv)
    for command_case in (["eval", *argv[1:]],):
        got = subprocess.run(
            [sys.executable, "-m", "mcp_toolgate", *command_case],
            input=b'{"name":"alpha","arguments":{}}\n',
            capture_output=True,
            timeout=120,
        )
        for name, cli in _others():
            other = subprocess.run(
                [*cli, *command_case], input=b'{"name":"alpha","arguments":{}}\n', capture_output=True
            )
            assert (other.returncode, other.stdout) == (got.returncode, got.stdout), (name, command_case)


ALLOWED = '{"name":"alpha","arguments":{}}'
DENIED = '{"name":"nope","arguments":{}}'


@pytest.mark.parametrize(
    ("flags", "stdin", "status", "oks"),
    [
        (["--call", ALLOWED], b"", 0, [True]),
        (["--call", DENIED], b"", 0, [False]),
        (["--call", ALLOWED, "--fail-on-deny"], b"", 0, [True]),
        (["--fail-on-deny", f"--call={DENIED}"], b"", 1, [False]),
        (["--call", ""], ALLOWED.encode() + b"\n", 0, [False]),  # the call given, not stdin
        (["--fail-on-deny"], f"{ALLOWED}\n{DENIED}\n{ALLOWED}\n".encode(), 1, [True, False, True]),
        (["--fail-on-deny"], f"{ALLOWED}\n\n".encode(), 0, [True]),
        (["--fail-on-deny", "--fail-on-deny"], b"", 64, None),
        (["--fail-on-deny=true"], b"", 64, None),
        (["--call", "{}", "--call", "{}"], b"", 64, None),
    ],
    ids=repr,
)
def test_eval_call_and_fail_on_deny_as_the_rust_cli(
    flags: list[str], stdin: bytes, status: int, oks: list[bool] | None, files: dict[str, str]
) -> None:
    argv = ["eval", "--catalog", files["catalog"], *flags]
    python = subprocess.run(
        [sys.executable, "-m", "mcp_toolgate", *argv], input=stdin, capture_output=True, timeout=120
    )
    assert python.returncode == status, python.stderr
    if oks is None:
        assert python.stdout == b""
    else:
        assert [json.loads(line)["ok"] for line in python.stdout.splitlines()] == oks
    for name, cli in _others():
        other = subprocess.run([*cli, *argv], input=stdin, capture_output=True, timeout=120)
        assert (other.returncode, other.stdout) == (python.returncode, python.stdout), name


@pytest.mark.parametrize("flag", ["--call", "--fail-on-deny"])
def test_list_takes_no_eval_flag(flag: str, files: dict[str, str]) -> None:
    argv = ["list", "--catalog", files["catalog"], flag, *(["{}"] if flag == "--call" else [])]
    python = subprocess.run([sys.executable, "-m", "mcp_toolgate", *argv], capture_output=True, timeout=120)
    assert (python.returncode, python.stdout) == (64, b"")
    for name, cli in _others():
        assert subprocess.run([*cli, *argv], capture_output=True, timeout=120).returncode == 64, name


@pytest.mark.parametrize(
    "flags",
    [[b"--call", b'{"name":"alpha\xff","arguments":{}}'], [b"--scopes", b"s1\xff"], [b"--allow=alpha\xfe"]],
    ids=repr,
)
@pytest.mark.parametrize("command", [b"eval", b"list"])
def test_an_argument_that_is_not_utf8_is_a_usage_error_in_every_cli(
    command: bytes, flags: list[bytes], files: dict[str, str]
) -> None:
    # Python would decode it with surrogateescape (a --call decided as
    # BAD_REQUEST, exit 0; a --scopes granted as the escaped text), Node as
    # U+FFFD; Rust's clap refuses it. Every CLI exits 64 and decides nothing.
    if command == b"list" and flags[0] == b"--call":
        flags = [b"--scopes", flags[1]]
    argv = [command, b"--catalog", files["catalog"].encode(), *flags]
    python = subprocess.run([sys.executable, "-m", "mcp_toolgate", *argv], capture_output=True, timeout=120)
    assert (python.returncode, python.stdout) == (64, b""), python.stderr
    assert b"UTF-8" in python.stderr
    for name, cli in _others():
        other = subprocess.run([*cli, *argv], capture_output=True, timeout=120)
        assert (other.returncode, other.stdout) == (64, b""), (name, other.stderr)


@pytest.mark.parametrize(
    ("bad", "at"),
    [
        (b"\xff", "3:3"),
        (b"\xe0\x80\x80", "3:3"),
        (b"\xed\xa0\x80", "3:3"),
        (b"ok\xf0\x9f\x98", "3:5"),
        # A line that starts with a byte-order mark: it is a character (review 27: Node dropped it).
        (b"\n\xef\xbb\xbfok\xff", "4:4"),
    ],
    ids=repr,
)
@pytest.mark.parametrize("which", ["policy", "catalog"])
def test_a_file_that_is_not_utf8_is_a_load_error_at_its_first_bad_byte_in_every_cli(
    which: str, bad: bytes, at: str, files: dict[str, str], tmp_path: Path
) -> None:
    # docs/spec.md §7: a load error with a code and a position; the column
    # counts characters (`é` and the emoji before it are one each).
    path = tmp_path / f"{which}.yaml"
    path.write_bytes(b"version: 1\n# \xc3\xa9\xf0\x9f\x98\x80\nab" + bad + b" tail\n")
    flag = {"policy": ["--policy", str(path), "--catalog", files["catalog"]], "catalog": ["--catalog", str(path)]}
    argv = ["list", *flag[which]]
    want = f"toolgate: {path}:{at}: not valid UTF-8 ({which.upper()}_SYNTAX)\n".encode()
    python = subprocess.run([sys.executable, "-m", "mcp_toolgate", *argv], capture_output=True, timeout=120)
    assert (python.returncode, python.stdout, python.stderr) == (2, b"", want)
    for name, cli in _others():
        other = subprocess.run([*cli, *argv], capture_output=True, timeout=120)
        assert (other.returncode, other.stdout, other.stderr) == (2, b"", want), name
