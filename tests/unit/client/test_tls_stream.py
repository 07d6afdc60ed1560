"""net/tls.py: a TLS stream returns every record already received per read, byte for
byte what was sent, whether the bytes arrive at once or trickle in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
import trio.testing

from minibroker.broker.config import BrokerConfig
from minibroker.broker.security import server_ssl_context
from minibroker.client.cli.dev_certs import issue, make_ca
from minibroker.net.security import client_ssl_context
from minibroker.net.tls import TlsStream

TLS_RECORD = 16 * 1024


@pytest.fixture(scope="module")
def contexts(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, object]:
    pki = tmp_path_factory.mktemp("pki")
    ca = make_ca(pki)
    issued = issue(ca, pki, "broker")
    server = server_ssl_context(
        BrokerConfig.from_properties(
            None,
            {
                "ssl.certificate.location": str(issued.certificate),
                "ssl.key.location": str(issued.key),
            },
        )
    )
    return server, client_ssl_context(ca_location=str(Path(ca.certificate)))


class Trickle(trio.abc.Stream):
    """A transport that hands over at most 1000 bytes per read: records arrive cut."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.stream.receive_some(min(max_bytes or 1000, 1000))

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()


@pytest.mark.parametrize("trickle", [False, True], ids=["bulk", "trickle"])
async def test_reads_return_whole_buffered_records_and_every_byte(
    contexts: tuple[object, object], trickle: bool
) -> None:
    server_context, client_context = contexts
    left, right = trio.testing.memory_stream_pair()
    transport: trio.abc.Stream = Trickle(left) if trickle else left
    server = TlsStream(transport, server_context, server_side=True)  # type: ignore[arg-type]
    client = TlsStream(right, client_context, server_hostname="127.0.0.1")  # type: ignore[arg-type]
    payload = os.urandom(1024 * 1024)
    received = bytearray()
    sizes: list[int] = []

    async def read_all() -> None:
        while len(received) < len(payload):
            data = await server.receive_some(256 * 1024)
            sizes.append(len(data))
            received.extend(data)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.do_handshake)
        await client.do_handshake()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_all)
        await client.send_all(payload)
    assert bytes(received) == payload
    if not trickle:
        assert max(sizes) > TLS_RECORD  # more than one record per read
