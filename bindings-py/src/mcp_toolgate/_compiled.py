"""The wasmtime configuration and the name of compiled component code.

One definition for the runtime (``_runtime.py``, which compiles or loads the
code) and for the wheel build hook (``hatch_build.py``, which compiles it into
a platform wheel): wasmtime refuses code made under another configuration or
version, so the two must never differ. Imports nothing from the package, so
the hook can load this file on its own.
"""

from __future__ import annotations

from typing import Any

#: Where a platform wheel carries the code, inside the package.
SHIPPED_DIR = "_native"


def engine_config(wasmtime: Any) -> Any:
    """Fuel is the backstop behind the guest meter (the Rust SDK's default is
    a deadline; wasmtime-py has no clock thread of its own here)."""
    config = wasmtime.Config()
    config.consume_fuel = True
    return config


def code_name(wasm_sha256: str, wasmtime_version: str) -> str:
    """The file name of the component's native code: per component and per
    wasmtime version (the cache and the platform wheel use the same name)."""
    return f"toolgate-{wasm_sha256[:24]}-wasmtime{wasmtime_version}-fuel.cwasm"
