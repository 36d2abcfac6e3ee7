"""The policy component on wasmtime-py: compile once, instantiate per rule set.

Everything here moves bytes in and out of the component; no rule lives in
Python. Calls go through `_fastpath` (wasmtime's C API, for the wasmtime-py
versions it was verified against) or else through wasmtime-py's public
component API (``Func.__call__``), with the same results. This module uses
only wasmtime-py's public API.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import stat
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime import component as wc

from . import _compiled, _fastpath
from ._faults import (
    CALL_BUDGET,
    FUEL_BACKSTOP_FACTOR,
    LOAD_BUDGET,
    LOAD_BUDGET_PER_INPUT_BYTE,
    MAX_MEMORY_BYTES,
)

# The WIT contract version this package speaks, generated from
# wit/toolgate.wit into _faults; checked against the component on every load.
from ._faults import CONTRACT_VERSION as CONTRACT_VERSION

INTERFACE = f"toolgate:policy/engine@{CONTRACT_VERSION}"

# What stops a runaway call is the component's own compute budget (the guest
# meter compiled in by component-build; the same units as in the Rust host and
# in Node): the guest traps with an integer division by zero when it runs out,
# and the call is denied ``ENGINE_LIMIT``. Wasmtime fuel is only a backstop,
# ``FUEL_BACKSTOP_FACTOR`` times the guest budget, that the meter reaches first.
# All numbers come from component-build/src/limits.rs (via ``_faults``).

#: Fuel for one `evaluate`/`list-exposable`/`turn`/... call (backstop).
DEFAULT_CALL_FUEL = CALL_BUDGET * FUEL_BACKSTOP_FACTOR
#: Fuel for `load` (backstop) ...
DEFAULT_LOAD_FUEL = LOAD_BUDGET * FUEL_BACKSTOP_FACTOR
#: ... or, without an explicit ``load_fuel``, this much per byte of policy and
#: catalog text when that is more (the guest's load budget scales the same way).
LOAD_FUEL_PER_INPUT_BYTE = LOAD_BUDGET_PER_INPUT_BYTE * FUEL_BACKSTOP_FACTOR
#: Cap on the component's linear memory per rule set (the store's limit): a
#: `memory.grow` past it fails, the guest's allocator aborts, and the call is
#: denied ``ENGINE_OUT_OF_MEMORY``. A 4 MiB call peaks at about 60 MiB.
DEFAULT_MEMORY_LIMIT = MAX_MEMORY_BYTES

#: How wasmtime words the guest meter's trap (``i32.div_u`` by zero; Rust code
#: never divides by zero: it checks and panics, an ``unreachable``).
_METER_TRAP = "integer divide by zero"


#: Since contract 0.2.0 ``problem.origin`` and ``finding.severity`` are WIT
#: enums; wasmtime-py gives a case as its WIT name (a ``str``). The Python API
#: keeps these strings; the tables say so explicitly (a case this package does
#: not know stays as wasmtime-py gave it).
ORIGINS = {name: name for name in ("policy", "catalog", "call", "context", "state", "input")}
SEVERITIES = {name: name for name in ("error", "warning")}

U64_MAX = (1 << 64) - 1

#: The confirmation sources without a payload (WIT ``confirmation`` cases).
CONFIRMATIONS = ("none", "argument", "person", "invalid")
_SIMPLE = {name: wc.Variant(name) for name in CONFIRMATIONS}


def enum_name(table: Mapping[str, str], value: Any) -> str:
    """The Python API's name of a WIT enum case, from wasmtime-py's."""
    name = str(value)
    return table.get(name, name)


def u64(value: Any, name: str) -> int:
    """A WIT ``u64`` from an ``int`` in range (wasmtime-py would truncate)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= U64_MAX:
        return int(value)
    raise TypeError(f"{name} must be an integer from 0 to 2**64 - 1")


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} is not valid Unicode (a lone surrogate)") from None
    return value


def text_argument(value: Any, name: str) -> str:
    """A ``string`` argument: a ``str`` that is valid Unicode."""
    return _text(value, name)


def confirmation_variant(confirmation: Any) -> wc.Variant:
    """The WIT ``confirmation`` variant for how the host obtained the
    confirmation: ``"none"``, ``"argument"``, ``"person"``, ``"invalid"``, or
    ``{"seal": {"payload": str, "caller": str, "now_ms": int}}`` (a seal the
    host opened and authenticated with its own key)."""
    if isinstance(confirmation, str):
        variant = _SIMPLE.get(confirmation)
        if variant is not None:
            return variant
    elif isinstance(confirmation, Mapping) and len(confirmation) == 1 and "seal" in confirmation:
        seal = confirmation["seal"]
        if isinstance(seal, Mapping):
            opened = wc.Record()
            for field in ("payload", "caller"):
                if field not in seal:
                    raise TypeError(f"confirmation['seal'] needs {field!r}")
                setattr(opened, field, _text(seal[field], f"confirmation['seal'][{field!r}]"))
            if "now_ms" not in seal:
                raise TypeError("confirmation['seal'] needs 'now_ms'")
            setattr(opened, "now-ms", u64(seal["now_ms"], "confirmation['seal']['now_ms']"))
            return wc.Variant("seal", opened)
    raise TypeError(
        "confirmation must be 'none', 'argument', 'person', 'invalid' or {'seal': {'payload', 'caller', 'now_ms'}}"
    )


def outcome_fields(record: Any) -> tuple[str, str | None, str | None, str | None]:
    """The WIT ``outcome`` record's fields: decision, forward, blocked result, digest.
    Raises `TypeError` when the record is not of that shape."""
    fields = (
        getattr(record, "decision", None),
        getattr(record, "forward", None),
        getattr(record, "blocked-result", None),
        getattr(record, "digest", None),
    )
    if not isinstance(fields[0], str) or not all(f is None or isinstance(f, str) for f in fields[1:]):
        raise TypeError("the component's outcome is not {decision, forward, blocked-result, digest}")
    return fields  # type: ignore[return-value]


class Trap(Exception):
    """The component trapped or ran out of its budget; the instance is unusable."""

    def __init__(self, code: str, detail: str, frames: tuple[int, ...] = ()) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        #: The wasm function index of each frame of the trap, innermost first.
        self.frames = frames


#: The component's file name, in the package and in a prepared directory.
COMPONENT_FILE = "toolgate_policy.wasm"


def component_path() -> Path:
    """Where the shipped component is (``TOOLGATE_COMPONENT`` overrides)."""
    override = os.environ.get("TOOLGATE_COMPONENT")
    if override:
        return Path(override)
    return _PACKAGE_DIR / COMPONENT_FILE


#: The installed package's directory: the component and its shipped native code
#: are files beside this module (wasmtime maps the code from its path).
_PACKAGE_DIR = Path(__file__).resolve().parent


def _cache_dir() -> Path | None:
    setting = os.environ.get("TOOLGATE_CACHE_DIR")
    if setting is not None:
        return None if setting in ("", "off", "0") else Path(setting)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "toolgate"


#: The custom section a prepared component (``toolgate prepare``) names its
#: origin in: the SHA-256 of the component it was prepared from (the Rust SDK's
#: ``PREPARED_FROM``).
PREPARED_FROM = "toolgate:prepared-from"
#: The prepared component's file in a directory ``toolgate prepare`` wrote
#: (the same name as the package's own).
PREPARED_COMPONENT_FILE = COMPONENT_FILE


class ComponentRefused(Exception):
    """The component is not one this package runs (``COMPONENT_INVALID``)."""


def custom_sections(wasm: bytes, name: str) -> list[bytes]:
    """The payloads of the top-level custom sections called ``name`` of a wasm
    module or component (the binary format's framing: a one-byte id, a LEB128
    size; a custom section's payload starts with its LEB128-prefixed name).
    Stops at the first malformed section: wasmtime refuses such bytes anyway."""

    def leb(at: int) -> tuple[int, int]:
        value = shift = 0
        while at < len(wasm) and shift < 35:
            byte = wasm[at]
            value |= (byte & 0x7F) << shift
            at += 1
            if not byte & 0x80:
                return value, at
            shift += 7
        raise ValueError("malformed LEB128")

    wanted = name.encode()
    found = []
    at = 8  # magic and version
    try:
        while at < len(wasm):
            section_id = wasm[at]
            size, body = leb(at + 1)
            end = body + size
            if end > len(wasm):
                break
            if section_id == 0:
                length, start = leb(body)
                if wasm[start : start + length] == wanted:
                    found.append(wasm[start + length : end])
            at = end
    except ValueError:
        pass
    return found


@functools.cache
def _own_component_sha256() -> bytes:
    """The SHA-256 of the component this package carries, read once."""
    return hashlib.sha256((_PACKAGE_DIR / COMPONENT_FILE).read_bytes()).digest()


def _check_prepared_origin(wasm: bytes, prepared: bool) -> None:
    """Refuses a prepared component made from another build's component than
    the one this package carries: its snapshot holds that build's engine
    state, which this package was not built against. A component without
    the section is not a prepared one: refused where one is required
    (``prepared``: a prepared directory's), as the Rust SDK refuses it."""
    if not wasm.startswith(b"\0asm"):
        # wasmtime would read any other text as WAT and compile it.
        raise ComponentRefused("not a WebAssembly component (no \\0asm header)")
    origins = custom_sections(wasm, PREPARED_FROM)
    if not origins:
        if prepared:
            raise ComponentRefused(f"not a component `toolgate prepare` made (no `{PREPARED_FROM}` section)")
        return
    try:
        own = _own_component_sha256()
    except OSError as e:
        raise ComponentRefused(f"a prepared component is checked against this package's own component: {e}") from None
    for origin in origins:
        if origin != own:
            raise ComponentRefused(
                f"prepared from another build's component (sha256 {origin.hex()[:12] or 'empty'}, this package's is "
                f"{own.hex()[:12]}): prepare it again with this build"
            )


class Runtime:
    """One wasmtime engine and the compiled component, shared by rule sets."""

    def __init__(self, wasm: bytes, *, prepared: bool = False) -> None:
        _check_prepared_origin(wasm, prepared)
        self.engine = wasmtime.Engine(_compiled.engine_config(wasmtime))
        self.wasm_sha256 = hashlib.sha256(wasm).hexdigest()
        self.component = self._compile(wasm)
        self.linker = wc.Linker(self.engine)
        self._oom_sites: dict[str, frozenset[tuple[int, int]]] = {}
        self._oom_lock = threading.Lock()
        self._calibrating = 0  # the thread measuring the signatures

    def out_of_memory(self, frames: tuple[int, ...], path: str) -> bool:
        """Whether a trap is the guest's allocator giving up: a ``memory.grow``
        refused by the store's memory limit (or past wasm32's 4 GiB).

        wasmtime-py has no resource-limiter callback to record a refused
        growth, so the host recognises where the guest aborts instead: the
        innermost two frames of an allocation failure are always the same
        (the abort and the out-of-memory handler that calls it), one pair for
        the canonical ABI's ``cabi_realloc`` and one for Rust's
        ``handle_alloc_error``. They are measured once, on throwaway
        instances, the first time a trap needs telling apart (per call path:
        the public one reads the frames from the trap's message). A panic
        aborts from elsewhere and stays ``ENGINE_TRAP``."""
        if len(frames) < 2 or self._calibrating == threading.get_ident():
            return False
        return (frames[0], frames[1]) in self._oom_signatures(path)

    def _oom_signatures(self, path: str) -> frozenset[tuple[int, int]]:
        with self._oom_lock:
            sites = self._oom_sites.get(path)
            if sites is None:
                self._calibrating = threading.get_ident()
                try:
                    sites = self._oom_sites[path] = self._measure_oom_sites(path == "fast")
                finally:
                    self._calibrating = 0
            return sites

    def _measure_oom_sites(self, fast: bool) -> frozenset[tuple[int, int]]:
        sites: set[tuple[int, int]] = set()

        def record(inst: Instance, name: str, *args: Any) -> Any:
            try:
                return inst.call(name, *args)
            except Trap as trap:
                if "unreachable" in trap.detail and len(trap.frames) >= 2:
                    sites.add((trap.frames[0], trap.frames[1]))
                return None

        # No room for an argument: the guest's `cabi_realloc` fails.
        inst = Instance(self, fast=fast)
        inst.store.set_limits(memory_size=0)
        record(inst, "[static]rule-set.load", None, "x" * (1 << 20))
        # Room for the call but not for parsing it: Rust's allocator fails.
        # Tight first: a 100 KB call under 4 MiB (a parsed number takes ~16
        # times its two bytes) costs 0.1 s on the public path, which lowers a
        # `list<u8>` one value per byte (the 3 MB call under 16 MiB that follows
        # took 8 s there, and this runs while a caller waits for its trap to be
        # told apart). The larger one runs only if the tight one found nothing
        # new (a build whose load no longer fits, or whose call did not).
        for limit, elements in ((4 << 20, 50_000), (16 << 20, 1_500_000)):
            found = len(sites)
            inst = Instance(self, fast=fast)
            inst.store.set_limits(memory_size=limit)
            handle = record(inst, "[static]rule-set.load", None, '{"tools":[{"name":"a"}]}')
            if isinstance(handle, wc.ResourceAny):
                call = b'{"name":"a","arguments":{"r":[' + b"1," * elements + b"1]}}"
                record(inst, "[method]rule-set.evaluate", handle, call, "{}")
            if len(sites) > found:
                break
        return frozenset(sites)

    def _compile(self, wasm: bytes) -> wc.Component:
        # Compiling takes seconds; the native code is shipped (platform
        # wheel) or cached per component hash and wasmtime version (wasmtime checks the engine config and
        # CPU features when it deserializes, and we recompile if it refuses).
        name = _compiled.code_name(self.wasm_sha256, _fastpath.wasmtime_version())
        # A platform wheel carries the code for its own component and pinned
        # wasmtime (hatch_build.py): a first start on a fresh machine loads it.
        # Loaded with `deserialize_file`, as the Rust host does: wasmtime maps the
        # file instead of taking a 13 MB copy of it (25 ms of a 200 ms cold start
        # here, against 1 ms). The mapping stays valid while it is in use: the
        # cache is only ever replaced by rename, never rewritten in place.
        # Cached code is loaded only if this user wrote it and no one else can
        # have replaced it (`_own_cache_file`); anything else is compiled.
        shipped = _PACKAGE_DIR / _compiled.SHIPPED_DIR / name
        cache = _cache_dir()
        candidates = [shipped] if _came_with_package(shipped) else []
        if cache is not None and _own_cache_file(cache / name):
            candidates.append(cache / name)
        for path in candidates:
            try:
                return wc.Component.deserialize_file(self.engine, str(path))
            except wasmtime.WasmtimeError:
                pass  # another wasmtime, engine config or CPU: compile below
        component = wc.Component(self.engine, wasm)
        if cache is not None:
            _write_cache(cache / name, component.serialize())
        return component


def _came_with_package(code: Path) -> bool:
    """Whether native code in the package came with it, as the Rust host checks
    code beside its binary: on POSIX, a regular file (not a link) owned by the
    package directory's owner and not writable by everyone, in a folder where no
    one else can swap it (not writable by everyone, or sticky). The code runs
    unchecked, so a package in a shared directory (a venv under a sticky
    ``/tmp``) must not load a file another user added there, nor follow a link
    its owner can point elsewhere; refused code means compiling."""
    try:
        st = os.lstat(code)
        folder = os.stat(code.parent)
        package = _PACKAGE_DIR.stat()
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    # Group-writable code only in a group-writable package: who may rewrite
    # the one could rewrite the other anyway.
    others = stat.S_IWOTH if package.st_mode & stat.S_IWGRP else stat.S_IWOTH | stat.S_IWGRP
    return os.name != "posix" or (
        st.st_uid == package.st_uid and not st.st_mode & others and _no_one_else_swaps(folder)
    )


def _no_one_else_swaps(folder: os.stat_result) -> bool:
    """A folder in which only its owner can replace a file: not writable by
    everyone, or sticky (as the Rust host checks the folder of its code)."""
    return not folder.st_mode & stat.S_IWOTH or bool(folder.st_mode & stat.S_ISVTX)


def _only_this_user_swaps(folder: os.stat_result, user: int) -> bool:
    """A folder in which no one but ``user`` or root can rename or replace a
    file: owned by one of them, and writable by neither group nor others or
    sticky (``/tmp``: the others may then replace only their own files). Its
    owner, or a member of a group that may write it, could rename another
    build's code to this build's name (review 11; the Rust host's rule)."""
    shared = folder.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not folder.st_mode & stat.S_ISVTX
    return folder.st_uid in (user, 0) and not shared


def _own_cache_file(code: Path) -> bool:
    """Whether cached native code may be loaded: a regular file (not a link);
    on POSIX also owned by this process's (effective) user or root, not writable by
    group or others, in a folder no one else can swap it in
    (:func:`_only_this_user_swaps`). The code runs unchecked: on a host where the cache
    path is shared (``TOOLGATE_CACHE_DIR=/tmp/...``, ``XDG_CACHE_HOME`` on a
    shared volume, a group-writable ``/var/cache``), a file another user put or
    could edit there is compiled over instead, never loaded."""
    try:
        st = os.lstat(code)
        folder = os.stat(code.parent)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    user = _effective_user()
    if user is None:
        return True  # no POSIX owners (Windows)
    # Root's files are trusted as the user's own (root could replace anything).
    return (
        st.st_uid in (user, 0)
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        and _only_this_user_swaps(folder, user)
    )


def _effective_user() -> int | None:
    """This process's user id (the owner of the files it writes), where the platform has one."""
    geteuid = getattr(os, "geteuid", None)
    return None if geteuid is None else geteuid()


def _write_cache(path: Path, code: bytes) -> None:
    """Puts `code` at `path` by rename (a process mapping the old file keeps it);
    a cache that cannot be written is no error, and leaves no temporary file."""
    import tempfile  # only here: writing the cache is rare, and importing it is not free

    try:
        # 0700: a cache folder this creates is this user's alone.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        user = _effective_user()
        if user is not None and not _only_this_user_swaps(os.stat(path.parent), user):
            return  # its code would never be loaded (`_own_cache_file`)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(code)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


_RUNTIMES: dict[Path, Runtime] = {}
_RUNTIME_LOCK = threading.Lock()


def runtime(component: Path | None = None) -> Runtime:
    """The process-wide runtime of a component (default: :func:`component_path`),
    compiled (or read from the cache) on first use. Raises
    :class:`ComponentRefused` for a prepared component from another build and
    for a named ``component`` that cannot be read (never the shipped one instead)."""
    path = component_path() if component is None else component
    with _RUNTIME_LOCK:
        found = _RUNTIMES.get(path)
        if found is None:
            try:
                wasm = path.read_bytes()
            except OSError as e:
                if component is None:
                    raise
                raise ComponentRefused(f"cannot read {path}: {e.strerror} (os error {e.errno})") from None
            try:
                found = Runtime(wasm, prepared=component is not None)
            except wasmtime.WasmtimeError as e:
                raise ComponentRefused(f"{path} could not be compiled: {e}") from None
            _RUNTIMES[path] = found
        return found


#: A frame line of wasmtime's wasm backtrace (``    3: 0x32517b - <unknown>!<wasm function 7853>``;
#: wasmtime pads the addresses to one width, ``    0:   0x5a45 - …``).
_FRAME_LINE = re.compile(r"\s*\d+:\s+0x[0-9a-fA-F]+ - (.*)")
_FUNCTION_INDEX = re.compile(r"<wasm function (\d+)>$")


def _frames_from_text(text: str) -> tuple[int, ...]:
    """The wasm function index of each frame of a trap, innermost first, read
    from the backtrace in wasmtime's message (the public API has no other way
    to them). Empty when a frame has no index in the text (a component with a
    name section): then no trap is told apart as out-of-memory."""
    lines = text.splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if line.rstrip().endswith("wasm backtrace:")), None)
    if start is None:
        return ()
    found: list[int] = []
    for line in lines[start:]:
        frame = _FRAME_LINE.fullmatch(line)
        if frame is None:
            if not line.strip():
                break
            continue  # a source location line (WASMTIME_BACKTRACE_DETAILS=1)
        index = _FUNCTION_INDEX.search(frame.group(1).rstrip())
        if index is None:
            return ()
        found.append(int(index.group(1)))
    return tuple(found)


def _trap_reason(text: str) -> str:
    """The trap's one-line cause, without the wasm backtrace."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "trap" in line or "fuel" in line:
            return line
    return lines[-1] if lines else "trap"


class _Fn:
    """A component function with its type read once."""

    __slots__ = ("func", "params", "result")

    def __init__(self, func: wc.Func, store: wasmtime.Store) -> None:
        self.func = func
        fty = func.type(store)
        self.params = [ty for _, ty in fty.params]
        self.result = fty.result


_EVALUATE = "[method]rule-set.evaluate"
_FUNCTIONS = (
    "contract-version",
    "[static]rule-set.load",
    _EVALUATE,
    "[method]rule-set.list-exposable",
    "[method]rule-set.turn",
    "[method]rule-set.revision",
    "[method]rule-set.findings",
    "[method]rule-set.decide",
    "[method]rule-set.seal-payload",
)


class _PublicCalls:
    """Calls through wasmtime-py's public component API only (``Func.__call__``):
    what runs when `_fastpath` may not. The same interface as `_fastpath.Calls`."""

    path = "public"

    def __init__(self, store: wasmtime.Store, fns: Mapping[str, _Fn]) -> None:
        self.store = store
        self.fns = fns
        self._evaluate = fns[_EVALUATE].func

    def call(self, name: str, args: Sequence[Any]) -> Any:
        return self.fns[name].func(self.store, *args)

    def evaluate(self, handle: wc.ResourceAny, call: bytes, context: bytes, fuel: int) -> str:
        self.store.set_fuel(fuel)
        # `context` is UTF-8 (the caller encoded it); `list<u8>` takes bytes only.
        return self._evaluate(self.store, handle, bytes(call), context.decode("utf-8"))  # type: ignore[no-any-return]

    @staticmethod
    def frames(error: wasmtime.WasmtimeError) -> tuple[int, ...]:
        return _frames_from_text(str(error))


def call_path() -> tuple[str, str | None]:
    """Which path a new instance calls the component through, ``("fast", None)``
    or ``("public", why)``."""
    why = _fastpath.disabled()
    return ("public", why) if why is not None else ("fast", None)


class Instance:
    """One store and instance of the component. Not thread-safe: callers lock."""

    def __init__(self, rt: Runtime, *, fast: bool | None = None) -> None:
        """`fast`: None takes the path `call_path` says; True or False chooses
        (tests; True skips the version gate but raises `_fastpath.Unusable`
        unless the fast path's structural checks passed)."""
        self.rt = rt
        self.store = wasmtime.Store(rt.engine)
        self.store.set_fuel(DEFAULT_CALL_FUEL)
        self.instance = rt.linker.instantiate(self.store, rt.component)
        iface = self.instance.get_export_index(self.store, INTERFACE)
        if iface is None:
            raise RuntimeError(f"the component does not export {INTERFACE}")
        self.fns: dict[str, _Fn] = {}
        for name in _FUNCTIONS:
            index = self.instance.get_export_index(self.store, name, iface)
            func = self.instance.get_func(self.store, index) if index is not None else None
            if func is None:
                raise RuntimeError(f"the component does not export {INTERFACE}#{name}")
            self.fns[name] = _Fn(func, self.store)
        self.poisoned = False
        self.calls: _fastpath.Calls | _PublicCalls
        #: Why this instance calls through the public API (None: the fast path).
        self.public_because: str | None = None
        if fast is None:
            self.public_because = _fastpath.disabled()
        elif not fast:
            self.public_because = "asked for the public path"
        if self.public_because is None:
            try:
                self.calls = _fastpath.Calls(self.store, self.fns, _EVALUATE)
            except _fastpath.Unusable as exc:
                if fast:
                    raise
                self.public_because = str(exc)
        if self.public_because is not None:
            self.calls = _PublicCalls(self.store, self.fns)

    @property
    def path(self) -> str:
        """``"fast"`` or ``"public"``."""
        return self.calls.path

    def call(self, name: str, *args: Any, fuel: int = DEFAULT_CALL_FUEL) -> Any:
        if self.poisoned:
            raise Trap("ENGINE_TRAP", "the instance trapped earlier and cannot be re-entered")
        self.store.set_fuel(fuel)
        try:
            return self.calls.call(name, args)
        except wasmtime.WasmtimeError as error:
            raise self._trap(error) from None

    def evaluate(self, handle: wc.ResourceAny, call: bytes, context: bytes, fuel: int = DEFAULT_CALL_FUEL) -> str:
        """``[method]rule-set.evaluate``, the hot path: `call`'s result for
        ``(handle, call, context)`` with `context` already UTF-8."""
        if self.poisoned:
            raise Trap("ENGINE_TRAP", "the instance trapped earlier and cannot be re-entered")
        try:
            return self.calls.evaluate(handle, call, context, fuel)
        except wasmtime.WasmtimeError as error:
            raise self._trap(error) from None

    def _trap(self, error: wasmtime.WasmtimeError) -> Trap:
        """Poisons the instance and says why the call failed."""
        self.poisoned = True
        try:
            exhausted = self.store.get_fuel() == 0
        except wasmtime.WasmtimeError:
            exhausted = False
        frames = self.calls.frames(error)
        text = str(error)
        if exhausted or _METER_TRAP in text:
            code = "ENGINE_LIMIT"
        elif self.rt.out_of_memory(frames, self.calls.path):
            code = "ENGINE_OUT_OF_MEMORY"
        else:
            code = "ENGINE_TRAP"
        return Trap(code, _trap_reason(text), frames)
