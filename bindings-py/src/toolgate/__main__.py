"""``python -m toolgate eval|list``: see :mod:`toolgate.cli`."""

import sys

from .cli import main

sys.exit(main())
