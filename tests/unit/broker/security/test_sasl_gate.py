"""broker/security/sasl_gate.py: one connection's login as a state machine - what each state
accepts, what a refusal sends before the close, the principal handed over on success,
and Kafka's SaslHandshake v0 with raw tokens."""

from __future__ import annotations

import struct
import threading
from collections.abc import Sequence
from typing import Any

import pytest
import trio

from minibroker.broker.requests.request_handler import Buffer, CloseConnection, Pending
from minibroker.broker.security.sasl_gate import SaslListener, SaslState
from minibroker.protocol.api import ApiKey, RequestHeader
from minibroker.protocol.errors import KafkaError
from minibroker.protocol.sasl import SaslClient, ScramCredential, make_scram_credential

CREDENTIAL = make_scram_credential("SCRAM-SHA-512", "pw")


def lookup(mechanism: str, user: str) -> ScramCredential | None:
    return CREDENTIAL if (mechanism, user) == ("SCRAM-SHA-512", "alice") else None


class Recorder:
    """An encoder that keeps what it was asked to encode."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.errors: list[KafkaError] = []

    def encode_response(self, header: RequestHeader, body: dict[str, Any]) -> Sequence[Buffer]:
        self.bodies.append(body)
        return [b"response"]

    def encode_error(self, header: RequestHeader, error: KafkaError) -> Sequence[Buffer]:
        self.errors.append(error)
        return [b"error"]


def header(api_key: int, version: int = 1) -> RequestHeader:
    return RequestHeader(api_key, version, 1, "c")


@pytest.fixture
def listener() -> SaslListener:
    return SaslListener("SASL_SSL", ["PLAIN", "SCRAM-SHA-512"], lookup, raw_tokens=True)


def test_a_scram_login_moves_through_the_states_and_names_the_principal(
    listener: SaslListener,
) -> None:
    principals: list[str] = []
    exchange = listener.exchange("1.2.3.4:5", principals.append)
    encoder = Recorder()
    exchange.handle(header(ApiKey.SASL_HANDSHAKE), {"mechanism": "SCRAM-SHA-512"}, encoder)
    assert exchange.state is SaslState.AUTHENTICATE and not exchange.raw_tokens
    client = SaslClient("SCRAM-SHA-512", "alice", "pw")
    token = client.first()
    while not exchange.done:
        exchange.handle(header(ApiKey.SASL_AUTHENTICATE), {"auth_bytes": token}, encoder)
        token = client.step(encoder.bodies[-1]["auth_bytes"]) or b""
    assert client.complete
    assert principals == ["User:alice"]
    assert listener.succeeded["SCRAM-SHA-512"] == 1


@pytest.mark.parametrize(
    ("api_key", "body"),
    [(ApiKey.METADATA, {"topics": []}), (ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"x"})],
)
def test_anything_but_the_handshake_first_is_illegal_and_closes(
    listener: SaslListener, api_key: int, body: dict[str, Any]
) -> None:
    exchange = listener.exchange("peer", lambda principal: None)
    encoder = Recorder()
    with pytest.raises(CloseConnection) as closed:
        exchange.handle(header(api_key), body, encoder)
    assert closed.value.reply == [b"error"]
    assert [e.name for e in encoder.errors] == ["ILLEGAL_SASL_STATE"]


def test_an_unknown_mechanism_is_answered_with_the_enabled_ones_and_closed(
    listener: SaslListener,
) -> None:
    encoder = Recorder()
    with pytest.raises(CloseConnection):
        listener.exchange("peer", lambda p: None).handle(
            header(ApiKey.SASL_HANDSHAKE), {"mechanism": "GSSAPI"}, encoder
        )
    assert encoder.bodies == [{"error_code": 33, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]}]


async def test_a_failed_login_is_answered_counted_and_closed(listener: SaslListener) -> None:
    principals: list[str] = []
    exchange = listener.exchange("peer", principals.append)
    encoder = Recorder()
    exchange.handle(header(ApiKey.SASL_HANDSHAKE), {"mechanism": "PLAIN"}, encoder)
    checked = exchange.handle(
        header(ApiKey.SASL_AUTHENTICATE), {"auth_bytes": b"\x00alice\x00bad"}, encoder
    )
    assert isinstance(checked, Pending)
    with pytest.raises(CloseConnection) as closed:
        await checked.wait()
    assert closed.value.reason == "authentication"
    assert closed.value.reply == [b"response"]
    assert encoder.bodies[-1]["error_code"] == 58
    assert principals == [] and listener.failed["PLAIN"] == 1


async def test_a_plain_password_is_derived_off_the_event_loop_and_nothing_is_taken_meanwhile() -> (
    None
):
    derivation_started, release = threading.Event(), threading.Event()

    def slow_lookup(mechanism: str, user: str) -> ScramCredential | None:
        derivation_started.set()
        release.wait(10)
        return lookup(mechanism, user)

    listener = SaslListener("SASL_SSL", ["PLAIN"], slow_lookup, raw_tokens=True)
    principals: list[str] = []
    exchange = listener.exchange("peer", principals.append)
    exchange.handle(header(ApiKey.SASL_HANDSHAKE), {"mechanism": "PLAIN"}, Recorder())
    checked = exchange.handle(
        header(ApiKey.SASL_AUTHENTICATE), {"auth_bytes": b"\x00alice\x00pw"}, Recorder()
    )
    assert isinstance(checked, Pending)
    answers: list[object] = []

    async def answer() -> None:
        answers.append(await checked.wait())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer)
        await trio.to_thread.run_sync(derivation_started.wait)
        # The loop runs on while the thread derives; the connection takes no request.
        assert exchange.state is SaslState.CHECKING and not exchange.done
        encoder = Recorder()
        with pytest.raises(CloseConnection):
            exchange.handle(header(ApiKey.SASL_AUTHENTICATE), {"auth_bytes": b"x"}, encoder)
        assert [e.name for e in encoder.errors] == ["ILLEGAL_SASL_STATE"]
        release.set()
    assert answers == [[b"response"]]
    assert exchange.done and principals == ["User:alice"]


def test_handshake_v0_switches_to_raw_tokens_until_the_login_completes(
    listener: SaslListener,
) -> None:
    principals: list[str] = []
    exchange = listener.exchange("peer", principals.append)
    exchange.handle(header(ApiKey.SASL_HANDSHAKE, 0), {"mechanism": "SCRAM-SHA-512"}, Recorder())
    assert exchange.raw_tokens
    client = SaslClient("SCRAM-SHA-512", "alice", "pw")
    token: bytes | None = client.first()
    while token is not None:
        [framed] = exchange.raw_token(token)
        (size,) = struct.unpack_from(">i", framed)
        token = client.step(bytes(framed)[4 : 4 + size])
    assert exchange.done and not exchange.raw_tokens
    assert principals == ["User:alice"]
