"""SASL logins on a SASL_PLAINTEXT listener of a real cluster-mode broker (ZooKeeper,
controller, the broker's own login for inter-broker requests): good logins are served
with their principal, bad ones are refused, counted and closed, and nothing else gets
through before a login."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import trio

from minibroker.client.admin import Admin
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey, RequestHeader, decode_response, encode_request
from minibroker.protocol.errors import SaslAuthenticationFailedError
from minibroker.protocol.frames import encode_frame
from minibroker.protocol.kafka import codec as kafka_codec
from minibroker.protocol.sasl import SaslClient
from minibroker.zk.client import ZkClient
from tests.support.broker import WireClient
from tests.support.security import (
    BROKER_PASSWORD,
    BROKER_USER,
    add_user,
    sasl_properties,
    secured_node,
)

pytestmark = pytest.mark.timeout(90)


def login(mechanism: str, user: str = "alice", password: str = "alice-pw") -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", None, mechanism, user, password)


async def metadata_works(port: int, security: ClientSecurity) -> bool:
    async with Connection("127.0.0.1", port, security=security) as conn:
        body = await conn.request(ApiKey.METADATA, {"topics": []})
    return bool(body["brokers"])


async def users(zk: ZkClient) -> None:
    await add_user(zk, BROKER_USER, BROKER_PASSWORD)
    await add_user(zk, "alice", "alice-pw")


async def test_each_mechanism_logs_in_and_the_broker_serves_its_requests(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    await users(zk_client)
    async with secured_node(tmp_path, zk_connect, sasl_properties()) as broker:
        for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            assert await metadata_works(broker.port, login(mechanism))
        # The controller reached this broker with the broker's own login: topics work.
        async with Admin(
            f"127.0.0.1:{broker.port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username="alice",
            sasl_password="alice-pw",
        ) as admin:
            await admin.create_topic("t", partitions=2, replication_factor=1)
            assert {p.partition for p in (await admin.describe_topics(["t"]))[0].partitions} == {
                0,
                1,
            }
        assert broker.parts.server.sasl is not None
        assert broker.parts.server.sasl.succeeded["SCRAM-SHA-512"] >= 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("SCRAM-SHA-256", "alice", "wrong"),
        ("SCRAM-SHA-512", "mallory", "alice-pw"),
        ("PLAIN", "alice", "wrong"),
        ("PLAIN", "mallory", "whatever"),
    ],
    ids=["scram-wrong-password", "scram-unknown-user", "plain-wrong-password", "plain-unknown"],
)
async def test_a_wrong_password_or_unknown_user_is_refused_counted_and_others_unaffected(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient, mechanism: str, user: str, password: str
) -> None:
    await users(zk_client)
    async with secured_node(tmp_path, zk_connect, sasl_properties()) as broker:
        async with Connection("127.0.0.1", broker.port, security=login(mechanism)) as good:
            with pytest.raises(SaslAuthenticationFailedError) as refused:
                await Connection(
                    "127.0.0.1", broker.port, security=login(mechanism, user, password)
                ).connect()
            assert "invalid credentials" in str(refused.value)
            assert user not in str(refused.value)  # nothing that helps guessing
            # The connection that logged in before is still served, and new logins work.
            assert (await good.request(ApiKey.METADATA, {"topics": []}))["brokers"]
        assert await metadata_works(broker.port, login(mechanism))
        assert broker.parts.server.sasl.failed[mechanism] == 1  # type: ignore[union-attr]
        assert broker.parts.server.closed["authentication"] == 1
        metrics = broker.metrics.render().decode()
        assert (
            "kafka_server_socket_server_metrics_failed_authentication_total"
            f'{{listener="SASL_PLAINTEXT",mechanism="{mechanism}"}} 1.0'
        ) in metrics


async def _raw_request(
    stream: trio.SocketStream, api_key: int, body: dict[str, object], correlation_id: int
) -> dict[str, object]:
    client = WireClient(stream)
    await client.send_request(api_key, body, version=0, correlation_id=correlation_id)
    frame = await client.receive_frame()
    assert frame is not None, "the broker closed the connection"
    _, answer = decode_response(frame, api_key, 0)
    return dict(answer)


async def test_a_replayed_scram_client_final_is_refused_on_a_new_connection(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    await users(zk_client)
    async with secured_node(tmp_path, zk_connect, sasl_properties()) as broker:
        # An eavesdropper records a good exchange ...
        stream = await trio.open_tcp_stream("127.0.0.1", broker.port)
        scram = SaslClient("SCRAM-SHA-256", "alice", "alice-pw")
        await _raw_request(stream, ApiKey.SASL_HANDSHAKE, {"mechanism": "SCRAM-SHA-256"}, 1)
        first = scram.first()
        server_first = await _raw_request(
            stream, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": first}, 2
        )
        final = scram.step(server_first["auth_bytes"])  # type: ignore[arg-type]
        assert final is not None
        answer = await _raw_request(stream, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": final}, 3)
        assert answer["error_code"] == 0
        await stream.aclose()
        # ... and replays it: the broker's new nonce makes the old proof worthless.
        replay = await trio.open_tcp_stream("127.0.0.1", broker.port)
        await _raw_request(replay, ApiKey.SASL_HANDSHAKE, {"mechanism": "SCRAM-SHA-256"}, 1)
        await _raw_request(replay, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": first}, 2)
        answer = await _raw_request(replay, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": final}, 3)
        assert answer["error_code"] == SaslAuthenticationFailedError.code
        assert await replay.receive_some(1) == b""  # closed
        assert await metadata_works(broker.port, login("SCRAM-SHA-256"))


async def test_a_request_before_the_login_gets_illegal_sasl_state_and_the_connection_closes(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    await users(zk_client)
    async with secured_node(tmp_path, zk_connect, sasl_properties()) as broker:
        stream = await trio.open_tcp_stream("127.0.0.1", broker.port)
        # ApiVersions is allowed before the login, anything else is not.
        versions = await _raw_request(stream, ApiKey.API_VERSIONS, {}, 1)
        assert versions["error_code"] == 0
        answer = await _raw_request(
            stream, ApiKey.CREATE_TOPICS, {"topics": [], "timeout_ms": 1}, 2
        )
        assert answer["error_code"] == 34  # ILLEGAL_SASL_STATE
        assert await stream.receive_some(1) == b""
        # A token before any handshake is out of order too.
        stream = await trio.open_tcp_stream("127.0.0.1", broker.port)
        payload = encode_request(ApiKey.SASL_AUTHENTICATE, 0, 7, "x", {"auth_bytes": b"n,,"})
        await stream.send_all(encode_frame(payload))
        frame = await WireClient(stream).receive_frame()
        assert frame is not None
        assert decode_response(frame, ApiKey.SASL_AUTHENTICATE, 0)[1]["error_code"] == 34
        assert await metadata_works(broker.port, login("PLAIN"))


async def _kafka_exchange(
    stream: trio.SocketStream, api_key: int, version: int, body: dict[str, object], cid: int
) -> dict[str, object]:
    await stream.send_all(
        kafka_codec.encode_request(RequestHeader(api_key, version, cid, "t"), body)
    )
    frame = await WireClient(stream).receive_frame()
    assert frame is not None, "the broker closed the connection"
    correlation_id, answer = kafka_codec.decode_response(frame, api_key, version)
    assert correlation_id == cid
    return dict(answer)


async def test_the_kafka_listener_takes_handshake_v0_with_raw_tokens_and_then_serves(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    await users(zk_client)
    props = {
        **sasl_properties(),
        "kafka.listeners": "127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,KAFKA:SASL_PLAINTEXT",
    }
    async with secured_node(tmp_path, zk_connect, props) as broker:
        assert broker.parts.kafka_server is not None
        stream = await trio.open_tcp_stream("127.0.0.1", broker.parts.kafka_server.port)
        handshake = await _kafka_exchange(
            stream, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}, 1
        )
        assert handshake["error_code"] == 0
        token = b"\x00alice\x00alice-pw"
        await stream.send_all(struct.pack(">i", len(token)) + token)  # no request header
        assert await WireClient(stream).receive_frame() == b""  # PLAIN's empty answer
        metadata = await _kafka_exchange(stream, ApiKey.METADATA, 1, {"topics": []}, 2)
        assert metadata["brokers"]
        # After the login, another handshake reaches the dispatcher: ILLEGAL_SASL_STATE.
        again = await _kafka_exchange(stream, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, 3)
        assert again["error_code"] == 34
        await stream.aclose()
