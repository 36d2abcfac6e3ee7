"""What the e2e scripts share: named checks, free loopback ports, and the
code of a blocked tool result (its text is the engine's decision JSON)."""

import json
import socket
import time

failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))
    if not ok:
        failures.append(name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def blocked_code(result):
    """The decision code of a blocked result, None when it is not an error
    (`isError` in mcp 1.x, `is_error` in 2.x)."""
    if not (getattr(result, "is_error", False) or getattr(result, "isError", False)):
        return None
    try:
        return json.loads(result.content[0].text)["error"]["code"]
    except (IndexError, KeyError, ValueError, AttributeError):
        return "unreadable"
