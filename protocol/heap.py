"""Keep freed memory in the process heap rather than handing it back to the kernel.

Brokers and clients allocate and free a multi-megabyte buffer for every large frame: a
1 MiB produce request, a 4 MiB fetch response, the records section copied out of it.
glibc's malloc serves a large allocation with its own ``mmap`` and trims the top of the
heap whenever more than ``M_TRIM_THRESHOLD`` (128 KiB) is free, so each new frame's
pages are faulted in again one at a time. Measured on this project's hot paths, that
churn nearly doubled the cost of decoding a large batch and held a single broker's
produce rate to about a third (docs/performance.md, "Figures behind the code").

``keep_freed_memory()`` raises both thresholds once per process, so large buffers come
from the heap and freed ones stay there for the next frame. The cost is resident memory:
up to ``TRIM_THRESHOLD`` of free heap may stay mapped. Elsewhere (another libc, or no
``mallopt``) it does nothing.
"""

from __future__ import annotations

import ctypes
import sys

# mallopt parameter numbers from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

# Allocations below this come from the heap: above the largest frames the hot paths
# handle (a 4 MiB fetch response, a 1 MiB batch), well under socket.request.max.bytes.
MMAP_THRESHOLD = 32 * 1024 * 1024
# Free memory at the top of the heap kept for reuse: a few in-flight large frames' worth.
TRIM_THRESHOLD = 128 * 1024 * 1024

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Tune glibc's malloc for large short-lived buffers; True if it was applied.

    Idempotent and cheap after the first call, so every entry point (broker, producer,
    consumer, CLI) calls it.
    """
    global _applied
    if _applied is None:
        _applied = _apply()
    return _applied


def _apply() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The interpreter's own symbols include its C library's: no library search
        # (ctypes.util.find_library runs ldconfig, milliseconds for every CLI call).
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt): nothing to tune
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 when the value is refused.
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
