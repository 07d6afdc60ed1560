"""TLS streams that read in large pieces: every record already received per read, and
large reads from the socket underneath.

OpenSSL hands out at most one TLS record (16 KiB) per read, trio's SSLStream reads its
socket 64 KiB at a time, and each ``receive_some`` is a trip through the scheduler: a
1 MiB produce or fetch would cost 64 of them on each side, which is most of what TLS
costs here (the cipher itself runs at GB/s). ``TlsStream`` gives trio's SSLStream a
transport that receives up to ``TRANSPORT_RECEIVE_BYTES`` at once, and its
``receive_some`` takes one record the usual way, then decrypts the records whose bytes
are already buffered, without waiting or yielding, up to ``max_bytes``.

It reads the SSLStream's TLS object (``_ssl_object``) directly, between two of trio's
own calls and never concurrently with one (a connection has one reader), so trio's
state is untouched: only bytes trio already received are decrypted. A record still
incomplete (``SSLWantReadError``) stays buffered for the next call.
"""

from __future__ import annotations

import ssl
from typing import Any, Final

import trio

TRANSPORT_RECEIVE_BYTES: Final = 256 * 1024
"""Socket read size under TLS: what the plaintext paths read at once too."""


class _LargeReads(trio.abc.Stream):
    """The socket stream, read ``TRANSPORT_RECEIVE_BYTES`` at a time by default."""

    def __init__(self, transport: trio.abc.Stream) -> None:
        self.transport = transport

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.transport.receive_some(max_bytes or TRANSPORT_RECEIVE_BYTES)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.transport.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.transport.aclose()


class TlsStream(trio.abc.Stream):
    """A ``trio.SSLStream`` over ``transport`` with the large reads of the module
    docstring; ``do_handshake`` and ``getpeercert`` are the SSLStream's."""

    def __init__(
        self,
        transport: trio.abc.Stream,
        context: ssl.SSLContext,
        *,
        server_side: bool = False,
        server_hostname: str | None = None,
    ) -> None:
        self.tls = trio.SSLStream(
            _LargeReads(transport),
            context,
            server_side=server_side,
            server_hostname=server_hostname,
        )
        self._tls_object: ssl.SSLObject = self.tls._ssl_object

    async def do_handshake(self) -> None:
        await self.tls.do_handshake()

    def getpeercert(self, binary_form: bool = False) -> Any:
        return self.tls.getpeercert(binary_form)

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        first = await self.tls.receive_some(max_bytes)
        if not first or max_bytes is None or len(first) >= max_bytes:
            return first
        parts = [first]
        room = max_bytes - len(first)
        read = self._tls_object.read
        while room > 0:
            try:
                more = read(room)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break  # the next record is not all here yet (or needs a write: trio's job)
            if not more:
                break
            parts.append(more)
            room -= len(more)
        return first if len(parts) == 1 else b"".join(parts)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.tls.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.tls.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.tls.aclose()
