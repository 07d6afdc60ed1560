"""``python -m minibroker``: the ``minibroker`` command (command/main.py), as the
console script runs it."""

import sys

from minibroker.command.main import main

sys.exit(main())
