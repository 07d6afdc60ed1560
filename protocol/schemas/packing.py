"""A small msgpack writer that keeps large binary values out of the packed buffer.

``msgpack.packb`` copies every ``bin`` value into its output. A Fetch response carries
record data that lives in mmap-ed segment files (memoryviews, up to the fetch's
max_bytes); copying it into a packed buffer only to hand it to ``send`` would double the
bytes touched. ``pack_buffers`` writes the same msgpack bytes as ``packb`` but ends the
current buffer at each binary value of at least ``SPLICE_MIN_BYTES`` and puts the value
itself in the list, untouched. Concatenating the returned buffers gives exactly
``msgpack.packb(obj)``: containers holding a large binary get their headers written
here (the same narrowest-form choice msgpack makes), everything else is packed by
msgpack itself.

Supported input: None, bool, int (and IntEnum), float, str, bytes, bytearray,
memoryview (C-contiguous), dict, list, tuple. Anything else raises ``TypeError``.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import msgpack

SPLICE_MIN_BYTES: Final = 32 * 1024
"""Binary values from this size are sent as their own buffer; smaller ones are copied
(a memcpy of a few KiB is cheaper than the extra send call a separate buffer costs)."""

Buffer = bytes | bytearray | memoryview

_packb = msgpack.Packer(autoreset=True).pack
_PREFIX = struct.Struct(">i")
_B = struct.Struct(">B").pack
_H = struct.Struct(">BH").pack
_I = struct.Struct(">BI").pack


def bin_header(n: int) -> bytes:
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


_SCALARS: Final = frozenset({int, str, float, bool, type(None)})
_BINARY: Final = frozenset({bytes, bytearray, memoryview})
_CONTAINERS: Final = frozenset({dict, list, tuple})


def _holds_large_binary(obj: Any, splice_min: int) -> bool:
    """Whether a binary value of ``splice_min`` bytes or more hides anywhere in ``obj``."""
    t = type(obj)
    if t in _BINARY:
        return (obj.nbytes if t is memoryview else len(obj)) >= splice_min
    for v in obj.values() if t is dict else obj if t is list or t is tuple else ():
        tv = type(v)
        if tv in _CONTAINERS:
            if _holds_large_binary(v, splice_min):
                return True
        elif tv in _BINARY and (v.nbytes if tv is memoryview else len(v)) >= splice_min:
            return True
    return False


class _Writer:
    """Walks the containers of a message that holds a large binary value. Each run of
    neighbouring plain entries (scalars, small binaries) is packed by ``msgpack`` in one
    C call, as a container of their own whose header is then cut off; containers get
    their headers here and are walked in turn."""

    __slots__ = ("out", "pieces", "splice_min")

    def __init__(self, splice_min: int, reserve: int) -> None:
        self.splice_min = splice_min
        self.out = bytearray(reserve)
        self.pieces: list[Buffer] = []

    def _run(self, container: dict[Any, Any] | list[Any]) -> None:
        """Append the entries of ``container`` packed by msgpack, without its header."""
        packed = _packb(container)
        n = len(container)
        self.out += memoryview(packed)[1 if n < 16 else 3 if n < 0x10000 else 5 :]

    def write(self, obj: Any) -> None:
        t = type(obj)
        splice_min = self.splice_min
        if t is dict:
            self.out += _map_header(len(obj))
            run: dict[Any, Any] = {}
            for key, v in obj.items():
                tv = type(v)  # plain: packed with its neighbours by msgpack
                if tv in _SCALARS or (
                    tv in _BINARY and (v.nbytes if tv is memoryview else len(v)) < splice_min
                ):
                    run[key] = v
                    continue
                if run:
                    self._run(run)
                    run = {}
                self.out += _packb(key)
                self.write(v)
            if run:
                self._run(run)
        elif t is list or t is tuple:
            self.out += _array_header(len(obj))
            items: list[Any] = []
            for item in obj:
                ti = type(item)
                if ti in _SCALARS or (
                    ti in _BINARY and (item.nbytes if ti is memoryview else len(item)) < splice_min
                ):
                    items.append(item)
                    continue
                if items:
                    self._run(items)
                    items = []
                self.write(item)
            if items:
                self._run(items)
        elif t in _BINARY:
            n = obj.nbytes if t is memoryview else len(obj)
            if n >= splice_min:
                self.out += bin_header(n)
                self.pieces.append(self.out)
                self.pieces.append(obj)
                self.out = bytearray()
            else:
                self.out += _packb(obj)
        else:
            self.out += _packb(obj)  # scalars, IntEnum; packb raises TypeError on the rest

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
    if not _holds_large_binary(obj, splice_min):  # the common case: one C call
        packed = _packb(obj)
        return [_PREFIX.pack(len(packed)) + packed if length_prefix else packed]
    writer = _Writer(splice_min, 4 if length_prefix else 0)
    writer.write(obj)
    pieces = writer.finish()
    if length_prefix:
        total = sum(len(p) if type(p) is not memoryview else p.nbytes for p in pieces) - 4
        first = pieces[0]
        assert isinstance(first, bytearray)
        struct.pack_into(">i", first, 0, total)
    return pieces
