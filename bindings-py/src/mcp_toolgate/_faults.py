"""Decisions the host builds itself when the component cannot decide (SPEC §7).

Exact bytes of ``tests/vectors/host-faults.json``; a test checks they match.
"""

# BEGIN faults: generated from component-build/src by
# `cargo run --release --locked --bin component-build -- --write-limits`; do not edit.
#: The decisions a host builds itself (docs/spec.md §7), exact bytes.
FAULTS: dict[str, str] = {
    "ENGINE_TRAP": (
        '{"ok":false,"error":{"code":"ENGINE_TRAP","message":"The policy engine failed on this call; it was not allowed. Report it if it repeats.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}'
    ),
    "ENGINE_LIMIT": (
        '{"ok":false,"error":{"code":"ENGINE_LIMIT","message":"The policy engine ran out of its time budget on this call; it was not allowed. Send a smaller call.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}'
    ),
    "ENGINE_OUT_OF_MEMORY": (
        '{"ok":false,"error":{"code":"ENGINE_OUT_OF_MEMORY","message":"The policy engine ran out of memory on this call; it was not allowed. Send a smaller call.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}'
    ),
    "INPUT_TOO_LARGE": (
        '{"ok":false,"error":{"code":"INPUT_TOO_LARGE","message":"The call is larger than this host accepts; it was not allowed. Send a smaller call.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}'
    ),
    "STORE_UNAVAILABLE": (
        '{"ok":false,"error":{"code":"STORE_UNAVAILABLE","message":"The store that makes a confirmation single-use could not be reached, so the call was not run. Try again shortly.","retryable":true,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}'
    ),
}
# END faults

# BEGIN limits: generated from component-build/src by
# `cargo run --release --locked --bin component-build -- --write-limits`; do not edit.
#: Calls and contexts over this many bytes never reach the component.
MAX_INPUT_BYTES = 4194304
#: Default cap on the component's linear memory per rule set, in bytes.
MAX_MEMORY_BYTES = 1073741824
#: The guest meter's budgets, compiled into the component (for reference
#: and to size the fuel backstop).
CALL_BUDGET = 50000000000
LOAD_BUDGET = 100000000000
LOAD_BUDGET_PER_INPUT_BYTE = 100000
#: Wasmtime fuel is this many times the guest budget: a backstop the meter
#: always reaches first.
FUEL_BACKSTOP_FACTOR = 2
#: The WIT contract version this package speaks (wit/toolgate.wit).
CONTRACT_VERSION = "0.2.0"
# END limits
