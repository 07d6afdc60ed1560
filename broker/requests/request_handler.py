"""What the socket server asks of the code that answers its frames, and what it gets back.

How this works. The server (broker/network/server.py) only cuts frames; a ``RequestHandler``
(a codec: broker/network/request_codec.py, broker/network/kafka_codec.py) answers each one
synchronously with a ``Reply``: the response buffers, ``None`` (no response: Produce
with acks=0), or ``Pending`` when the answer has to wait (a long-polling Fetch,
acks=all), whose ``wait()`` the connection runs in a task of its own. A frame the
handler cannot answer, or after which the connection must end (a failed login), raises
``CloseConnection``; its ``reply``, if any, is sent before the close. On a SASL
listener the server gets each connection's login state from an ``Authenticator``
(broker/security/sasl_gate.py) and passes it to the handler as ``auth`` with every frame.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeAlias

import trio

from minibroker.protocol.session import Session

Buffer: TypeAlias = bytes | bytearray | memoryview
"""One buffer of a response (a memoryview: record data sent from its own memory)."""


class Pending:
    """A reply that is not ready yet: ``wait()`` produces it (in its own task).

    ``ordered``, when given, is set once the request's effects that later requests of
    the same connection must follow are done (a large Produce's appends, made in
    chunks between which other connections run): until then the connection handles
    no further request. The reply itself may come later still (acks=all)."""

    __slots__ = ("ordered", "wait")

    def __init__(
        self,
        wait: Callable[[], Awaitable[Sequence[Buffer] | None]],
        ordered: trio.Event | None = None,
    ) -> None:
        self.wait = wait
        self.ordered = ordered


Reply: TypeAlias = Sequence[Buffer] | Pending | None
"""Response buffers (length prefix included), no response, or a pending response."""


class CloseConnection(Exception):
    """Raised by a handler for a frame it cannot answer (its header does not parse), or
    after which the connection must end (a failed login): ``reply``, if any, is sent
    first; ``reason`` is one of broker/network/server.py's CLOSE_REASONS."""

    def __init__(
        self, message: str, *, reply: Sequence[Buffer] | None = None, reason: str = "bad_frame"
    ) -> None:
        super().__init__(message)
        self.reply = reply
        self.reason = reason


class Login(Protocol):
    """One connection's login state (broker/security/sasl_gate.py), as its connection sees it."""

    @property
    def expires(self) -> bool:
        """Whether its sessions end (connections.max.reauth.ms): then the connection
        runs ``watch_session`` beside its reader."""
        ...

    async def watch_session(self) -> None:
        """End each session at its deadline; runs until cancelled."""
        ...


class Authenticator(Protocol):
    """A SASL listener's source of per-connection logins (broker/security/sasl_gate.py), with
    its counters by mechanism (a metric)."""

    mechanisms: list[str]
    failed: Counter[str]
    succeeded: Counter[str]
    reauthenticated: Counter[str]
    failed_reauthentication: Counter[str]
    no_reauthentication: Counter[str]
    expired_killed: int

    def exchange(self, peer: str, on_authenticated: Callable[[str], None]) -> Login:
        """The login state of a new connection from ``peer``; it calls
        ``on_authenticated(principal)`` when the login succeeds."""
        ...


class RequestHandler(Protocol):
    listener: str
    """The name of the listener this handler serves (it names the connections' sessions)."""

    def handle(self, frame: bytes, session: Session, auth: Any = None) -> Reply:
        """Answer one request frame sent by ``session``; raise CloseConnection if it is
        unparseable. ``auth``: on a SASL listener, the connection's login state (given
        by ``BrokerServer``'s ``sasl``), until and after it is done."""
        ...
