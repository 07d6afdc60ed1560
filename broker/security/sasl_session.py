"""How long a SASL login lasts on its connection, and when the client may log in again
on it (KIP-368, ``connections.max.reauth.ms``).

How this works. With ``connections.max.reauth.ms`` = 0 (Kafka's default) a login lasts
as long as its connection and none of this is made. Above 0, each completed login
starts a session of that many milliseconds: SaslAuthenticate v1+ tells the client
(``session_lifetime_ms``), and a client that supports it logs in again on the same
connection before the session ends (SaslHandshake, SaslAuthenticate). One
``SessionClock`` per connection keeps the deadline; its ``watch`` task, in the
connection's nursery, sleeps until the deadline and then calls ``on_expired``, which
makes the exchange (broker/security/sasl_gate.py) take the connection's next request:
a SaslHandshake starts a new login, anything else closes the connection, as Kafka's
socket server does. So a request costs nothing more than the login's ``done`` check it
already had: no clock is read per request.

Kafka's rules kept here: a re-authentication may start at most once a second
(``MIN_REAUTH_INTERVAL_S``; an earlier SaslHandshake is answered as any after the login,
ILLEGAL_SASL_STATE), and only on a connection whose session has a deadline; the new
login must name the same principal with the same mechanism (checked by the exchange).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

import trio

MIN_REAUTH_INTERVAL_S: Final = 1.0
"""Kafka's floor between two re-authentication starts on one connection: a client
cannot make the broker check credentials in a loop on a connection it already holds."""


class SessionClock:
    """One connection's session deadline (trio's clock) and the task that acts on it."""

    __slots__ = ("_scope", "expired", "expires_at", "last_start", "lifetime_s", "on_expired")

    def __init__(self, lifetime_s: float, on_expired: Callable[[], None]) -> None:
        self.lifetime_s = lifetime_s
        """What every login on this connection is given (connections.max.reauth.ms)."""
        self.on_expired = on_expired
        self.expires_at = math.inf
        """When the current session ends; +inf until the first login completes."""
        self.expired = False
        self.last_start = -math.inf
        """When the last re-authentication started (its SaslHandshake arrived)."""
        self._scope: trio.CancelScope | None = None

    def start_session(self, now: float) -> None:
        """A login completed at ``now``: a new session, and the watch wakes at its end."""
        self.expires_at = now + self.lifetime_s
        self.expired = False
        if self._scope is not None:
            self._scope.deadline = self.expires_at

    def may_reauthenticate(self, now: float) -> bool:
        """Whether a SaslHandshake at ``now`` starts a re-authentication (and if so, it
        is taken as started)."""
        if self.expires_at == math.inf or now - self.last_start < MIN_REAUTH_INTERVAL_S:
            return False
        self.last_start = now
        return True

    async def watch(self) -> None:
        """Run for the connection's life (cancelled with it): at each session's end,
        ``on_expired``, once; a later login sets the next deadline."""
        while True:
            deadline = math.inf if self.expired else self.expires_at
            with trio.CancelScope(deadline=deadline) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None
            if not self.expired and trio.current_time() >= self.expires_at:
                self.expired = True
                self.on_expired()
