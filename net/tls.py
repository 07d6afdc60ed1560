"""A TLS stream that drives ``ssl.SSLObject`` over memory BIOs itself, in large pieces.

trio's ``SSLStream`` passes through the scheduler at least once per call, hands out one
TLS record (16 KiB) per ``receive_some`` and reads its socket 64 KiB at a time: a 1 MiB
produce or fetch costs dozens of scheduler passes and wake-ups on each side, which is
most of what TLS costs here (the cipher itself runs at GB/s). ``TlsStream`` instead:

- reads the socket in large pieces (``os.readv`` into one reused buffer straight away
  when bytes are there, as net/socket_io.py reads plain sockets; Trio only when it
  must wait) and decrypts every record already received into one buffer, up to
  ``max_bytes`` (and ``DECRYPT_BYTES``): a reader that knows a 1 MiB frame is arriving
  gets all of it that is there in one call, as from a plain socket, not a quarter per
  trip through its loop;
- encrypts what it sends ``WRITE_BYTES`` at a time and writes each piece's records
  with one ``os.write``, again waiting through Trio only when the socket is full.

Any other transport than a plain socket (tests use memory streams) goes through its
own ``receive_some`` / ``send_all``.

Why memory BIOs rather than a non-blocking ``ssl.SSLSocket`` on the socket itself
(OpenSSL reading and writing the descriptor, sparing the copies through the BIOs):
without read-ahead, which Python's ``ssl`` does not offer, OpenSSL reads each record
with two ``read`` calls (its header, then its body) and writes each 16 KiB record with
its own ``write``; measured over loopback, receiving and decrypting took 7-35% more
CPU per MiB that way than one large ``readv`` here, and sending no less. Kernel TLS,
which would spare the copies, needs the kernel's ``tls`` module.

One task reads and one task writes at a time (as with any Trio stream). Both may need
to send: a read can produce TLS records of its own (a key update's answer), so every
transport write holds ``_send_lock`` and drains the outgoing BIO in order.

Errors are Trio's: a TLS failure becomes ``trio.BrokenResourceError`` with the
``ssl.SSLError`` as its cause; a clean close_notify from the peer reads as b"".
"""

from __future__ import annotations

import contextlib
import os
import ssl
import threading
from collections.abc import Callable
from typing import Any, Final, cast

import trio

from minibroker.net import socket_io

TRANSPORT_RECEIVE_BYTES: Final = 256 * 1024
"""Smallest socket read under TLS: what the plaintext paths read at once too."""

MAX_TRANSPORT_RECEIVE_BYTES: Final = 4 * 1024 * 1024
"""Largest socket read (a caller asking for a whole large frame gets it in one)."""

DECRYPT_BYTES: Final = MAX_TRANSPORT_RECEIVE_BYTES
"""Most plaintext one ``receive_some`` returns: the largest the thread's decryption
buffer grows to (it grows only as far as the reads it serves ask)."""

WRITE_BYTES: Final = 256 * 1024
"""Plaintext encrypted per piece before its records are written to the socket."""

_RECORD_SLACK: Final = 17 * 1024
"""A TLS record's worth of bytes (16 KiB and its overhead) that OpenSSL may hold back
inside itself, beyond what its incoming BIO shows."""

_PEER_GONE: Final = (trio.BrokenResourceError, trio.ClosedResourceError)


class TlsStream(trio.abc.Stream):
    """TLS over ``transport`` (see the module docstring); ``do_handshake`` first."""

    def __init__(
        self,
        transport: trio.abc.Stream,
        context: ssl.SSLContext,
        *,
        server_side: bool = False,
        server_hostname: str | None = None,
    ) -> None:
        self.transport = transport
        self._socket = transport if isinstance(transport, trio.SocketStream) else None
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(
            self._incoming,
            self._outgoing,
            server_side=server_side,
            server_hostname=server_hostname,
        )
        # SSLObject.read's C method itself: a 1 MiB read is 64 calls of it, and the
        # Python wrapper around it cost a tenth of the decryption's own time.
        sslobj = getattr(self._tls, "_sslobj", self._tls)
        self._read = cast("Callable[[int, memoryview], int]", sslobj.read)  # into it: a count
        self._send_lock = trio.StrictFIFOLock()
        self._handshake_done = False
        self._closed = False
        self._eof = False
        self._unsent: memoryview | None = None  # encrypted, out of the BIO, not written

    # -- the handshake -----------------------------------------------------------------

    async def do_handshake(self) -> None:
        """Run the TLS handshake (once; later calls return at once). A failure raises
        ``trio.BrokenResourceError`` from the ``ssl.SSLError``; no deadline of its own."""
        if self._handshake_done:
            await trio.lowlevel.checkpoint()
            return
        while True:
            self._check_open()
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                await self._fill(TRANSPORT_RECEIVE_BYTES)
            except ssl.SSLError as exc:
                await self._flush_if_possible()  # the alert that tells the peer why
                raise trio.BrokenResourceError(f"TLS handshake failed: {exc}") from exc
        self._handshake_done = True
        await self._flush()  # the last flight (and a server's session tickets)

    def getpeercert(self, binary_form: bool = False) -> Any:
        return self._tls.getpeercert(binary_form)

    # -- receiving ---------------------------------------------------------------------

    async def receive_some(
        self, max_bytes: int | None = None, *, wait_first: bool = False
    ) -> bytes:
        """Every decrypted byte already received, up to ``max_bytes`` (and
        ``DECRYPT_BYTES``); waits for at least one record. b"" once the peer closed the
        TLS session.

        ``wait_first``: the caller knows the socket has nothing yet (it just tried, or
        it just sent the request whose answer it awaits), so the socket is waited on
        before it is read, as net/socket_io.py's ``receive_some`` does; records
        already buffered are still handed out first.
        """
        size = max_bytes or TRANSPORT_RECEIVE_BYTES
        # A cancel lands before anything is decrypted: bytes handed out of the TLS
        # session and then dropped by a Cancelled would be lost to the next read.
        await trio.lowlevel.checkpoint_if_cancelled()
        if wait_first:
            self._check_open()
            data = self._decrypt(size) if self._buffered() else None
        else:
            data = self.receive_now(size)
        if data is not None:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return data
        while data is None:
            if self._outgoing.pending:
                await self._flush()
            await self._fill(_transport_receive_size(size))
            self._check_open()
            data = self._decrypt(size)
        return data

    def receive_now(self, size: int) -> bytes | None:
        """What ``receive_some(size)`` would return now, without waiting or a scheduler
        pass: the records already received, topped up first by one non-blocking socket
        read when fewer than ``size`` bytes are buffered (as one ``os.read`` of a plain
        socket returns all it has); None when not one whole record is there yet."""
        self._check_open()
        sock = self._socket
        incoming = self._incoming
        if (
            sock is not None
            and not self._eof
            and not incoming.eof
            and not self._outgoing.pending  # what a read made must go out first
            and incoming.pending + self._tls.pending() < size
        ):
            self._receive_into_bio(sock, _transport_receive_size(size))
        return self._decrypt(size)

    def _buffered(self) -> bool:
        """Whether a record may be decryptable without reading the socket: bytes in the
        incoming BIO, or plaintext OpenSSL holds from a record it already decrypted
        (a partial record inside OpenSSL cannot complete without more bytes)."""
        return bool(self._eof or self._incoming.pending or self._tls.pending())

    def _decrypt(self, size: int) -> bytes | None:
        """Decrypt the records already received, up to ``size`` bytes; None when not
        one whole record is there, b"" at the end of the TLS session.

        Records are decrypted into the thread's "decrypted" buffer and handed out as
        ``bytes``: one copy, and the frame decoders keep ``bytes`` as they are (a
        bytearray they copy).
        """
        if self._eof:
            return b""
        room = min(
            size, DECRYPT_BYTES, self._incoming.pending + self._tls.pending() + _RECORD_SLACK
        )
        got = 0
        read = self._read
        with memoryview(_thread_buffer("decrypted", room)) as view:
            while got < room:
                try:
                    n = read(room - got, view[got:room])
                except ssl.SSLWantReadError:
                    break  # the next record is not all here yet
                except ssl.SSLError as exc:
                    if got:
                        break  # what came before the failure first; it raises next time
                    raise trio.BrokenResourceError(f"TLS error: {exc}") from exc
                if n == 0:  # the peer's close_notify
                    self._eof = True
                    break
                got += n
            if not got:
                return b"" if self._eof else None
            return bytes(view[:got])

    async def _fill(self, size: int) -> None:
        """Receive up to ``size`` more encrypted bytes into the incoming BIO (EOF too).
        A socket is waited on before it is read: ``receive_some`` comes here after a
        read found no whole record, so an immediate read would mostly find nothing
        (and when bytes are there, the wait returns at once)."""
        if self._incoming.eof:  # the TLS layer wants more after the connection's end
            raise trio.BrokenResourceError("the connection ended inside a TLS record")
        sock = self._socket
        if sock is not None:
            await trio.lowlevel.wait_readable(sock.socket)
            while not self._receive_into_bio(sock, size):
                await trio.lowlevel.wait_readable(sock.socket)
            return
        data = await self.transport.receive_some(size)
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()

    def _receive_into_bio(self, sock: trio.SocketStream, size: int) -> bool:
        """Move up to ``size`` bytes the socket already has into the incoming BIO (EOF
        too), through the thread's transport buffer: False when it had none."""
        with memoryview(_thread_buffer("transport", size)) as view:
            n = socket_io.receive_into_now(sock, view[:size])
            if n is None:
                return False
            if n:
                self._incoming.write(view[:n])
            else:
                self._incoming.write_eof()
        return True

    # -- sending -----------------------------------------------------------------------

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt and send ``data``, ``WRITE_BYTES`` at a time (after any encrypted
        bytes ``send_now`` left). Like net/socket_io.py's ``send_all``, no scheduler pass
        when the socket takes every piece at once."""
        self._check_open()
        view = memoryview(data)
        await self._flush()
        for start in range(0, len(view), WRITE_BYTES):
            self._encrypt(view[start : start + WRITE_BYTES])
            await self._flush()
        if not view:
            await trio.lowlevel.checkpoint()

    def send_now(self, data: bytes | bytearray | memoryview) -> memoryview | None:
        """Encrypt and write ``data`` piece by piece while the socket takes each piece
        whole, without waiting or a scheduler pass: None once all of it went out, else
        the rest, to send with ``send_all`` (which first sends what was encrypted but
        not written yet)."""
        view = memoryview(data)
        if self._socket is None or self._closed or self._send_lock.locked():
            return view
        if not self._write_now():
            return view
        for start in range(0, len(view), WRITE_BYTES):
            end = start + WRITE_BYTES
            self._encrypt(view[start:end])
            if not self._write_now():
                return view[end:]
        return None

    def _encrypt(self, piece: memoryview) -> None:
        try:
            self._tls.write(piece)
        except ssl.SSLError as exc:
            raise trio.BrokenResourceError(f"TLS error: {exc}") from exc

    def _write_now(self) -> bool:
        """Write the encrypted bytes waiting (those read out of the outgoing BIO but not
        written first) as far as the socket takes them now; True when none are left.
        A plain socket's, by whoever may send (``_send_lock``, or nobody waits on it)."""
        assert self._socket is not None
        while True:
            unsent = self._unsent
            if unsent is None:
                if not self._outgoing.pending:
                    return True
                unsent = memoryview(self._outgoing.read())
            sent = socket_io.write_now(self._socket, unsent)
            if sent < len(unsent):
                self._unsent = unsent[sent:]
                return False
            self._unsent = None

    async def _flush(self) -> None:
        """Send every encrypted byte waiting, in order; a cancelled wait loses none."""
        lock = self._send_lock
        try:
            lock.acquire_nowait()  # uncontended: no scheduler pass
        except trio.WouldBlock:
            await lock.acquire()
        try:
            sock = self._socket
            if sock is None:
                data = self._outgoing.read()
                if data:
                    await self.transport.send_all(data)
                return
            while not self._write_now():
                await trio.lowlevel.wait_writable(sock.socket)
        finally:
            lock.release()

    async def _flush_if_possible(self) -> None:
        with contextlib.suppress(*_PEER_GONE, trio.BusyResourceError):
            await self._flush()

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport.wait_send_all_might_not_block()

    # -- closing -----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Send close_notify if the socket takes it at once (never waiting for the
        peer's), then close the transport."""
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        try:
            # Not in the middle of another send's records (nor of a handshake).
            if self._handshake_done and self._unsent is None and not self._send_lock.locked():
                with contextlib.suppress(ssl.SSLError):  # the peer's close_notify is not awaited
                    self._tls.unwrap()
                data = self._outgoing.read()
                if data and self._socket is not None:
                    with contextlib.suppress(OSError):
                        os.write(self._socket.socket.fileno(), data)
                elif data:
                    with contextlib.suppress(*_PEER_GONE):
                        await self.transport.send_all(data)
        finally:
            await self.transport.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the TLS stream was closed")


_buffers = threading.local()

_BUFFER_START_BYTES: Final = 256 * 1024
"""A thread's first buffers: what small requests and replies need."""


def _thread_buffer(name: str, size: int) -> bytearray:
    """This thread's buffer ``name`` ("transport": ciphertext between the socket and the
    incoming BIO; "decrypted": plaintext out of it), grown (doubling, up to
    ``MAX_TRANSPORT_RECEIVE_BYTES``) to hold ``size`` bytes.

    Nothing awaits while one is in use, so every connection of the thread shares them,
    an idle connection holds none, and a large read allocates nothing per call.
    """
    buffer: bytearray | None = getattr(_buffers, name, None)
    if buffer is None or len(buffer) < size:
        grown = max(size, _BUFFER_START_BYTES, 2 * len(buffer or b""))
        buffer = bytearray(min(grown, MAX_TRANSPORT_RECEIVE_BYTES))
        setattr(_buffers, name, buffer)
    return buffer


def _transport_receive_size(size: int) -> int:
    """How much to read from the socket for ``size`` decrypted bytes."""
    return min(max(size + _RECORD_SLACK, TRANSPORT_RECEIVE_BYTES), MAX_TRANSPORT_RECEIVE_BYTES)
