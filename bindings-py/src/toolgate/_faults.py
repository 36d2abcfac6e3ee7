"""Decisions the host builds itself when the component cannot decide (SPEC §7).

Exact bytes of ``tests/vectors/host-faults.json``; a test checks they match.
"""

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
}

MAX_INPUT_BYTES = 4194304
