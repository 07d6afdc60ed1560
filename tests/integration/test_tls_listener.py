"""TLS listeners: BrokerServer with a TLS context (mutual TLS principals, refused
handshakes that leave the server and other clients alone) and a broker whose listener
is SSL, used by the bundled client."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.network.server import BrokerServer
from minibroker.broker.security.security import server_ssl_context
from minibroker.client.admin import Admin
from minibroker.client.cli.dev_certs import LocalCa, issue, make_ca
from minibroker.net.security import client_ssl_context
from minibroker.protocol.frames import encode_frame
from minibroker.protocol.session import Session
from tests.integration.test_broker_server import ScriptedHandler
from tests.support.broker import broker_config, read_frames, running_broker
from tests.support.security import as_key_words, ssl_properties

pytestmark = pytest.mark.timeout(60)

HANDSHAKE_TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The cluster's CA with a broker and a client certificate, and a stranger's CA
    with a client certificate of its own."""
    root = tmp_path_factory.mktemp("pki")
    ca = make_ca(root / "ca")
    other = make_ca(root / "other", name="someone-else")
    broker, client = issue(ca, root, "broker"), issue(ca, root, "client")
    stranger = issue(other, root / "other", "client")
    return {
        "ca": ca.certificate,
        "ca_key": ca.key,
        "broker": broker.certificate,
        "broker_key": broker.key,
        "client": client.certificate,
        "client_key": client.key,
        "stranger": stranger.certificate,
        "stranger_key": stranger.key,
    }


def server_context(pki: dict[str, Path], client_auth: str) -> ssl.SSLContext:
    config = BrokerConfig.from_properties(
        None,
        {
            "ssl.certificate.location": str(pki["broker"]),
            "ssl.key.location": str(pki["broker_key"]),
            "ssl.ca.location": str(pki["ca"]),
            "ssl.client.auth": client_auth,
        },
    )
    return server_ssl_context(config)


@pytest.fixture
async def tls_server(
    pki: dict[str, Path],
) -> AsyncIterator[tuple[BrokerServer, ScriptedHandler]]:
    handler = ScriptedHandler()
    server = BrokerServer(
        handler,
        host="127.0.0.1",
        port=0,
        ssl_context=server_context(pki, "requested"),
        ssl_handshake_timeout_s=HANDSHAKE_TIMEOUT_S,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        yield server, handler
        nursery.cancel_scope.cancel()


async def tls_connect(
    port: int, pki: dict[str, Path], certificate: str | None = None
) -> trio.SSLStream[trio.SocketStream]:
    context = client_ssl_context(
        ca_location=str(pki["ca"]),
        certificate_location=None if certificate is None else str(pki[certificate]),
        key_location=None if certificate is None else str(pki[f"{certificate}_key"]),
    )
    tls = trio.SSLStream(
        await trio.open_tcp_stream("127.0.0.1", port), context, server_hostname="127.0.0.1"
    )
    await tls.do_handshake()
    return tls


async def answered(port: int, pki: dict[str, Path]) -> bool:
    tls = await tls_connect(port, pki)
    await tls.send_all(encode_frame(b"now:ok"))
    frames = await read_frames(tls, 1)
    await tls.aclose()
    return frames == [b"ok"]


async def test_a_client_certificate_makes_its_subject_the_principal(
    tls_server: tuple[BrokerServer, ScriptedHandler], pki: dict[str, Path]
) -> None:
    server, handler = tls_server
    for certificate in ("client", None):
        tls = await tls_connect(server.port, pki, certificate)
        await tls.send_all(encode_frame(b"now:x"))
        assert await read_frames(tls, 1) == [b"x"]
        await tls.aclose()
    assert handler.sessions == [
        Session("User:CN=client,O=minibroker", "127.0.0.1", "PLAINTEXT"),
        Session("User:ANONYMOUS", "127.0.0.1", "PLAINTEXT"),
    ]


@pytest.mark.parametrize(
    "first_bytes",
    [b"\x16\x03\x01\x00\x05garbage-not-a-client-hello", encode_frame(b"now:plaintext")],
    ids=["tls-garbage", "plaintext-request"],
)
async def test_garbage_or_plaintext_on_a_tls_port_is_refused_and_others_are_served(
    tls_server: tuple[BrokerServer, ScriptedHandler], pki: dict[str, Path], first_bytes: bytes
) -> None:
    server, handler = tls_server
    async with await trio.open_tcp_stream("127.0.0.1", server.port) as raw:
        await raw.send_all(first_bytes)
        with trio.fail_after(HANDSHAKE_TIMEOUT_S * 2):
            while await raw.receive_some(4096):
                pass  # a TLS alert at most, then the close
    assert server.closed["tls_handshake"] == 1
    assert handler.sessions == []  # nothing reached the handler
    assert await answered(server.port, pki)


async def test_an_answer_larger_than_the_socket_takes_at_once_arrives_whole_and_in_order(
    tls_server: tuple[BrokerServer, ScriptedHandler], pki: dict[str, Path]
) -> None:
    """A one-buffer answer is encrypted and written by the reader as far as the socket
    takes it; the rest, and the answer after it, follow in order through the writer.
    ``bytes_out`` counts the answers' bytes, not the ciphertext."""
    server, _ = tls_server
    size = 16 * 1024 * 1024  # far beyond loopback socket buffers: written in parts
    tls = await tls_connect(server.port, pki)
    await tls.send_all(encode_frame(f"size:{size}".encode()))
    await trio.testing.wait_all_tasks_blocked()  # the broker wrote what fits, then waits
    await tls.send_all(encode_frame(b"now:after"))
    big, after = await read_frames(tls, 2)
    assert (len(big), after) == (size, b"after")
    await tls.aclose()
    assert server.bytes_out == (4 + size) + (4 + len(b"after"))


async def test_a_client_certificate_from_another_ca_is_refused(
    tls_server: tuple[BrokerServer, ScriptedHandler], pki: dict[str, Path]
) -> None:
    server, handler = tls_server
    # TLS 1.3 reports the server's refusal of a client certificate after the client's
    # handshake ended: the first read fails instead.
    with pytest.raises(trio.BrokenResourceError):
        tls = await tls_connect(server.port, pki, "stranger")
        await tls.send_all(encode_frame(b"now:x"))
        await read_frames(tls, 1)
    assert handler.sessions == []
    assert server.closed["tls_handshake"] == 1
    assert await answered(server.port, pki)


async def test_a_silent_handshake_times_out_without_stalling_other_clients(
    tls_server: tuple[BrokerServer, ScriptedHandler], pki: dict[str, Path]
) -> None:
    server, _ = tls_server
    async with await trio.open_tcp_stream("127.0.0.1", server.port) as silent:
        assert await answered(server.port, pki)  # served while the silent one waits
        with trio.fail_after(HANDSHAKE_TIMEOUT_S * 3):
            assert await silent.receive_some(1) == b""  # closed at the timeout
    assert server.closed["tls_handshake"] == 1


async def test_a_broker_with_an_ssl_listener_serves_the_bundled_client(
    tmp_path: Path, pki: dict[str, Path]
) -> None:
    properties = ssl_properties(LocalCa(pki["ca"], pki["ca_key"]), tmp_path / "certs")
    config = broker_config(
        tmp_path / "logs", listeners="SSL://127.0.0.1:0", **as_key_words(properties)
    )
    async with running_broker(config) as broker:
        async with Admin(
            f"127.0.0.1:{broker.port}", security_protocol="SSL", ssl_ca_location=str(pki["ca"])
        ) as admin:
            cluster = await admin.describe_cluster()
        assert [b.node_id for b in cluster.brokers] == [1]


async def test_the_metrics_endpoint_binds_the_configured_address(tmp_path: Path) -> None:
    config = broker_config(tmp_path / "logs", metrics_port="0", metrics_bind_address="127.0.0.2")
    async with running_broker(config) as broker:
        assert broker.metrics_server is not None
        port = broker.metrics_server.port
        async with await trio.open_tcp_stream("127.0.0.2", port) as scrape:
            await scrape.send_all(b"GET /metrics HTTP/1.0\r\n\r\n")
            assert (await scrape.receive_some(64)).startswith(b"HTTP/1.")
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.1", port)  # not on the listener's address
