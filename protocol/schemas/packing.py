"""A small msgpack writer that keeps large binary values out of the packed buffer.

``msgpack.packb`` copies every ``bin`` value into its output. A Fetch response carries
record data that lives in mmap-ed segment files (memoryviews, up to the fetch's
max_bytes); copying it into a packed buffer only to hand it to ``send`` would double the
bytes touched. ``pack_buffers`` writes the same msgpack bytes as ``packb`` (same type
choices: smallest int encoding, str8 allowed, bin types, float64) but ends the current
buffer at each binary value of at least ``SPLICE_MIN_BYTES`` and puts the value itself
in the list, untouched. Concatenating the returned buffers gives exactly
``msgpack.packb(obj)``.

Supported input: None, bool, int (and IntEnum), float, str, bytes, bytearray,
memoryview (C-contiguous), dict, list, tuple. Anything else raises ``TypeError``.
"""

from __future__ import annotations

import struct
from typing import Any, Final

SPLICE_MIN_BYTES: Final = 32 * 1024
"""Binary values from this size are sent as their own buffer; smaller ones are copied
(a memcpy of a few KiB is cheaper than the extra send call a separate buffer costs)."""

Buffer = bytes | bytearray | memoryview

_B = struct.Struct(">B").pack
_H = struct.Struct(">BH").pack
_I = struct.Struct(">BI").pack
_Q = struct.Struct(">BQ").pack
_b = struct.Struct(">Bb").pack
_h = struct.Struct(">Bh").pack
_i = struct.Struct(">Bi").pack
_q = struct.Struct(">Bq").pack
_d = struct.Struct(">Bd").pack


def _int(v: int) -> bytes:
    """Mirror msgpack-c's choice: fixint, then the narrowest signed or unsigned form."""
    if -32 <= v < 128:
        return _B(v & 0xFF)
    if v < 0:
        if v >= -128:
            return _b(0xD0, v)
        if v >= -32768:
            return _h(0xD1, v)
        if v >= -2147483648:
            return _i(0xD2, v)
        return _q(0xD3, v)
    if v < 0x100:
        return _B(0xCC) + _B(v)
    if v < 0x10000:
        return _H(0xCD, v)
    if v < 0x100000000:
        return _I(0xCE, v)
    return _Q(0xCF, v)


def _str_header(n: int) -> bytes:
    if n < 32:
        return _B(0xA0 | n)
    if n < 0x100:
        return _B(0xD9) + _B(n)
    if n < 0x10000:
        return _H(0xDA, n)
    return _I(0xDB, n)


def _bin_header(n: int) -> bytes:
    if n < 0x100:
        return _B(0xC4) + _B(n)
    if n < 0x10000:
        return _H(0xC5, n)
    return _I(0xC6, n)


def _map_header(n: int) -> bytes:
    if n < 16:
        return _B(0x80 | n)
    if n < 0x10000:
        return _H(0xDE, n)
    return _I(0xDF, n)


def _array_header(n: int) -> bytes:
    if n < 16:
        return _B(0x90 | n)
    if n < 0x10000:
        return _H(0xDC, n)
    return _I(0xDD, n)


class _Writer:
    __slots__ = ("out", "pieces", "splice_min")

    def __init__(self, splice_min: int, reserve: int) -> None:
        self.splice_min = splice_min
        self.out = bytearray(reserve)
        self.pieces: list[Buffer] = []

    def write(self, obj: Any) -> None:
        t = type(obj)
        out = self.out
        if t is int:
            out += _int(obj)
        elif t is str:
            data = obj.encode()
            out += _str_header(len(data))
            out += data
        elif t is dict:
            out += _map_header(len(obj))
            write = self.write
            for key, value in obj.items():
                write(key)
                write(value)
        elif t is list or t is tuple:
            out += _array_header(len(obj))
            write = self.write
            for item in obj:
                write(item)
        elif t is bytes or t is bytearray or t is memoryview:
            n = obj.nbytes if t is memoryview else len(obj)
            out += _bin_header(n)
            if n >= self.splice_min:
                self.pieces.append(out)
                self.pieces.append(obj)
                self.out = bytearray()
            else:
                out += obj
        elif obj is None:
            out += b"\xc0"
        elif obj is True:
            out += b"\xc3"
        elif obj is False:
            out += b"\xc2"
        elif t is float:
            out += _d(0xCB, obj)
        elif isinstance(obj, int):  # IntEnum and friends: packb packs them as ints
            out += _int(int(obj))
        else:
            raise TypeError(f"cannot serialize {obj!r} of type {t.__name__}")

    def finish(self) -> list[Buffer]:
        if self.out or not self.pieces:
            self.pieces.append(self.out)
        return self.pieces


def pack_buffers(
    obj: Any, *, splice_min: int = SPLICE_MIN_BYTES, length_prefix: bool = False
) -> list[Buffer]:
    """``msgpack.packb(obj)`` as a list of buffers; large binary values are not copied.

    With ``length_prefix`` the first buffer starts with the int32 big-endian length of
    everything after it: the buffers are then one whole frame (protocol/frames.py).
    """
    writer = _Writer(splice_min, 4 if length_prefix else 0)
    writer.write(obj)
    pieces = writer.finish()
    if length_prefix:
        total = sum(len(p) if type(p) is not memoryview else p.nbytes for p in pieces) - 4
        first = pieces[0]
        assert isinstance(first, bytearray)
        struct.pack_into(">i", first, 0, total)
    return pieces
