"""Every private wasmtime use of toolgate, behind a version gate.

wasmtime-py's public component API (``wasmtime.component.Func.__call__``)
re-reads the function type on every call and lowers a ``list<u8>`` one Python
object per byte. This module calls wasmtime's C API through wasmtime-py's
private ctypes bindings (``wasmtime._ffi``) instead, with the types read once,
and for ``evaluate`` lends wasmtime buffers the instance keeps.

A ctypes binding is not checked against the library it calls: if a wasmtime
release changed a struct, a kind number or who frees a call's arguments, this
code would corrupt memory rather than fail. So it runs only

* on a wasmtime-py major in `VERIFIED_MAJORS`, each one run through the whole
  test suite on both paths and the differential test
  (``tests/test_fastpath.py``),
* when the ctypes types, kind numbers and functions it relies on are the ones
  it was written for (`_bind`, checked once, at import: `REFUSAL`),
* and unless ``TOOLGATE_PY_FASTPATH=0`` (``off``, ``false``, ``no``).

Otherwise `mcp_toolgate._runtime` calls the component through the public API only,
with the same results, slower (about 6x a decision, and 1 µs a byte of a
call). ``TOOLGATE_PY_FASTPATH=unverified`` lifts the major check (not the
structural one), to run the tests on a new wasmtime before adding it to
`VERIFIED_MAJORS`.

Nothing else in toolgate imports ``wasmtime._ffi`` or ctypes, or touches a
private attribute of a wasmtime object.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime import component as wc

ENV = "TOOLGATE_PY_FASTPATH"
#: wasmtime-py majors the fast path was verified against.
VERIFIED_MAJORS: frozenset[int] = frozenset({50})
_OFF = ("0", "off", "false", "no")

#: The C API's component value kinds (``wasmtime/component/val.h``) the fast path writes.
_EXPECTED_KINDS = {"U8": 2, "STRING": 12, "LIST": 13, "RESOURCE": 21}

# Bound by `_bind` once the checks pass; unused until then.
ctypes: Any = None
ffi: Any = None
_VAL: Any = None
_VAL_SIZE = 0
_VAL_OF = 0
_VAL_PTR: Any = None
_BYTE_PTR: Any = None
_KIND_U8 = 0
_KIND_LIST: Any = None
_KIND_STRING: Any = None
_KIND_RESOURCE: Any = None
_BOUND = False

#: `evaluate` keeps its argument buffers for calls and contexts up to this many
#: bytes (a call byte takes a 32-byte `list<u8>` value: 2 MiB); larger ones get
#: buffers for that call only. They start with room for this many:
_KEPT_ARGUMENT_BYTES = 64 * 1024
_FIRST_ARGUMENT_BYTES = 256


class Unusable(RuntimeError):
    """The installed wasmtime-py is not the one the fast path was written for."""


@functools.cache
def wasmtime_version() -> str:
    """The installed wasmtime-py's version (it has no ``__version__``).

    Read from the one ``wasmtime-*.dist-info`` beside the imported package:
    ``importlib.metadata`` gives the same answer, but importing it (it pulls in
    email, zipfile, csv) took about 40 ms of Python's 200 ms cold start here.
    It is still asked whenever that directory is not found exactly once.
    """
    return _version_beside(Path(wasmtime.__file__).resolve().parent.parent) or _version_from_metadata()


def _version_beside(site: Path) -> str | None:
    """The Version header of the single dist-info in `site` whose Name is wasmtime."""
    try:
        found = []
        for info in site.glob("wasmtime-*.dist-info"):
            headers = _headers((info / "METADATA").read_text(encoding="utf-8"))
            if headers.get("name", "").lower() == "wasmtime" and headers.get("version"):
                found.append(headers["version"])
    except (OSError, UnicodeDecodeError):
        return None
    return found[0] if len(found) == 1 else None


def _headers(text: str) -> dict[str, str]:
    """The core metadata's header block (name lower-cased); a header's first line only."""
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line:
            break
        name, sep, value = line.partition(":")
        if sep and not name[:1].isspace():
            headers.setdefault(name.strip().lower(), value.strip())
    return headers


def _version_from_metadata() -> str:
    from importlib import metadata

    try:
        return metadata.version("wasmtime")
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


def _major(version: str) -> int | None:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def check(version: str, *, unverified: bool = False) -> str | None:
    """Why the fast path may not run on wasmtime-py `version`, or None when it may.

    `unverified` lifts the major check (the structural checks still apply)."""
    major = _major(version)
    if not unverified and (major is None or major not in VERIFIED_MAJORS):
        majors = ", ".join(str(m) for m in sorted(VERIFIED_MAJORS))
        return f"wasmtime {version} is not a version the fast path was verified against (majors {majors})"
    try:
        _bind()
    except Exception as exc:  # any surprise in the checks: the public path
        return f"wasmtime {version}: {exc}"
    return None


_REFUSALS: dict[bool, str | None] = {}


def refusal(*, unverified: bool = False) -> str | None:
    """`check` for the installed wasmtime-py, once per process."""
    if unverified not in _REFUSALS:
        _REFUSALS[unverified] = check(wasmtime_version(), unverified=unverified)
    return _REFUSALS[unverified]


def disabled() -> str | None:
    """Why calls go through the public API (None: the fast path), read each time
    an instance is made: ``TOOLGATE_PY_FASTPATH``, then the gate."""
    setting = os.environ.get(ENV, "").strip().lower()
    if setting in _OFF:
        return f"{ENV}={setting}"
    return refusal(unverified=setting == "unverified")


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise Unusable(what)


def _fields(struct: Any) -> dict[str, Any]:
    return {name: ty for name, ty, *_ in getattr(struct, "_fields_", ())}


def _bind() -> None:
    """Imports the private bindings and checks what this module relies on."""
    global ctypes, ffi, _VAL, _VAL_SIZE, _VAL_OF, _VAL_PTR, _BYTE_PTR, _BOUND
    global _KIND_U8, _KIND_LIST, _KIND_STRING, _KIND_RESOURCE
    if _BOUND:
        return
    import ctypes as c

    from wasmtime import _ffi as f

    val = f.wasmtime_component_val_t
    _require(isinstance(val, type) and issubclass(val, c.Structure), "wasmtime_component_val_t is not a struct")
    fields = _fields(val)
    _require(list(fields) == ["kind", "of"], f"wasmtime_component_val_t has fields {list(fields)}")
    _require(fields["kind"] is c.c_uint8, "wasmtime_component_val_t.kind is not a uint8")
    union = fields["of"]
    _require(issubclass(union, c.Union), "wasmtime_component_val_t.of is not a union")
    members = _fields(union)
    _require(members.get("u8") is c.c_uint8, "the value union has no u8")
    vallist = members.get("list")
    _require(vallist is f.wasmtime_component_vallist_t, "the value union's list is not a vallist")
    _require(
        list(_fields(vallist).items()) == [("size", c.c_size_t), ("data", c.POINTER(val))],
        "wasmtime_component_vallist_t is not {size, data: *val}",
    )
    byte_vec = members.get("string")
    _require(byte_vec is f.wasm_byte_vec_t, "the value union's string is not a wasm_byte_vec_t")
    byte_fields = _fields(byte_vec)
    _require(
        list(byte_fields) == ["size", "data"]
        and byte_fields["size"] is c.c_size_t
        and c.sizeof(byte_fields["data"]._type_) == 1,
        "wasm_byte_vec_t is not {size, data: *byte}",
    )
    _require(
        members.get("resource") is c.POINTER(f.wasmtime_component_resource_any_t),
        "the value union's resource is not a resource_any pointer",
    )
    offset = val.of.offset
    _require(
        offset >= 1 and c.sizeof(val) >= offset + c.sizeof(union) and c.sizeof(val) % c.alignment(val) == 0,
        "wasmtime_component_val_t has an unexpected layout",
    )
    for name, number in _EXPECTED_KINDS.items():
        kind = getattr(f, f"WASMTIME_COMPONENT_{name}")
        _require(
            isinstance(kind, c.c_uint8) and kind.value == number,
            f"WASMTIME_COMPONENT_{name} is not {number}",
        )
    error_ptr = c.POINTER(f.wasmtime_error_t)
    signatures = {
        "wasmtime_component_func_call": (
            error_ptr,
            [
                c.POINTER(f.wasmtime_component_func_t),
                c.POINTER(f.wasmtime_context_t),
                c.POINTER(val),
                c.c_size_t,
                c.POINTER(val),
                c.c_size_t,
            ],
        ),
        "wasmtime_component_vallist_new": (None, [c.POINTER(vallist), c.c_size_t, c.POINTER(val)]),
        "wasmtime_component_vallist_new_empty": (None, [c.POINTER(vallist)]),
        "wasmtime_component_val_delete": (None, [c.POINTER(val)]),
        "wasmtime_error_wasm_trace": (None, [error_ptr, c.POINTER(f.wasm_frame_vec_t)]),
        "wasm_frame_func_index": (c.c_uint32, [c.POINTER(f.wasm_frame_t)]),
        "wasm_frame_vec_delete": (None, [c.POINTER(f.wasm_frame_vec_t)]),
        "wasm_byte_vec_delete": (None, [c.POINTER(f.wasm_byte_vec_t)]),
        "wasmtime_context_set_fuel": (error_ptr, [c.POINTER(f.wasmtime_context_t), c.c_uint64]),
    }
    for name, (restype, argtypes) in signatures.items():
        # The C function as the bindings declared it (ctypes keeps one per name).
        raw: Any = getattr(f.dll, name, None)
        _require(callable(getattr(f, name, None)) and raw is not None, f"{name} is missing")
        _require(raw.restype == restype and list(raw.argtypes or ()) == argtypes, f"{name} has another signature")
    _require(callable(getattr(f, "str_to_capi", None)), "str_to_capi is missing")
    # The private attributes of public objects used here.
    _require(
        getattr(wc.Func, "__annotations__", {}).get("_func") is f.wasmtime_component_func_t,
        "component.Func._func is not a wasmtime_component_func_t",
    )
    _require(callable(getattr(wasmtime.Store, "_context", None)), "Store._context is missing")
    _require(callable(getattr(wasmtime.WasmtimeError, "_from_ptr", None)), "WasmtimeError._from_ptr is missing")
    _require(callable(getattr(wasmtime.WasmtimeError, "ptr", None)), "WasmtimeError.ptr is missing")
    _require(callable(getattr(wc.ResourceAny, "ptr", None)), "component.ResourceAny.ptr is missing")
    for ty in ("ValType", "String", "ListType"):
        cls = getattr(wc, ty)
        _require(
            callable(getattr(cls, "convert_to_c", None)) and callable(getattr(cls, "convert_from_c", None)),
            f"component.{ty} cannot convert to and from C",
        )

    ctypes, ffi = c, f
    _VAL = val
    _VAL_SIZE = c.sizeof(val)
    _VAL_OF = offset
    _VAL_PTR = c.POINTER(val)
    _BYTE_PTR = c.POINTER(byte_fields["data"]._type_)
    _KIND_U8 = f.WASMTIME_COMPONENT_U8.value
    _KIND_LIST = f.WASMTIME_COMPONENT_LIST
    _KIND_STRING = f.WASMTIME_COMPONENT_STRING
    _KIND_RESOURCE = f.WASMTIME_COMPONENT_RESOURCE
    _BOUND = True


def frames(error: wasmtime.WasmtimeError) -> tuple[int, ...]:
    """The wasm function index of each frame of a trap, innermost first."""
    vec = ffi.wasm_frame_vec_t()
    ffi.wasmtime_error_wasm_trace(error.ptr(), ctypes.byref(vec))
    try:
        return tuple(ffi.wasm_frame_func_index(vec.data[i]) for i in range(vec.size))
    finally:
        ffi.wasm_frame_vec_delete(ctypes.byref(vec))


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


def _raise(err: Any) -> None:
    raise wasmtime.WasmtimeError._from_ptr(err)


class Calls:
    """The fast path's calls into one instance: the `_runtime.Instance`'s
    functions (each with ``func``, ``params`` and ``result`` read once) on its
    store. Calls raise `wasmtime.WasmtimeError` when the component traps, like
    the public API."""

    path = "fast"
    frames = staticmethod(frames)

    def __init__(self, store: wasmtime.Store, fns: Mapping[str, Any], evaluate: str) -> None:
        if not _BOUND:
            raise Unusable("the fast path's checks did not pass")
        self.store = store
        self.fns = fns
        self.lowerers: dict[str, list[str]] = {}
        for name, fn in fns.items():
            raw = getattr(fn.func, "_func", None)
            _require(isinstance(raw, ffi.wasmtime_component_func_t), f"{name} is not a wasmtime_component_func_t")
            kinds = []
            for ty in fn.params:
                if isinstance(ty, wc.ListType) and isinstance(ty.element, wc.U8):
                    kinds.append("bytes")
                elif isinstance(ty, wc.String):
                    kinds.append("str")
                else:
                    kinds.append("generic")
            self.lowerers[name] = kinds
        self._evaluate = fns[evaluate]
        _require(isinstance(self._evaluate.result, wc.String), "evaluate does not return a string")
        # `_EvaluateArgs` lends exactly these three: another shape falls back to
        # the public path instead of every call being refused by wasmtime.
        _require(
            self.lowerers[evaluate] == ["generic", "bytes", "str"],
            f"evaluate takes {self.lowerers[evaluate]}, not (rule-set, list<u8>, string)",
        )
        self._evaluate_args: _EvaluateArgs | None = None
        # The store's context pointer lives as long as the store (wasmtime_store_context).
        self._context = store._context()

    def call(self, name: str, args: Sequence[Any]) -> Any:
        fn = self.fns[name]
        store = self.store
        n = len(args)
        params = (_VAL * n)()
        lowered = 0
        try:
            for i, (kind, ty, value) in enumerate(zip(self.lowerers[name], fn.params, args, strict=True)):
                slot = params[i]
                if kind == "bytes":
                    _lower_bytes(value, slot)
                elif kind == "str":
                    slot.kind = _KIND_STRING
                    slot.of.string = ffi.str_to_capi(value)
                else:
                    ty.convert_to_c(store, value, ctypes.pointer(slot))
                lowered += 1
            result = _VAL()
            err = ffi.wasmtime_component_func_call(
                ctypes.byref(fn.func._func),
                store._context(),
                params,
                n,
                ctypes.byref(result),
                1 if fn.result is not None else 0,
            )
            if err:
                _raise(err)
            if fn.result is None:
                return None
            return fn.result.convert_from_c(result)
        finally:
            for i in range(lowered):
                ffi.wasmtime_component_val_delete(ctypes.byref(params[i]))

    def evaluate(self, handle: wc.ResourceAny, call: bytes, context: bytes, fuel: int) -> str:
        """``[method]rule-set.evaluate`` with `fuel`, its arguments lent (`_EvaluateArgs`).
        `context` must be UTF-8 (a WIT string): wasmtime's C API panics on
        anything else, which aborts the process, so it is checked here."""
        if not context.isascii():
            context.decode("utf-8")  # raises UnicodeDecodeError, as the public path does
        args = self._evaluate_args
        if args is None:
            args = self._evaluate_args = _EvaluateArgs(self._evaluate)
        err = ffi.wasmtime_context_set_fuel(self._context, fuel)
        if err:
            _raise(err)
        try:
            args.lend(handle, call, context)
            err = ffi.wasmtime_component_func_call(args.func, self._context, args.array, 3, args.result_ref, 1)
        finally:
            args.settle()
        if err:
            _raise(err)
        return args.lift()


class _EvaluateArgs:
    """The three arguments of ``evaluate``, lent to wasmtime where they lie.

    ``wasmtime_component_func_call`` only reads its arguments (it converts them
    by reference; the caller frees them, as `Calls.call` and wasmtime-py's
    ``Func.__call__`` do). So instead of copying each argument into memory
    wasmtime allocates and freeing it after the call, the handle slot points
    at the rule set's own resource handle (no clone), the ``list<u8>`` slot at
    a buffer of ``u8`` values whose payload bytes are overwritten with the
    call's, and the string slot at a buffer holding the context's UTF-8 bytes.
    Nothing is freed after the call: these slots are never passed to
    ``wasmtime_component_val_delete``. The buffers belong to the instance (not
    thread-safe, like it: callers lock) and are replaced, never resized.
    """

    __slots__ = (
        "array",
        "func",
        "list",
        "resource",
        "result",
        "result_ref",
        "result_string",
        "result_string_ref",
        "string",
        "text",
        "values",
    )

    def __init__(self, fn: Any) -> None:
        self.func = ctypes.byref(fn.func._func)
        self.result = _VAL()
        self.result_ref = ctypes.byref(self.result)
        # A view of the result's string (it shares the result's memory), read
        # after each call and freed as wasmtime-py's String.convert_from_c does.
        self.result_string = self.result.of.string
        self.result_string_ref = ctypes.byref(self.result_string)
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

    def lift(self) -> str:
        """The returned string, decoded in one copy, then freed."""
        if self.result.kind != _KIND_STRING.value:
            raise Unusable(f"evaluate returned a value of kind {self.result.kind}, not a string")
        text = self.result_string
        try:
            return ctypes.string_at(text.data, text.size).decode("utf-8") if text.size else ""
        finally:
            ffi.wasm_byte_vec_delete(self.result_string_ref)
            # The slot is reused: wasmtime drops what a call finds in it, so it
            # must hold nothing owned (wasmtime-py's own lift leaves a bool).
            self.result.kind = 0
            text.size = 0
            text.data = None


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


#: Why the installed wasmtime-py does not get the fast path (None: it does),
#: checked at import.
REFUSAL = refusal()
