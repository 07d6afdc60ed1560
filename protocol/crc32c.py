"""CRC-32C (Castagnoli), the checksum of RecordBatch v2.

One function, two backends: the ``crc32c`` package (hardware-accelerated, the ``fast``
extra, far faster: docs/performance.md, "Figures behind the code") when it can be
imported, ``crcmod`` otherwise. Both compute the same function;
``tests/unit/protocol/test_crc32c.py`` holds them to each other and to published
answers.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias

import crcmod.predefined

Buffer: TypeAlias = bytes | bytearray | memoryview

# crcmod's predefined "crc-32c": poly 0x1EDC6F41, reflected, init/xorout 0xFFFFFFFF.
_crcmod_crc32c = crcmod.predefined.mkPredefinedCrcFun("crc-32c")

try:
    from crc32c import crc32c as _fast_crc32c
except ImportError:  # the `fast` extra is not installed
    _fast_crc32c = None  # type: ignore[assignment]

BACKEND = "crcmod" if _fast_crc32c is None else "crc32c"


class Crc32cFunction(Protocol):
    def __call__(self, data: Buffer, crc: int = 0, /) -> int: ...


def crc32c_crcmod(data: Buffer, crc: int = 0) -> int:
    """CRC-32C of ``data`` continuing from ``crc``, always computed by crcmod."""
    return int(_crcmod_crc32c(data, crc))


# The hot paths call this once per batch, so it is the backend itself, not a wrapper.
crc32c: Crc32cFunction = crc32c_crcmod if _fast_crc32c is None else _fast_crc32c
"""CRC-32C of ``data`` continuing from ``crc``, by the fastest backend available."""
