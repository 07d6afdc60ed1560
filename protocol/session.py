"""Who sent a request: the authenticated principal, its address and the listener.

A connection starts with the session its listener gives every client (``User:ANONYMOUS``
on a plaintext listener; the certificate's subject under mutual TLS) and gets a new one
once SASL authenticates it. Every request header carries the session current when the
request was read, so a handler (or an authorizer) asks ``header.session`` who is asking
without knowing anything about connections.

A connection of a broker's server also carries a ``PeerBroker``: which broker, if any,
the connection has proven to be (protocol/broker_proof.py). It belongs to the
connection, not to one login, so the session a SASL login makes keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

ANONYMOUS: Final = "User:ANONYMOUS"
"""The principal of a client that has not authenticated, as Kafka names it."""


class PeerBroker:
    """What one connection has proven about the broker at its other end: nothing until
    a BrokerProof checks (``broker_id`` -1), then that broker's id and the broker epoch
    of the registration whose key checked. ``nonce`` is the challenge awaiting its
    proof (None when none is: each challenge is good for one proof)."""

    __slots__ = ("broker_epoch", "broker_id", "nonce")

    def __init__(self) -> None:
        self.nonce: bytes | None = None
        self.broker_id = -1
        self.broker_epoch = -1

    def is_broker(self, broker_id: int) -> bool:
        """Whether this connection has proven to be broker ``broker_id``."""
        return broker_id >= 0 and self.broker_id == broker_id


class ConnectionMute:
    """Until when a connection is not read (a client quota's throttle, KIP-219: the
    broker answers at once with ``throttle_time_ms`` and reads the connection's next
    request only after that long). ``until`` is on the server's clock (trio's)."""

    __slots__ = ("until",)

    def __init__(self) -> None:
        self.until = 0.0


@dataclass(frozen=True, slots=True)
class Session:
    principal: str
    """``User:<name>`` (Kafka's principal type and name)."""
    client_host: str
    """The peer's IP address, or "" when unknown (in-memory test streams)."""
    listener: str
    """The name of the listener the connection came in on."""
    peer: PeerBroker | None = field(default=None, compare=False)
    """The connection's broker identity proof (None outside a server's connection):
    connection state, not part of who the session is."""
    mute: ConnectionMute | None = field(default=None, compare=False)
    """When the connection may be read again (None outside a server's connection)."""


UNKNOWN_SESSION: Final = Session(ANONYMOUS, "", "")
"""The session of a header built outside a connection (tests, tools)."""
