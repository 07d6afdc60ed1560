"""The SASL login of one connection on a SASL_PLAINTEXT / SASL_SSL listener.

How this works. The server (broker/network/server_connection.py) makes one ``SaslExchange`` per
connection of a SASL listener and hands it to the codec with every frame; a plaintext
listener has none and its codec never looks further. Until the exchange is ``done`` the codec gives
it every decoded request instead of dispatching it (ApiVersions excepted: a client asks
it first). The states, one table (``_ALLOWED``):

    HANDSHAKE --SaslHandshake(mechanism enabled)--> AUTHENTICATE
    AUTHENTICATE --SaslAuthenticate(token)--> AUTHENTICATE (SCRAM's first round)
                                          \\-> DONE (the mechanism completed)
    AUTHENTICATE --SaslAuthenticate(PLAIN token)--> CHECKING --> DONE

PLAIN's check derives the salted password (PBKDF2: milliseconds of CPU) in a worker
thread, answering through a ``Pending`` reply, so logins never hold the event loop that
other connections share; in CHECKING the connection takes no request.

Anything else - another API, a second handshake, a token before the handshake - is
answered ILLEGAL_SASL_STATE and the connection closed; an unknown mechanism
UNSUPPORTED_SASL_MECHANISM (with the enabled ones) and closed; a failed login
SASL_AUTHENTICATION_FAILED with one fixed message, answered and the connection closed
only after ``connection.failed.authentication.delay.ms``, a log line naming the peer
and the mechanism only, and the listener's failure counter
(``kafka_server_socket_server_metrics_failed_authentication_total``) bumped; an address
that failed too often waits before its next credential is even checked
(broker/security/auth_failures.py). On success
the connection's session becomes ``User:<name>`` (``on_authenticated``), and from the
next frame on requests go to the dispatcher with that principal; a later
SaslAuthenticate reaches the dispatcher, which answers ILLEGAL_SASL_STATE.

Re-authentication (KIP-368): on the Kafka listener with ``connections.max.reauth.ms`` > 0
every login is a session of that length (broker/security/sasl_session.py: the answer's
``session_lifetime_ms``, the deadline and its watch). The codec gives a logged-in
connection's SaslHandshake to the exchange too; past Kafka's once-a-second floor it
starts a new login (back to AUTHENTICATE), else it is answered ILLEGAL_SASL_STATE. When
the session ends the exchange takes every request again (``EXPIRED``): a SaslHandshake
logs in again, anything else closes the connection, unanswered
(``kafka_server_socket_server_metrics_expired_connections_killed_count``). The new login
must name the same principal with the same mechanism, else it fails like a wrong
password; re-authentications are counted apart from first logins (Kafka's
successful-reauthentication / failed-reauthentication), and so are first logins by a
client that cannot re-authenticate (SaslAuthenticate v0 or raw tokens:
successful-authentication-no-reauth).

Kafka's SaslHandshake v0 (Kafka listener only) is followed by raw tokens, each a frame
of its own with no request header; ``raw_tokens`` tells the codec to hand frames over
unparsed (``raw_token``) until the mechanism completes.
"""

from __future__ import annotations

import enum
import logging
import struct
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Final, NoReturn, Protocol

import trio

from minibroker.broker.requests.dispatcher import RequestDispatcher
from minibroker.broker.requests.log_limiter import LogRateLimiter
from minibroker.broker.requests.request_handler import Buffer, CloseConnection, Pending, Reply
from minibroker.broker.security.auth_failures import AuthFailureLimiter
from minibroker.broker.security.sasl_session import SessionClock
from minibroker.protocol.api import ApiKey, Body, RequestHeader
from minibroker.protocol.errors import (
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.sasl import FAILED, PLAIN, CredentialLookup, SaslServer

log = logging.getLogger(__name__)
_failures = LogRateLimiter(log)  # a client can fail logins as fast as it likes


class Encoder(Protocol):
    def encode_response(self, header: RequestHeader, body: Body) -> Sequence[Buffer]: ...

    def encode_error(self, header: RequestHeader, error: KafkaError) -> Sequence[Buffer]: ...


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    CHECKING = "checking"  # a PLAIN password is being derived in a worker thread
    DONE = "done"
    EXPIRED = "expired"  # the session ended: only a new login may follow


_ALLOWED: Final = {
    SaslState.HANDSHAKE: ApiKey.SASL_HANDSHAKE,
    SaslState.AUTHENTICATE: ApiKey.SASL_AUTHENTICATE,
}
"""The one request each state accepts."""


class SaslListener:
    """What a listener's exchanges share: the mechanisms, the credentials and the
    counters (by mechanism) the metrics read."""

    def __init__(
        self,
        listener: str,
        mechanisms: Sequence[str],
        lookup: CredentialLookup,
        *,
        raw_tokens: bool = False,
        limiter: AuthFailureLimiter | None = None,
        max_reauth_ms: int = 0,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        """``raw_tokens``: accept Kafka's SaslHandshake v0 (the Kafka listener);
        ``limiter``: the broker's failed-login delay and per-address rate;
        ``max_reauth_ms``: each login's session length (connections.max.reauth.ms;
        0 = as long as the connection)."""
        self.limiter = limiter
        self.listener = listener
        self.mechanisms = list(mechanisms)
        self.lookup = lookup
        self.raw_tokens_allowed = raw_tokens
        self.max_reauth_ms = max_reauth_ms
        self.clock = clock
        self.failed: Counter[str] = Counter()
        self.succeeded: Counter[str] = Counter()
        self.reauthenticated: Counter[str] = Counter()
        self.failed_reauthentication: Counter[str] = Counter()
        self.no_reauthentication: Counter[str] = Counter()
        """First logins by clients that cannot re-authenticate (SaslAuthenticate v0)."""
        self.expired_killed = 0
        """Connections closed for a request after their session ended."""

    def exchange(self, peer: str, on_authenticated: Callable[[str], None]) -> SaslExchange:
        return SaslExchange(self, peer, on_authenticated)


class SaslExchange:
    """One connection's login; see the module docstring."""

    __slots__ = (
        "done",
        "host",
        "listener",
        "mechanism",
        "on_authenticated",
        "peer",
        "principal",
        "raw_tokens",
        "reauthenticating",
        "sasl",
        "session",
        "state",
        "supports_reauthentication",
    )

    def __init__(
        self, listener: SaslListener, peer: str, on_authenticated: Callable[[str], None]
    ) -> None:
        self.listener = listener
        self.peer = peer
        self.host = peer.rpartition(":")[0] or peer
        """The client's address: what failed logins are counted by."""
        self.on_authenticated = on_authenticated
        """Called with the principal (``User:<name>``) once the login succeeds."""
        self.state = SaslState.HANDSHAKE
        self.done = False
        self.raw_tokens = False
        self.sasl: SaslServer | None = None
        self.principal = ""
        self.mechanism = ""
        """The principal and mechanism of the last login: a re-authentication keeps both."""
        self.reauthenticating = False
        self.supports_reauthentication = False
        """Whether the client sent SaslAuthenticate v1+ (it can be told a lifetime)."""
        self.session: SessionClock | None = None
        """The session deadline, with connections.max.reauth.ms > 0."""
        if listener.max_reauth_ms > 0:
            self.session = SessionClock(listener.max_reauth_ms / 1000, self._expire)

    @property
    def expires(self) -> bool:
        return self.session is not None

    async def watch_session(self) -> None:
        """For the connection's nursery, when ``session`` is set: ends each session at
        its deadline (broker/security/sasl_session.py)."""
        if self.session is not None:
            await self.session.watch()

    def _expire(self) -> None:
        """The session ended: the next request must start a new login. A login already
        under way goes on (it sets the next deadline, or its failure closes)."""
        if self.done:
            self.done = False
            self.state = SaslState.EXPIRED

    def handle(self, header: RequestHeader, body: Body, encoder: Encoder) -> Reply:
        """Answer a request that arrived before the login completed, after the session
        ended, or a SaslHandshake after the login."""
        if self.done or self.state is SaslState.EXPIRED:
            return self._after_login(header, body, encoder)
        if _ALLOWED.get(self.state) != header.api_key:
            refused = IllegalSaslStateError(
                f"api key {header.api_key} is not allowed in SASL state {self.state.value}"
            )
            raise CloseConnection(
                "a request before authentication",
                reply=encoder.encode_error(header, refused),
                reason="authentication",
            )
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(header, body, encoder)

        if header.api_version > 0:
            self.supports_reauthentication = True

        def answer(token: bytes) -> Sequence[Buffer]:
            ok = {"error_code": 0, "error_message": None, "auth_bytes": token}
            # the session each login now has (max_reauth_ms is 0 without one)
            lifetime = self.listener.max_reauth_ms if self.done else 0
            return encoder.encode_response(header, {**ok, "session_lifetime_ms": lifetime})

        def refusal(exc: SaslAuthenticationFailedError) -> Sequence[Buffer]:
            failed = {"error_code": exc.code, "error_message": FAILED, "auth_bytes": b""}
            return encoder.encode_response(header, failed)

        return self._answer(body["auth_bytes"], answer, refusal)

    def _after_login(self, header: RequestHeader, body: Body, encoder: Encoder) -> Reply:
        """Kafka's order: a SaslHandshake that may start a re-authentication does; else
        any request after the session ended closes the connection; else (a SaslHandshake
        too soon, or with no session deadline) ILLEGAL_SASL_STATE."""
        session = self.session
        if (
            header.api_key == ApiKey.SASL_HANDSHAKE
            and session is not None
            and session.may_reauthenticate(self.listener.clock())
        ):
            self.reauthenticating = True
            self.done = False
            self.state = SaslState.HANDSHAKE
            return self._handshake(header, body, encoder)
        if self.state is SaslState.EXPIRED:
            self.listener.expired_killed += 1
            log.debug("closing %s: its SASL session expired", self.peer)
            raise CloseConnection(
                "a request after the SASL session expired", reason="authentication"
            )
        refused = IllegalSaslStateError("no SASL exchange expected on this connection now")
        return encoder.encode_error(header, refused)

    def raw_token(self, frame: bytes) -> Reply:
        """A raw SASL token (after SaslHandshake v0): the answer is a raw token too."""
        if self.state is SaslState.CHECKING:
            raise CloseConnection(
                "a SASL token sent before the last one was answered", reason="authentication"
            )

        def answer(token: bytes) -> Sequence[Buffer]:
            return [struct.pack(">i", len(token)) + token]

        return self._answer(frame, answer, lambda exc: None)

    def _answer(
        self,
        token: bytes,
        answer: Callable[[bytes], Sequence[Buffer]],
        refusal: Callable[[SaslAuthenticationFailedError], Sequence[Buffer] | None],
    ) -> Reply:
        """The mechanism's answer to ``token``. PLAIN derives the salted password
        (PBKDF2, milliseconds of CPU) in a worker thread, so that logins never hold the
        event loop other connections share; meanwhile this connection accepts no
        request (CHECKING). A login from an address that failed too often waits its
        turn first, and a failed one is answered ``refusal`` only after the failure
        delay, then ends the connection (broker/security/auth_failures.py)."""
        sasl = self.sasl
        assert sasl is not None
        limiter = self.listener.limiter
        if sasl.mechanism != PLAIN and (limiter is None or limiter.try_take(self.host)):
            try:
                reply = self._step(token)
            except SaslAuthenticationFailedError as exc:
                return self._refuse_later(refusal(exc), exc)
            if limiter is not None:
                limiter.refund(self.host)
            return answer(reply)
        self.state = SaslState.CHECKING

        async def checked() -> Sequence[Buffer]:
            if limiter is not None:  # nothing reserved yet: PLAIN, or SCRAM that must wait
                await limiter.take(self.host)
            try:
                if sasl.mechanism == PLAIN:
                    reply = await trio.to_thread.run_sync(sasl.step, token)
                else:
                    reply = sasl.step(token)
                self._check_reauthentication(sasl)
            except SaslAuthenticationFailedError as exc:
                self._failed(sasl)
                if limiter is not None:
                    await limiter.delay_failure()
                raise CloseConnection(
                    "authentication failed", reply=refusal(exc), reason="authentication"
                ) from exc
            if limiter is not None:
                limiter.refund(self.host)
            self._stepped(sasl)
            return answer(reply)

        return Pending(checked)

    def _refuse_later(
        self, reply: Sequence[Buffer] | None, exc: SaslAuthenticationFailedError
    ) -> Reply:
        """A failed login's refusal and close, after the failure delay."""
        limiter = self.listener.limiter
        if limiter is None:
            raise CloseConnection(
                "authentication failed", reply=reply, reason="authentication"
            ) from exc
        self.state = SaslState.CHECKING

        async def refused() -> Sequence[Buffer]:
            await limiter.delay_failure()
            raise CloseConnection("authentication failed", reply=reply, reason="authentication")

        return Pending(refused)

    def _handshake(self, header: RequestHeader, body: Body, encoder: Encoder) -> Reply:
        listener = self.listener
        mechanism = body["mechanism"]
        answer = {"error_code": 0, "mechanisms": listener.mechanisms}
        if mechanism not in listener.mechanisms:
            answer["error_code"] = UnsupportedSaslMechanismError.code
            raise CloseConnection(
                f"SASL mechanism {mechanism!r} is not enabled",
                reply=encoder.encode_response(header, answer),
                reason="authentication",
            )
        self.sasl = SaslServer(mechanism, listener.lookup)
        self.state = SaslState.AUTHENTICATE
        self.raw_tokens = header.api_version == 0 and listener.raw_tokens_allowed
        return encoder.encode_response(header, answer)

    def _step(self, token: bytes) -> bytes:
        sasl = self.sasl
        assert sasl is not None
        try:
            answer = sasl.step(token)
            self._check_reauthentication(sasl)
        except SaslAuthenticationFailedError:
            self._failed(sasl)
            raise
        self._stepped(sasl)
        return answer

    def _check_reauthentication(self, sasl: SaslServer) -> None:
        """A re-authentication that completed must keep the principal and the mechanism
        (Kafka refuses to change either on a live connection)."""
        if not (self.reauthenticating and sasl.complete):
            return
        principal = f"User:{sasl.user}"
        if principal != self.principal or sasl.mechanism != self.mechanism:
            sasl.failure = (
                f"re-authentication as {principal} with {sasl.mechanism} on a connection of"
                f" {self.principal} with {self.mechanism}"
            )
            sasl.complete = False
            raise SaslAuthenticationFailedError(FAILED)

    def _failed(self, sasl: SaslServer) -> None:
        listener = self.listener
        if self.reauthenticating:
            listener.failed_reauthentication[sasl.mechanism] += 1
        else:
            listener.failed[sasl.mechanism] += 1
        _failures.warning(
            "failed %s with %s from %s on listener %s",
            "re-authentication" if self.reauthenticating else "authentication",
            sasl.mechanism,
            self.peer,
            self.listener.listener,
        )
        log.debug("authentication from %s failed: %s", self.peer, sasl.failure)

    def _stepped(self, sasl: SaslServer) -> None:
        """After a successful step: done when the mechanism completed, else the next
        token is awaited."""
        if sasl.complete:
            listener = self.listener
            if self.reauthenticating:
                listener.reauthenticated[sasl.mechanism] += 1
            else:
                listener.succeeded[sasl.mechanism] += 1
                if not self.supports_reauthentication:
                    listener.no_reauthentication[sasl.mechanism] += 1
            if self.session is not None:
                self.session.start_session(listener.clock())
            self.state = SaslState.DONE
            self.done = True
            self.raw_tokens = False
            self.reauthenticating = False
            self.principal = f"User:{sasl.user}"
            self.mechanism = sasl.mechanism
            self.on_authenticated(self.principal)
        else:
            self.state = SaslState.AUTHENTICATE


def install_sasl_after_login(dispatcher: RequestDispatcher) -> None:
    """SaslHandshake / SaslAuthenticate that reach the dispatcher come after the login
    (or on a listener without SASL): ILLEGAL_SASL_STATE, as Kafka answers them."""

    def refuse(
        header: RequestHeader,
        request: bodies.SaslHandshakeRequest | bodies.SaslAuthenticateRequest,
    ) -> NoReturn:
        raise IllegalSaslStateError("no SASL exchange expected on this connection now")

    dispatcher.register(bodies.SASL_HANDSHAKE, refuse)
    dispatcher.register(bodies.SASL_AUTHENTICATE, refuse)
