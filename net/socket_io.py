"""Socket reads and writes that skip Trio's scheduler pass when the kernel answers at once.

Trio's ``SocketStream.send_all`` and ``receive_some`` yield to the scheduler after every
successful system call (a checkpoint, so that no loop of them can starve other tasks).
On a small request's round trip that pass is a good part of the cost: a one-record
produce went through the scheduler four times. These functions call ``os.write`` /
``os.read`` on the socket directly and only involve Trio when the kernel cannot answer
now (``wait_readable`` / ``send_all``, both checkpoints). Callers that may loop on them
without waiting keep their own checkpoints (the broker's read loop yields every few
frames; the client's reader stops at its own response).

Errors are Trio's: an OSError of the socket becomes ``trio.BrokenResourceError`` (a
closed socket ``trio.ClosedResourceError``), chained, as the stream methods raise.
"""

from __future__ import annotations

import errno
import os
import select
from collections.abc import Sequence

import trio

from minibroker.protocol.schemas.packing import Buffer


def _stream_error(exc: OSError) -> trio.BrokenResourceError | trio.ClosedResourceError:
    if exc.errno == errno.EBADF:
        return trio.ClosedResourceError("the socket was closed")
    return trio.BrokenResourceError(f"socket error: {exc}")


def write_now(stream: trio.SocketStream, data: Buffer) -> int:
    """Write what the socket takes of ``data`` now; returns how many bytes (maybe 0)."""
    return write_fd_now(stream.socket.fileno(), data)


def write_fd_now(fd: int, data: Buffer) -> int:
    """``write_now`` on the socket's descriptor, for a caller that keeps it (a lookup
    less on a path taken once per small request)."""
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0
    except OSError as exc:
        raise _stream_error(exc) from exc


async def send_all(stream: trio.abc.Stream, data: Buffer) -> None:
    """``stream.send_all(data)``; no scheduler pass when the kernel takes it all at once.
    Any other stream than a plain socket (TLS) is written through its own ``send_all``.

    Like Trio's, not safe for two tasks at once on one stream: callers serialise writes.
    """
    if not isinstance(stream, trio.SocketStream):
        await stream.send_all(data)
        return
    sent = write_now(stream, data)
    if sent < len(data):
        await stream.send_all(memoryview(data)[sent:])


IOV_MAX = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 1024
"""Most buffers one writev takes (Linux: 1024); the rest wait for the next call."""


def write_buffers_now(stream: trio.SocketStream, buffers: Sequence[Buffer]) -> list[Buffer]:
    """Write what the socket takes now of ``buffers``, in order, in one system call
    (writev); returns what is left, the first one cut where the write stopped. Bytes
    after a large buffer leave with its last bytes instead of in a write of their own,
    which the reader would wait for separately."""
    if not buffers:
        return []  # nothing to send (acks=0 produce answers): no system call
    try:
        sent = os.writev(stream.socket.fileno(), buffers[:IOV_MAX])
    except BlockingIOError:
        return list(buffers)
    except OSError as exc:
        raise _stream_error(exc) from exc
    for i, buf in enumerate(buffers):
        size = buf.nbytes if isinstance(buf, memoryview) else len(buf)
        if sent < size:
            return [memoryview(buf)[sent:], *buffers[i + 1 :]]
        sent -= size
    return []


def receive_now(stream: trio.SocketStream, size: int) -> bytes | None:
    """Up to ``size`` bytes already received (b"" at EOF), or None when none are there."""
    return read_fd_now(stream.socket.fileno(), size)


def readable_now(fd: int) -> bool:
    """Whether ``fd`` has bytes (or an end of stream) to read, without waiting. poll(),
    not select(): select() cannot watch descriptors of 1024 and above, which a broker
    holding many log segments opens its sockets on."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def read_fd_now(fd: int, size: int) -> bytes | None:
    """``receive_now`` on the socket's descriptor, for a caller that keeps it."""
    try:
        return os.read(fd, size)
    except BlockingIOError:
        return None
    except OSError as exc:
        raise _stream_error(exc) from exc


def receive_into_now(stream: trio.SocketStream, buffer: memoryview) -> int | None:
    """Read what is already received into ``buffer`` (no allocation): how many bytes,
    0 at EOF, None when none are there."""
    try:
        return os.readv(stream.socket.fileno(), [buffer])
    except BlockingIOError:
        return None
    except OSError as exc:
        raise _stream_error(exc) from exc


async def receive_some(
    stream: trio.abc.Stream, size: int, *, wait_first: bool = False
) -> bytes | bytearray:
    """``stream.receive_some(size)``; no scheduler pass when bytes are already there.
    Any other stream than a plain socket (TLS) is read through its own ``receive_some``.

    ``wait_first``: the caller knows nothing is there yet (it just tried, or it just sent
    the request whose answer it awaits), so the read starts by waiting: an attempt that
    would fail costs a system call and an exception.
    """
    if not isinstance(stream, trio.SocketStream):
        return await stream.receive_some(size)
    data = None if wait_first else receive_now(stream, size)
    while data is None:
        await trio.lowlevel.wait_readable(stream.socket)
        data = receive_now(stream, size)
    return data
