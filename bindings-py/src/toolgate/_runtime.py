"""The policy component on wasmtime-py: compile once, instantiate per rule set.

Everything here moves bytes in and out of the component; no rule lives in
Python. Calls go through a small fast path over wasmtime's C API (the generic
``Func.__call__`` re-reads the function type on every call and lowers a
``list<u8>`` one Python object per byte).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime import _ffi as ffi
from wasmtime import component as wc

from ._faults import CALL_BUDGET, FUEL_BACKSTOP_FACTOR, LOAD_BUDGET, LOAD_BUDGET_PER_INPUT_BYTE, MAX_MEMORY_BYTES

CONTRACT_VERSION = "0.1.0"
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

_VAL = ffi.wasmtime_component_val_t
_VAL_SIZE = ctypes.sizeof(_VAL)
_VAL_OF = _VAL.of.offset
_KIND_U8 = ffi.WASMTIME_COMPONENT_U8.value
_KIND_LIST = ffi.WASMTIME_COMPONENT_LIST
_KIND_STRING = ffi.WASMTIME_COMPONENT_STRING
_KIND_RESOURCE = ffi.WASMTIME_COMPONENT_RESOURCE
_VAL_PTR = ctypes.POINTER(_VAL)
_BYTE_PTR = ctypes.POINTER(ctypes.c_ubyte)
#: `evaluate` keeps its argument buffers for calls and contexts up to this many
#: bytes (a call byte takes a 32-byte `list<u8>` value: 2 MiB); larger ones get
#: buffers for that call only. They start with room for this many:
_KEPT_ARGUMENT_BYTES = 64 * 1024
_FIRST_ARGUMENT_BYTES = 256


class Trap(Exception):
    """The component trapped or ran out of its budget; the instance is unusable."""

    def __init__(self, code: str, detail: str, frames: tuple[int, ...] = ()) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        #: The wasm function index of each frame of the trap, innermost first.
        self.frames = frames


def component_path() -> Path:
    """Where the shipped component is (``TOOLGATE_COMPONENT`` overrides)."""
    override = os.environ.get("TOOLGATE_COMPONENT")
    if override:
        return Path(override)
    return Path(str(resources.files("toolgate").joinpath("toolgate_policy.wasm")))


def _cache_dir() -> Path | None:
    setting = os.environ.get("TOOLGATE_CACHE_DIR")
    if setting is not None:
        return None if setting in ("", "off", "0") else Path(setting)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "toolgate"


def _wasmtime_version() -> str:
    try:
        return metadata.version("wasmtime")
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


class Runtime:
    """One wasmtime engine and the compiled component, shared by rule sets."""

    def __init__(self, wasm: bytes) -> None:
        config = wasmtime.Config()
        config.consume_fuel = True
        self.engine = wasmtime.Engine(config)
        self.wasm_sha256 = hashlib.sha256(wasm).hexdigest()
        self.component = self._compile(wasm)
        self.linker = wc.Linker(self.engine)
        self._oom_sites: frozenset[tuple[int, int]] | None = None
        self._oom_lock = threading.Lock()
        self._calibrating = 0  # the thread measuring the signatures

    def out_of_memory(self, frames: tuple[int, ...]) -> bool:
        """Whether a trap is the guest's allocator giving up: a ``memory.grow``
        refused by the store's memory limit (or past wasm32's 4 GiB).

        wasmtime-py has no resource-limiter callback to record a refused
        growth, so the host recognises where the guest aborts instead: the
        innermost two frames of an allocation failure are always the same
        (the abort and the out-of-memory handler that calls it), one pair for
        the canonical ABI's ``cabi_realloc`` and one for Rust's
        ``handle_alloc_error``. They are measured once, on throwaway
        instances, the first time a trap needs telling apart. A panic aborts
        from elsewhere and stays ``ENGINE_TRAP``."""
        if len(frames) < 2 or self._calibrating == threading.get_ident():
            return False
        return (frames[0], frames[1]) in self._oom_signatures()

    def _oom_signatures(self) -> frozenset[tuple[int, int]]:
        with self._oom_lock:
            if self._oom_sites is None:
                self._calibrating = threading.get_ident()
                try:
                    self._oom_sites = self._measure_oom_sites()
                finally:
                    self._calibrating = 0
            return self._oom_sites

    def _measure_oom_sites(self) -> frozenset[tuple[int, int]]:
        sites: set[tuple[int, int]] = set()

        def record(inst: Instance, name: str, *args: Any) -> Any:
            try:
                return inst.call(name, *args)
            except Trap as trap:
                if "unreachable" in trap.detail and len(trap.frames) >= 2:
                    sites.add((trap.frames[0], trap.frames[1]))
                return None

        # No room for an argument: the guest's `cabi_realloc` fails.
        inst = Instance(self)
        inst.store.set_limits(memory_size=0)
        record(inst, "[static]rule-set.load", None, "x" * (1 << 20))
        # Room for the call but not for parsing it: Rust's allocator fails.
        inst = Instance(self)
        handle = record(inst, "[static]rule-set.load", None, '{"tools":[{"name":"a"}]}')
        if isinstance(handle, wc.ResourceAny):
            inst.store.set_limits(memory_size=16 << 20)
            call = b'{"name":"a","arguments":{"r":[' + b"1," * 1_500_000 + b"1]}}"
            record(inst, "[method]rule-set.evaluate", handle, call, "{}")
        return frozenset(sites)

    def _compile(self, wasm: bytes) -> wc.Component:
        # Compiling takes seconds; the native code is cached per component
        # hash and wasmtime version (wasmtime checks the engine config and
        # CPU features when it deserializes, and we recompile if it refuses).
        cache = _cache_dir()
        name = f"toolgate-{self.wasm_sha256[:24]}-wasmtime{_wasmtime_version()}-fuel.cwasm"
        if cache is not None:
            path = cache / name
            try:
                return wc.Component.deserialize(self.engine, path.read_bytes())
            except (OSError, wasmtime.WasmtimeError):
                pass
        component = wc.Component(self.engine, wasm)
        if cache is not None:
            try:
                cache.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=cache, prefix=".tmp-")
                with os.fdopen(fd, "wb") as f:
                    f.write(component.serialize())
                os.replace(tmp, cache / name)
            except OSError:
                pass
        return component


_RUNTIME: Runtime | None = None
_RUNTIME_LOCK = threading.Lock()


def runtime() -> Runtime:
    """The process-wide runtime, compiled (or read from the cache) on first use."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None:
            _RUNTIME = Runtime(component_path().read_bytes())
        return _RUNTIME


def _lower_bytes(data: bytes, out: Any) -> None:
    """Fills `out` (a val_t) with a `list<u8>` in one copy, not one per byte."""
    n = len(data)
    raw = ffi.wasmtime_component_vallist_t()
    if n == 0:
        ffi.wasmtime_component_vallist_new_empty(ctypes.byref(raw))
    else:
        buf = bytearray(n * _VAL_SIZE)
        buf[0::_VAL_SIZE] = bytes((_KIND_U8,)) * n
        buf[_VAL_OF::_VAL_SIZE] = data
        array = (_VAL * n).from_buffer(buf)
        ffi.wasmtime_component_vallist_new(ctypes.byref(raw), n, array)
    out.kind = _KIND_LIST
    out.of.list = raw


def _frames(error: wasmtime.WasmtimeError) -> tuple[int, ...]:
    """The wasm function index of each frame of a trap, innermost first."""
    vec = ffi.wasm_frame_vec_t()
    ffi.wasmtime_error_wasm_trace(error.ptr(), ctypes.byref(vec))
    try:
        return tuple(ffi.wasm_frame_func_index(vec.data[i]) for i in range(vec.size))
    finally:
        ffi.wasm_frame_vec_delete(ctypes.byref(vec))


def _trap_reason(text: str) -> str:
    """The trap's one-line cause, without the wasm backtrace."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "trap" in line or "fuel" in line:
            return line
    return lines[-1] if lines else "trap"


class _Fn:
    """A component function with its type read once."""

    __slots__ = ("func", "lowerers", "params", "result")

    def __init__(self, func: wc.Func, store: wasmtime.Store) -> None:
        self.func = func
        fty = func.type(store)
        self.params = [ty for _, ty in fty.params]
        self.result = fty.result
        lowerers = []
        for ty in self.params:
            if isinstance(ty, wc.ListType) and isinstance(ty.element, wc.U8):
                lowerers.append("bytes")
            elif isinstance(ty, wc.String):
                lowerers.append("str")
            else:
                lowerers.append("generic")
        self.lowerers = lowerers


class Instance:
    """One store and instance of the component. Not thread-safe: callers lock."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.store = wasmtime.Store(rt.engine)
        self.store.set_fuel(DEFAULT_CALL_FUEL)
        self.instance = rt.linker.instantiate(self.store, rt.component)
        iface = self.instance.get_export_index(self.store, INTERFACE)
        if iface is None:
            raise RuntimeError(f"the component does not export {INTERFACE}")
        self.fns: dict[str, _Fn] = {}
        for name in (
            "contract-version",
            "[static]rule-set.load",
            "[method]rule-set.evaluate",
            "[method]rule-set.list-exposable",
            "[method]rule-set.turn",
            "[method]rule-set.revision",
            "[method]rule-set.findings",
            "[method]rule-set.strip-fields",
        ):
            index = self.instance.get_export_index(self.store, name, iface)
            func = self.instance.get_func(self.store, index) if index is not None else None
            if func is None:
                raise RuntimeError(f"the component does not export {INTERFACE}#{name}")
            self.fns[name] = _Fn(func, self.store)
        self.poisoned = False
        self._evaluate_args: _EvaluateArgs | None = None

    def call(self, name: str, *args: Any, fuel: int = DEFAULT_CALL_FUEL) -> Any:
        if self.poisoned:
            raise Trap("ENGINE_TRAP", "the instance trapped earlier and cannot be re-entered")
        fn = self.fns[name]
        store = self.store
        n = len(args)
        params = (_VAL * n)()
        lowered = 0
        try:
            for i, (kind, ty, value) in enumerate(zip(fn.lowerers, fn.params, args, strict=True)):
                slot = params[i]
                if kind == "bytes":
                    _lower_bytes(value, slot)
                elif kind == "str":
                    slot.kind = ffi.WASMTIME_COMPONENT_STRING
                    slot.of.string = ffi.str_to_capi(value)
                else:
                    ty.convert_to_c(store, value, ctypes.pointer(slot))
                lowered += 1
            result = _VAL()
            store.set_fuel(fuel)
            err = ffi.wasmtime_component_func_call(
                ctypes.byref(fn.func._func),
                store._context(),
                params,
                n,
                ctypes.byref(result),
                1 if fn.result is not None else 0,
            )
            if err:
                raise self._trap(err)
            if fn.result is None:
                return None
            return fn.result.convert_from_c(result)
        finally:
            for i in range(lowered):
                ffi.wasmtime_component_val_delete(ctypes.byref(params[i]))

    def evaluate(self, handle: wc.ResourceAny, call: bytes, context: bytes, fuel: int = DEFAULT_CALL_FUEL) -> str:
        """``[method]rule-set.evaluate``, the hot path: `call`'s result for
        ``(handle, call, context)`` with `context` already UTF-8, without its
        per-call copies (see `_EvaluateArgs`)."""
        if self.poisoned:
            raise Trap("ENGINE_TRAP", "the instance trapped earlier and cannot be re-entered")
        args = self._evaluate_args
        if args is None:
            args = self._evaluate_args = _EvaluateArgs(self.fns["[method]rule-set.evaluate"])
        store = self.store
        try:
            args.lend(handle, call, context)
            store.set_fuel(fuel)
            err = ffi.wasmtime_component_func_call(
                args.func, store._context(), args.array, 3, ctypes.byref(args.result), 1
            )
        finally:
            args.settle()
        if err:
            raise self._trap(err)
        return args.lift()  # type: ignore[no-any-return]

    def _trap(self, err: Any) -> Trap:
        """Poisons the instance and says why the call failed."""
        error = wasmtime.WasmtimeError._from_ptr(err)
        self.poisoned = True
        try:
            exhausted = self.store.get_fuel() == 0
        except wasmtime.WasmtimeError:
            exhausted = False
        frames = _frames(error)
        text = str(error)
        if exhausted or _METER_TRAP in text:
            code = "ENGINE_LIMIT"
        elif self.rt.out_of_memory(frames):
            code = "ENGINE_OUT_OF_MEMORY"
        else:
            code = "ENGINE_TRAP"
        return Trap(code, _trap_reason(text), frames)


class _EvaluateArgs:
    """The three arguments of ``evaluate``, lent to wasmtime where they lie.

    ``wasmtime_component_func_call`` only reads its arguments (it converts them
    by reference; the caller frees them, as `Instance.call` and wasmtime-py's
    ``Func.__call__`` do). So instead of copying each argument into memory
    wasmtime allocates and freeing it after the call, the handle slot points
    at the rule set's own resource handle (no clone), the ``list<u8>`` slot at
    a buffer of ``u8`` values whose payload bytes are overwritten with the
    call's, and the string slot at a buffer holding the context's UTF-8 bytes.
    Nothing is freed after the call: these slots are never passed to
    ``wasmtime_component_val_delete``. The buffers belong to the instance (not
    thread-safe, like it: callers lock) and are replaced, never resized.
    """

    __slots__ = ("array", "func", "lift_result", "list", "resource", "result", "string", "text", "values")

    def __init__(self, fn: _Fn) -> None:
        self.func = ctypes.byref(fn.func._func)
        assert fn.result is not None
        self.lift_result = fn.result.convert_from_c
        self.result = _VAL()
        self.array = (_VAL * 3)()
        self.array[0].kind = _KIND_RESOURCE
        self.array[1].kind = _KIND_LIST
        self.array[2].kind = _KIND_STRING
        self.resource = self.array[0].of
        self.list = self.array[1].of.list
        self.string = self.array[2].of.string
        self.values = _Buffer(self.list, _FIRST_ARGUMENT_BYTES, u8_values=True)
        self.text = _Buffer(self.string, _FIRST_ARGUMENT_BYTES, u8_values=False)

    def lend(self, handle: wc.ResourceAny, call: bytes, context: bytes) -> None:
        self.resource.resource = handle.ptr()
        n = len(call)
        values = self.values if n <= self.values.cap else self._grow_values(n)
        if n:
            values.view[_VAL_OF : _VAL_OF + n * _VAL_SIZE : _VAL_SIZE] = call
        self.list.size = n
        m = len(context)
        text = self.text if m <= self.text.cap else self._grow_text(m)
        if m:
            text.view[:m] = context
        self.string.size = m

    def _grow_values(self, n: int) -> _Buffer:
        self.values = _Buffer(self.list, _grown(self.values.cap, n), u8_values=True)
        return self.values

    def _grow_text(self, n: int) -> _Buffer:
        self.text = _Buffer(self.string, _grown(self.text.cap, n), u8_values=False)
        return self.text

    def settle(self) -> None:
        """After a call: lets go of a buffer made for that call only."""
        if self.values.cap > _KEPT_ARGUMENT_BYTES:
            self.values = _Buffer(self.list, _FIRST_ARGUMENT_BYTES, u8_values=True)
        if self.text.cap > _KEPT_ARGUMENT_BYTES:
            self.text = _Buffer(self.string, _FIRST_ARGUMENT_BYTES, u8_values=False)

    def lift(self) -> Any:
        return self.lift_result(self.result)


def _grown(cap: int, n: int) -> int:
    """A kept buffer doubles up to the kept size; past it, exactly `n`."""
    return n if n > _KEPT_ARGUMENT_BYTES else min(max(n, 2 * cap), _KEPT_ARGUMENT_BYTES)


class _Buffer:
    """Room for `cap` items that a `list` or `string` slot points at: `list<u8>`
    values (kinds set, payload bytes written per call) or UTF-8 bytes. `view`
    is its bytes, to write in place."""

    __slots__ = ("cap", "items", "view")

    def __init__(self, slot: Any, cap: int, *, u8_values: bool) -> None:
        self.cap = cap  # > 0: never a null pointer, even for empty arguments
        if u8_values:
            self.items: Any = (_VAL * cap)()
            self.view = memoryview(self.items).cast("B")
            self.view[0::_VAL_SIZE] = bytes((_KIND_U8,)) * cap
            slot.data = ctypes.cast(self.items, _VAL_PTR)
        else:
            self.items = (ctypes.c_ubyte * cap)()
            self.view = memoryview(self.items).cast("B")
            slot.data = ctypes.cast(self.items, _BYTE_PTR)
