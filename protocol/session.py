"""Who sent a request: the authenticated principal, its address and the listener.

A connection starts with the session its listener gives every client (``User:ANONYMOUS``
on a plaintext listener; the certificate's subject under mutual TLS) and gets a new one
once SASL authenticates it. Every request header carries the session current when the
request was read, so a handler (or an authorizer) asks ``header.session`` who is asking
without knowing anything about connections.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

ANONYMOUS: Final = "User:ANONYMOUS"
"""The principal of a client that has not authenticated, as Kafka names it."""


@dataclass(frozen=True, slots=True)
class Session:
    principal: str
    """``User:<name>`` (Kafka's principal type and name)."""
    client_host: str
    """The peer's IP address, or "" when unknown (in-memory test streams)."""
    listener: str
    """The name of the listener the connection came in on."""


UNKNOWN_SESSION: Final = Session(ANONYMOUS, "", "")
"""The session of a header built outside a connection (tests, tools)."""
