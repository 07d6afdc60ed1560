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
from minibroker.broker.security.sasl_gate import SaslExchange, SaslListener, SaslState
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


# -- re-authentication (KIP-368, connections.max.reauth.ms) ---------------------------

BOB = make_scram_credential("SCRAM-SHA-512", "bob-pw")


def two_users(mechanism: str, user: str) -> ScramCredential | None:
    return {"alice": CREDENTIAL, "bob": BOB}.get(user) if mechanism == "SCRAM-SHA-512" else None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def scram_login(
    exchange: SaslExchange, user: str = "alice", password: str = "pw", version: int = 1
) -> Recorder:
    """A whole SCRAM-SHA-512 login on ``exchange``; the encoder holds the answers."""
    encoder = Recorder()
    exchange.handle(header(ApiKey.SASL_HANDSHAKE), {"mechanism": "SCRAM-SHA-512"}, encoder)
    client = SaslClient("SCRAM-SHA-512", user, password)
    token = client.first()
    while not exchange.done:
        exchange.handle(header(ApiKey.SASL_AUTHENTICATE, version), {"auth_bytes": token}, encoder)
        token = client.step(encoder.bodies[-1]["auth_bytes"]) or b""
    return encoder


def reauthenticating(clock: Clock, max_reauth_ms: int = 2000) -> SaslListener:
    return SaslListener(
        "KAFKA", ["SCRAM-SHA-512"], two_users, max_reauth_ms=max_reauth_ms, clock=clock
    )


def test_a_login_is_told_its_session_lifetime_only_in_the_last_answer() -> None:
    exchange = reauthenticating(Clock()).exchange("peer", lambda p: None)
    answers = scram_login(exchange).bodies
    assert [a.get("session_lifetime_ms") for a in answers[1:]] == [0, 2000]
    assert exchange.expires and exchange.session is not None
    assert exchange.session.expires_at == 102.0


def test_without_connections_max_reauth_ms_a_session_lasts_and_a_new_handshake_is_illegal(
    listener: SaslListener,
) -> None:
    exchange = listener.exchange("peer", lambda p: None)
    answers = scram_login(exchange)
    assert answers.bodies[-1]["session_lifetime_ms"] == 0 and not exchange.expires
    encoder = Recorder()
    reply = exchange.handle(header(ApiKey.SASL_HANDSHAKE), {"mechanism": "PLAIN"}, encoder)
    assert reply == [b"error"] and [e.name for e in encoder.errors] == ["ILLEGAL_SASL_STATE"]
    assert exchange.done  # answered, not closed: the connection goes on


def test_the_same_principal_logs_in_again_on_the_live_connection() -> None:
    clock = Clock()
    listener = reauthenticating(clock)
    principals: list[str] = []
    exchange = listener.exchange("peer", principals.append)
    scram_login(exchange)
    clock.now += 1.8
    scram_login(exchange)
    assert exchange.done and principals == ["User:alice", "User:alice"]
    assert listener.succeeded["SCRAM-SHA-512"] == 1
    assert listener.reauthenticated["SCRAM-SHA-512"] == 1
    assert exchange.session is not None and exchange.session.expires_at == clock.now + 2.0


def test_a_second_re_authentication_within_a_second_is_illegal_but_not_fatal() -> None:
    clock = Clock()
    exchange = reauthenticating(clock).exchange("peer", lambda p: None)
    scram_login(exchange)
    scram_login(exchange)  # the first re-authentication may come at once
    clock.now += 0.5
    encoder = Recorder()
    handshake = {"mechanism": "SCRAM-SHA-512"}
    assert exchange.handle(header(ApiKey.SASL_HANDSHAKE), handshake, encoder) == [b"error"]
    assert [e.name for e in encoder.errors] == ["ILLEGAL_SASL_STATE"] and exchange.done


def test_a_re_authentication_as_another_principal_is_refused_counted_and_closed() -> None:
    clock = Clock()
    listener = reauthenticating(clock)
    principals: list[str] = []
    exchange = listener.exchange("peer", principals.append)
    scram_login(exchange)
    with pytest.raises(CloseConnection) as closed:
        scram_login(exchange, "bob", "bob-pw")
    assert closed.value.reason == "authentication"
    assert principals == ["User:alice"]
    assert listener.failed_reauthentication["SCRAM-SHA-512"] == 1
    assert listener.failed["SCRAM-SHA-512"] == 0


async def test_after_the_session_ends_a_request_closes_and_a_handshake_logs_in_again() -> None:
    listener = SaslListener("KAFKA", ["SCRAM-SHA-512"], two_users, max_reauth_ms=20)
    closed_one = listener.exchange("peer-1", lambda p: None)
    renewed = listener.exchange("peer-2", lambda p: None)
    async with trio.open_nursery() as nursery:
        for exchange in (closed_one, renewed):
            nursery.start_soon(exchange.watch_session)
            scram_login(exchange)
        await trio.sleep(0.05)
        assert closed_one.state is SaslState.EXPIRED and not closed_one.done
        with pytest.raises(CloseConnection):
            closed_one.handle(header(ApiKey.METADATA), {"topics": []}, Recorder())
        assert listener.expired_killed == 1
        scram_login(renewed)
        assert renewed.done and listener.reauthenticated["SCRAM-SHA-512"] == 1
        nursery.cancel_scope.cancel()


def test_a_client_that_cannot_re_authenticate_is_counted() -> None:
    listener = reauthenticating(Clock())
    scram_login(listener.exchange("old", lambda p: None), version=0)
    scram_login(listener.exchange("new", lambda p: None), version=1)
    assert listener.no_reauthentication["SCRAM-SHA-512"] == 1
    assert listener.succeeded["SCRAM-SHA-512"] == 2


def test_a_client_of_handshake_v0_logs_in_again_with_raw_tokens() -> None:
    listener = reauthenticating(Clock())
    exchange = listener.exchange("peer", lambda p: None)
    for _ in range(2):
        handshake = {"mechanism": "SCRAM-SHA-512"}
        exchange.handle(header(ApiKey.SASL_HANDSHAKE, 0), handshake, Recorder())
        client = SaslClient("SCRAM-SHA-512", "alice", "pw")
        token: bytes | None = client.first()
        while token is not None:
            [framed] = exchange.raw_token(token)
            (size,) = struct.unpack_from(">i", framed)
            token = client.step(bytes(framed)[4 : 4 + size])
        assert exchange.done and not exchange.raw_tokens
    assert listener.reauthenticated["SCRAM-SHA-512"] == 1
    assert listener.no_reauthentication["SCRAM-SHA-512"] == 1
