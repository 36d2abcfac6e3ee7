"""``mcp-toolgate`` / ``toolgate`` / ``python -m mcp_toolgate``: the CLI.

``eval`` and ``list`` run here, in Python, byte for byte the Rust ``toolgate``
(:func:`main`). Every other command (``proxy``, ``init``, ``pin``, ``check``,
``test``, ``--help``, ...) is the native ``toolgate`` binary a platform wheel
carries as ``mcp_toolgate/_native/toolgate`` (:func:`run`): ``TOOLGATE_BINARY``
names another binary (development); the pure wheel has none and says so
(exit 2).

    toolgate eval [--policy FILE] --catalog FILE [--surface confirming|direct]
                  [--scopes a,b] [--allow t1,t2] [--prepared DIR]
                  [--call JSON] [--fail-on-deny]   < calls.jsonl
    toolgate list (the same flags but --call and --fail-on-deny)

``--prepared DIR``: the engine ``toolgate prepare`` wrote to DIR (the same
decisions, ready at once for the texts it was prepared with).

``eval`` reads one call per line (raw bytes; blank lines skipped), or the one
``--call``, and prints one decision per line. ``list`` prints the ``tools/list``
result. Exit codes (the Rust CLI's table): 0 done, 1 ``--fail-on-deny`` saw a
denial, 2 a file could not be read or the rules could not be loaded, 64 usage.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NoReturn

from ._calljson import engine_json
from ._rules import EngineFault, LoadError, RuleSet
from ._types import Decision

# The Rust CLI's table: 2 when an input cannot be read or loaded (or the
# engine fails), 64 for usage errors.
EXIT_DENIED = 1
EXIT_LOAD = 2
EXIT_USAGE = 64
_BLANK = b" \t\n\r\x0c"
# What Rust's `str::trim` trims (`char::is_whitespace`: Unicode White_Space),
# as the Rust CLI trims each --scopes / --allow item. Python's own `str.strip()`
# differs: it also trims U+001C..U+001F (and follows the Python version's
# Unicode tables).
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)


_NOT_UTF8 = re.compile("[\ud800-\udfff]")


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: error: {message}")


def _split(value: str) -> list[str]:
    """Rust's `Context::from_flags`: split on ",", trim, drop empty items."""
    return [trimmed for item in value.split(",") if (trimmed := item.strip(RUST_WHITESPACE))]


_FLAGS = ("--policy", "--catalog", "--surface", "--scopes", "--allow", "--prepared")
# eval's own: a value flag and a switch (clap's `SetTrue`: no value, once).
_EVAL_FLAGS = ("--call",)
_EVAL_SWITCHES = ("--fail-on-deny",)


@dataclass
class _Args:
    command: str
    catalog: str
    policy: str | None = None
    surface: str = "confirming"
    scopes: str | None = None
    allow: str | None = None
    prepared: str | None = None
    call: str | None = None
    fail_on_deny: bool = False


def _read_args(argv: list[str]) -> _Args:
    """The flags as clap reads them for the Rust CLI (and bin/toolgate.mjs):
    ``--flag VALUE`` or ``--flag=VALUE``; a separate VALUE that reads as a flag
    (starts with "-", "-" alone excepted) is missing; a flag given twice, an
    unknown argument, a missing --catalog or a bad --surface is a usage error.
    (argparse differs: it takes "-1" as a value, drops a "--" value, lets the
    last repeat win.)"""
    # Python decodes a command line that is not UTF-8 with surrogateescape: the
    # bytes survive as lone surrogates. Refused as the Rust CLI refuses such
    # argv (and bin/toolgate.mjs its U+FFFD), so every CLI exits 64 alike; a
    # call with such bytes goes on stdin.
    if any(_NOT_UTF8.search(arg) for arg in argv):
        raise _UsageError(
            "toolgate: error: invalid UTF-8 was detected in one or more arguments; pass such a call on stdin"
        )
    if not argv or argv[0] not in ("eval", "list"):
        raise _UsageError(
            "toolgate: error: missing command" if not argv else f"toolgate: error: unknown command {argv[0]!r}"
        )
    flags = _FLAGS + (_EVAL_FLAGS if argv[0] == "eval" else ())
    switches = _EVAL_SWITCHES if argv[0] == "eval" else ()
    given: dict[str, str] = {}
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in switches:
            if arg in given:
                raise _UsageError(f"toolgate: error: the argument '{arg}' cannot be used multiple times")
            given[arg] = ""
            i += 1
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name not in flags:
            raise _UsageError(f"toolgate: error: unexpected argument {arg!r}")
        if not eq:
            if i + 1 >= len(argv) or (argv[i + 1].startswith("-") and argv[i + 1] != "-"):
                raise _UsageError(f"toolgate: error: a value is required for '{name}' (write {name}=VALUE)")
            i += 1
            value = argv[i]
        if name in given:
            raise _UsageError(f"toolgate: error: the argument '{name}' cannot be used multiple times")
        given[name] = value
        i += 1
    if "--catalog" not in given:
        raise _UsageError("toolgate: error: the following arguments are required: --catalog")
    surface = given.get("--surface", "confirming")
    if surface not in ("confirming", "direct"):
        raise _UsageError(f"toolgate: error: --surface must be confirming or direct, not {surface!r}")
    return _Args(
        command=argv[0],
        catalog=given["--catalog"],
        policy=given.get("--policy"),
        surface=surface,
        scopes=given.get("--scopes"),
        allow=given.get("--allow"),
        prepared=given.get("--prepared"),
        call=given.get("--call"),
        fail_on_deny="--fail-on-deny" in given,
    )


def _parser() -> _Parser:
    parser = _Parser(prog="toolgate", description="toolgate's policy engine (Python host)", allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, help_text in (
        ("eval", "decide calls read as JSON lines on stdin, one decision per line"),
        ("list", "print the tools/list result this context may see"),
    ):
        cmd = sub.add_parser(name, help=help_text, allow_abbrev=False)
        cmd.add_argument("--policy", metavar="FILE", help="tool_policies.yaml (absent: legacy behaviour)")
        cmd.add_argument("--catalog", metavar="FILE", required=True, help="the tool catalog")
        cmd.add_argument("--surface", choices=("confirming", "direct"), default="confirming")
        cmd.add_argument("--scopes", metavar="A,B", help="granted scopes (absent: no scope check)")
        cmd.add_argument("--allow", metavar="T1,T2", help="the route's allowlist (absent: all)")
        cmd.add_argument("--prepared", metavar="DIR", help="the engine `toolgate prepare` wrote to DIR")
        if name == "eval":
            cmd.add_argument("--call", metavar="JSON", help="one call instead of JSON lines on stdin")
            cmd.add_argument("--fail-on-deny", action="store_true", help="exit 1 when any decision denies")
    return parser


def _read(path: str, origin: str, stderr: IO[str]) -> str | None:
    """The file's text, or None after printing the Rust CLI's message."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        reason = f"{e.strerror} (os error {e.errno})" if e.errno else str(e)
        stderr.write(f"toolgate: cannot read {path}: {reason}\n")
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        # Refused where the bad bytes start, as a load error of `origin`
        # (docs/spec.md §7: a code and a position), as the other CLIs say it.
        before = data[: e.start]
        line_start = before.rfind(b"\n") + 1
        line = 1 + before.count(b"\n")
        column = 1 + len(before[line_start:].decode("utf-8"))
        stderr.write(f"toolgate: {path}:{line}:{column}: not valid UTF-8 ({origin}_SYNTAX)\n")
        return None


def main(
    argv: list[str] | None = None,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    stdin = stdin if stdin is not None else sys.stdin.buffer
    stdout = stdout if stdout is not None else sys.stdout.buffer
    stderr = stderr if stderr is not None else sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv) or argv[:1] == ["help"]:
        try:  # argparse writes the help
            _parser().parse_args(argv if argv[:1] != ["help"] else ["--help"])
        except _UsageError:
            pass
        except SystemExit as e:
            return int(e.code or 0)
    try:
        args = _read_args(argv)
    except _UsageError as e:
        _parser().print_usage(stderr)
        stderr.write(f"{e}\n")
        return EXIT_USAGE

    context: dict[str, object] = {"surface": args.surface}
    if args.scopes is not None:
        context["scopes"] = _split(args.scopes)
    if args.allow is not None:
        context["allowed_tools"] = _split(args.allow)
    context_text = engine_json(context)

    policy = None
    if args.policy is not None:
        policy = _read(args.policy, "POLICY", stderr)
        if policy is None:
            return EXIT_LOAD
    catalog = _read(args.catalog, "CATALOG", stderr)
    if catalog is None:
        return EXIT_LOAD
    try:
        rules = RuleSet.load(catalog=catalog, policy=policy, prepared=args.prepared)
    except LoadError as e:
        problem = e.problem
        where = problem.location(args.policy or args.catalog, args.catalog)
        path = f"{problem.path}: " if problem.path else ""
        stderr.write(f"toolgate: {where}: {path}{problem.message} ({problem.code})\n")
        return EXIT_LOAD
    except EngineFault as e:
        stderr.write(f"toolgate: {e.message} ({e.code})\n")
        return EXIT_LOAD

    if args.command == "list":
        try:
            out = rules.list_exposable_json(context_text)
        except (LoadError, EngineFault) as e:  # pragma: no cover - flags always give a valid context
            stderr.write(f"toolgate: {e}\n")
            return EXIT_LOAD
        stdout.write(out.encode("utf-8") + b"\n")
        stdout.flush()
        return 0

    denied = False

    def decide(call: bytes) -> None:
        nonlocal denied
        decision = rules.evaluate_json(call, context_text)
        if args.fail_on_deny and not denied:
            denied = not Decision.from_json(decision).ok
        stdout.write(decision.encode("utf-8") + b"\n")

    if args.call is not None:
        decide(args.call.encode("utf-8"))  # argv is UTF-8 here (_read_args)
    else:
        for raw in stdin:
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line.strip(_BLANK):
                continue
            decide(line)
    stdout.flush()
    return EXIT_DENIED if denied and args.fail_on_deny else 0


#: The commands that run in Python; every other one is the native binary's.
PYTHON_COMMANDS = ("eval", "list")
BINARY_ENV = "TOOLGATE_BINARY"


def native_binary() -> Path | None:
    """The native ``toolgate`` to run: ``$TOOLGATE_BINARY`` when set, else the
    one this wheel carries (``_native/``), else None (the pure wheel)."""
    override = os.environ.get(BINARY_ENV)
    if override:
        return Path(override)
    native = Path(__file__).resolve().parent / "_native"
    for name in ("toolgate.exe", "toolgate") if os.name == "nt" else ("toolgate",):
        if (native / name).is_file():
            return native / name
    return None


def _no_binary(command: str | None, stderr: IO[str]) -> int:
    what = f"'{command}'" if command else "this"
    stderr.write(
        f"toolgate: the command {what} is the native toolgate binary, which this installation does not carry "
        "(the pure py3-none-any wheel: the library and `eval`/`list` only). Install the platform wheel "
        "(`pip install --force-reinstall mcp-toolgate` on Linux x86_64 glibc; other platforms: build "
        f"target/release/toolgate from the repository) or set {BINARY_ENV}=/path/to/toolgate.\n"
    )
    return EXIT_LOAD


def run(argv: list[str] | None = None) -> int:
    """The console scripts' entry point: ``eval``/``list`` in Python
    (:func:`main`), anything else in the native binary (``os.execv`` on POSIX,
    a child process and its exit code on Windows)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in PYTHON_COMMANDS:
        return main(argv)
    binary = native_binary()
    if binary is None:
        if not argv or argv[0] in ("-h", "--help", "help"):
            return main(argv)  # Python's own usage: eval and list
        return _no_binary(argv[0], sys.stderr)
    if not binary.is_file():
        sys.stderr.write(f"toolgate: {BINARY_ENV}={binary} is not a file\n")
        return EXIT_LOAD
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "nt":  # pragma: no cover - no execv that keeps the console and exit code
        try:
            return subprocess.call([str(binary), *argv])
        except KeyboardInterrupt:
            return 130
    try:
        os.execv(binary, [str(binary), *argv])
    except OSError as e:
        sys.stderr.write(f"toolgate: cannot run {binary}: {e.strerror} (os error {e.errno})\n")
        return EXIT_LOAD
    raise AssertionError("unreachable")  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
