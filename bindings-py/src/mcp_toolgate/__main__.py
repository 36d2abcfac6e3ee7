"""``python -m mcp_toolgate``: see :mod:`mcp_toolgate.cli` (``eval``/``list`` here,
every other command the native binary)."""

import sys

from .cli import run

sys.exit(run())
