"""Which record codec runs: the compiled one (``_speedups.c``) when it is built, else
the pure-Python one.

Installing the package with a C compiler present builds it (``setup.py``; a failed
build does not fail the install), and so does ``scripts/build-speedups`` in a checkout.
The pure-Python code stays the reference: the compiled functions give up (None) on
anything not plainly well formed and the Python code then decides, so both return the
same records and bytes and raise the same errors. ``MINIBROKER_NO_SPEEDUPS=1`` turns
the compiled path off, to compare the two or to rule it out.
"""

from __future__ import annotations

import os
from types import ModuleType

NO_SPEEDUPS_ENV = "MINIBROKER_NO_SPEEDUPS"
"""Set to anything but "" or "0" to run the pure-Python codec even when the compiled
one is built."""

FUNCTIONS = (
    "decode_records",
    "scan_values",
    "count_records",
    "encode_values",
    "encode_records",
    "batch_header",
)
"""What the Python code calls on the compiled module. A build older than the source
(an in-place ``.so`` left from before a pull) may lack some: it is then not used at
all, rather than failing on the first call, until ``scripts/build-speedups`` runs."""

speedups: ModuleType | None
if os.environ.get(NO_SPEEDUPS_ENV, "") not in ("", "0"):
    speedups = None
else:
    try:
        from minibroker.protocol.records import _speedups as speedups
    except ImportError:  # not built: no compiler, or a checkout without build-speedups
        speedups = None
    if speedups is not None and not all(hasattr(speedups, name) for name in FUNCTIONS):
        speedups = None  # a stale build

BACKEND = "python" if speedups is None else "c"
"""Which record codec runs: "c" or "python"."""
