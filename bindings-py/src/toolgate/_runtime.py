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

CONTRACT_VERSION = "0.1.0"
INTERFACE = f"toolgate:policy/engine@{CONTRACT_VERSION}"

#: Fuel for one `evaluate`/`list-exposable`/`turn`/... call. A 4 MiB call uses
#: about 40 million; an endless loop runs out in a few seconds.
DEFAULT_CALL_FUEL = 5_000_000_000
#: Fuel for `load` (the 34-tool seed catalog uses about 0.6 billion).
DEFAULT_LOAD_FUEL = 100_000_000_000

_VAL = ffi.wasmtime_component_val_t
_VAL_SIZE = ctypes.sizeof(_VAL)
_VAL_OF = _VAL.of.offset
_KIND_U8 = ffi.WASMTIME_COMPONENT_U8.value
_KIND_LIST = ffi.WASMTIME_COMPONENT_LIST


class Trap(Exception):
    """The component trapped or ran out of fuel; the instance is unusable."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


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
                error = wasmtime.WasmtimeError._from_ptr(err)
                self.poisoned = True
                try:
                    exhausted = store.get_fuel() == 0
                except wasmtime.WasmtimeError:
                    exhausted = False
                raise Trap("ENGINE_LIMIT" if exhausted else "ENGINE_TRAP", _trap_reason(str(error)))
            if fn.result is None:
                return None
            return fn.result.convert_from_c(result)
        finally:
            for i in range(lowered):
                ffi.wasmtime_component_val_delete(ctypes.byref(params[i]))
