"""Sans-IO frame codec: a byte stream in, whole frames out.

Byte format (docs/architecture.md, "Wire formats")::

    +----------------------+-----------------+
    | length N (int32, BE) | N payload bytes |
    +----------------------+-----------------+

A negative N, or an N above ``max_frame_bytes`` (the broker's
``socket.request.max.bytes``), is a protocol violation: the decoder raises
``FrameError`` and the caller closes that one connection. The decoder never guesses
how to resynchronise; after a ``FrameError`` it stays broken.

How this works: ``feed`` appends the bytes as received, keeping them as a list of
chunks (no copy of earlier data, so a 100 MiB frame arriving in 64 KiB pieces costs
one join, not a quadratic series of concatenations). ``next_frame`` reads the length
prefix and, once the whole payload is buffered, returns it as ``bytes``:

- many tiny frames inside one received chunk are sliced straight out of that chunk;
- a frame spread over several chunks is joined once, exactly the bytes it needs;
- a prefix split across chunks is re-assembled from the few bytes involved;
- a reader that knows a frame will be large may receive the rest of it straight into
  the frame's own buffer (``frame_buffer`` / ``received``): no chunk is kept and no
  join made, and ``next_frame`` then returns that ``bytearray``.

Like h11, this module never reads or writes a socket: the Trio code around it owns
the I/O (``net/connection.py``, the broker's server).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from typing import Final

from minibroker.protocol.errors import MinibrokerError

DEFAULT_MAX_FRAME_BYTES: Final = 104_857_600
"""Kafka's default ``socket.request.max.bytes`` (100 MiB)."""

PREFIX_SIZE: Final = 4
"""Bytes of the big-endian int32 length prefix."""

_PREFIX = struct.Struct(">i")
_unpack_prefix = _PREFIX.unpack_from


class _NeedData:
    """Type of the ``NEED_DATA`` sentinel (a class so mypy can narrow on it)."""

    _instance: _NeedData | None = None

    def __new__(cls) -> _NeedData:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NEED_DATA"

    def __reduce__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()
"""Returned by ``FrameDecoder.next_frame`` when no whole frame is buffered yet."""


class FrameError(MinibrokerError):
    """The byte stream is not a valid frame sequence: close this connection."""


frame_prefix: Callable[[int], bytes] = _PREFIX.pack
"""``frame_prefix(n)``: the 4-byte length prefix of an ``n``-byte payload (for
writev-style sends). The Struct's own method: no Python call per response."""


def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """One frame: the length prefix followed by ``payload``."""
    return _PREFIX.pack(len(payload)) + payload


class FrameDecoder:
    """Turns received bytes into frame payloads; see the module docstring.

    Not thread- or task-safe: one decoder per connection, used by its one reader.
    """

    __slots__ = (
        "_broken",
        "_buffered",
        "_chunks",
        "_frame",
        "_frame_len",
        "_head",
        "max_frame_bytes",
    )

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError(f"max_frame_bytes must be >= 0, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self._chunks: deque[bytes] = deque()
        self._head = 0  # bytes of _chunks[0] already consumed
        self._buffered = 0  # unconsumed bytes over all chunks
        self._frame_len = -1  # payload length of the frame in progress, -1 before prefix
        self._broken = False
        # The frame in progress's own buffer once ``frame_buffer`` made it: its first
        # ``_buffered`` bytes are in, and ``_chunks`` is empty until it is returned.
        self._frame: bytearray | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as (part of) a frame."""
        return self._buffered + (PREFIX_SIZE if self._frame_len >= 0 else 0)

    @property
    def bytes_needed(self) -> int:
        """At least this many more bytes are needed before the next frame completes.

        A reader may use it to size its next receive (one large read for a large
        frame instead of many small ones). 0 means a frame is ready.
        """
        if self._frame_len < 0:
            return max(PREFIX_SIZE - self._buffered, 0)
        return max(self._frame_len - self._buffered, 0)

    @property
    def frame_length(self) -> int | None:
        """Payload length of the frame being received once its prefix is in, else None.

        A reader that budgets memory can reserve the whole frame when it learns its
        size, as Kafka's broker does with its request memory pool.
        """
        return self._frame_len if self._frame_len >= 0 else None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes (an empty ``data`` is ignored, not end of stream)."""
        if self._frame is not None:
            raise ValueError("feed() while a frame is received into its frame_buffer")
        if data:
            # Keep immutable bytes only: the caller may reuse its bytearray buffer.
            chunk = data if type(data) is bytes else bytes(data)
            self._chunks.append(chunk)
            self._buffered += len(chunk)

    def whole_frame(self, data: bytes) -> bytes | None:
        """The payload of ``data`` when it is exactly one frame and nothing is buffered
        (a send-and-wait client's request: the usual read), without keeping it as a
        chunk; None otherwise, and then ``data`` is the caller's to ``feed``."""
        if self._buffered or self._frame_len >= 0 or len(data) < PREFIX_SIZE or self._broken:
            return None
        n = _unpack_prefix(data, 0)[0]
        if n != len(data) - PREFIX_SIZE or n > self.max_frame_bytes:
            return None
        return data[PREFIX_SIZE:]

    def frame_buffer(self) -> memoryview | None:
        """Where the rest of the frame in progress may be received: a view of its own
        buffer past the bytes already in it, for a reader that would otherwise feed a
        large frame chunk by chunk (and have it joined). None unless the frame's length
        is known and bytes of it are missing. After writing ``n`` bytes into the view,
        call ``received(n)``; ``next_frame`` returns the frame, a ``bytearray``, once
        it is whole. Nothing may be fed meanwhile."""
        if self._broken or self._frame_len < 0 or self._buffered >= self._frame_len:
            return None
        if self._frame is None:
            # Only the frame's own bytes are buffered (it is incomplete): move them in.
            frame = bytearray(self._frame_len)
            held = self._buffered
            frame[:held] = self._take(held)
            self._buffered = held
            self._frame = frame
        return memoryview(self._frame)[self._buffered :]

    def received(self, n: int) -> None:
        """``n`` more bytes were written into the view ``frame_buffer`` gave."""
        if self._frame is None or n < 0 or self._buffered + n > self._frame_len:
            raise ValueError(f"received({n}) without room for it in a frame buffer")
        self._buffered += n

    def next_frame(self) -> bytes | bytearray | _NeedData:
        """The next whole frame's payload, or ``NEED_DATA``; raises ``FrameError``. A
        frame received through ``frame_buffer`` is returned as that ``bytearray``."""
        if self._broken:
            raise FrameError("frame stream already failed")
        if self._frame is not None:
            if self._buffered < self._frame_len:
                return NEED_DATA
            frame, self._frame = self._frame, None
            self._frame_len = -1
            self._buffered = 0
            return frame
        if self._frame_len < 0:
            if self._buffered < PREFIX_SIZE:
                return NEED_DATA
            first = self._chunks[0]
            if len(first) - self._head >= PREFIX_SIZE:  # the usual case: no slice needed
                n = _unpack_prefix(first, self._head)[0]
                self._head += PREFIX_SIZE
                self._buffered -= PREFIX_SIZE
                if self._head == len(first):
                    self._chunks.popleft()
                    self._head = 0
            else:
                n = _PREFIX.unpack(self._take(PREFIX_SIZE))[0]
            if n < 0 or n > self.max_frame_bytes:
                self._broken = True
                raise FrameError(
                    f"frame length {n} outside 0..{self.max_frame_bytes} (socket.request.max.bytes)"
                )
            self._frame_len = n
        n = self._frame_len
        if self._buffered < n:
            return NEED_DATA
        self._frame_len = -1
        return self._take(n)

    def _take(self, n: int) -> bytes:
        """Remove and return the next ``n`` buffered bytes (caller checked they exist)."""
        if n == 0:
            return b""
        chunks = self._chunks
        first = chunks[0]
        head = self._head
        end = head + n
        self._buffered -= n
        if end < len(first):
            self._head = end
            return first[head:end]
        if end == len(first):
            chunks.popleft()
            self._head = 0
            return first if head == 0 else first[head:]
        # The frame spans chunks: gather exactly its pieces and join them once.
        pieces = [memoryview(first)[head:]]
        chunks.popleft()
        remaining = n - (len(first) - head)
        while remaining:
            chunk = chunks[0]
            if len(chunk) <= remaining:
                pieces.append(memoryview(chunk))
                chunks.popleft()
                remaining -= len(chunk)
                self._head = 0
            else:
                pieces.append(memoryview(chunk)[:remaining])
                self._head = remaining
                remaining = 0
        return b"".join(pieces)
