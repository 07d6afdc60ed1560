"""AuthFailureLimiter: failed logins are slow, and each client address may fail only so
often (what keeps a password from being guessed at speed).

Two rules, shared by every SASL listener of the broker (broker/security/sasl_gate.py asks):

- every failed login is answered, and its connection closed, only after
  ``connection.failed.authentication.delay.ms`` (Kafka's KIP-306, default 100 ms): a
  guesser on one connection at a time gets ten tries a second at most;
- each client address has a bucket of ``FAILURE_BURST`` failures refilled at
  ``connection.failed.authentication.rate.per.ip`` a second. Every credential check
  reserves one failure from its address's bucket first (``take``), and gives it back
  if the check passes (``refund``): a login from an address whose bucket is empty
  waits (in its own connection's task, holding nothing else) until a failure is
  allowed again, *before* its credential is checked. Opening more connections does not
  buy more guesses, and an empty bucket costs no password derivation. The right
  password still logs in - after that wait, as anyone from that address; a client
  that logs in right away never waits.

Memory is bounded: at most ``MAX_ADDRESSES`` buckets, the least recently failed dropped
first (a dropped address starts with a full bucket again, which only an attacker
spread over that many addresses could use). Counted for the metrics: ``delayed``
(failures answered late) and ``throttled`` (logins that had to wait for their address).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Final

import trio

FAILURE_BURST: Final = 10
"""Failures an address may make at once before the rate applies (typos happen)."""

MAX_ADDRESSES: Final = 10_000
"""Buckets kept; each is a few dozen bytes."""


class AuthFailureLimiter:
    def __init__(
        self,
        *,
        delay_s: float,
        rate_per_s: float,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.delay_s = delay_s
        self.rate_per_s = rate_per_s
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        """address -> (failures allowed at ``when``, ``when``)."""
        self.delayed = 0
        self.throttled = 0

    def _tokens(self, address: str, now: float) -> float:
        bucket = self._buckets.get(address)
        if bucket is None:
            return float(FAILURE_BURST)
        tokens, when = bucket
        return min(float(FAILURE_BURST), tokens + (now - when) * self.rate_per_s)

    def _set(self, address: str, tokens: float, now: float) -> None:
        self._buckets[address] = (tokens, now)
        self._buckets.move_to_end(address)
        while len(self._buckets) > MAX_ADDRESSES:
            self._buckets.popitem(last=False)

    def try_take(self, address: str) -> bool:
        """Reserve one failure for a credential check from ``address`` if its bucket
        has one (``refund`` it when the check passes); False if it must wait."""
        if self.rate_per_s <= 0:
            return True
        now = self.clock()
        tokens = self._tokens(address, now)
        if tokens < 1:
            return False
        self._set(address, tokens - 1, now)
        return True

    async def take(self, address: str) -> None:
        """``try_take``, waiting (counted once) until the address's bucket allows it.
        Concurrent logins from one address each reserve their own failure, so opening
        more connections buys no more checks."""
        if self.try_take(address):
            return
        self.throttled += 1
        while not self.try_take(address):
            tokens = self._tokens(address, self.clock())
            await trio.sleep(max((1 - tokens) / self.rate_per_s, 0.001))

    def refund(self, address: str) -> None:
        """The check that reserved a failure passed: give it back."""
        if self.rate_per_s <= 0:
            return
        now = self.clock()
        self._set(address, min(self._tokens(address, now) + 1, float(FAILURE_BURST)), now)

    async def delay_failure(self) -> None:
        """The pause before a failed login is answered and its connection closed."""
        self.delayed += 1
        await trio.sleep(self.delay_s)
