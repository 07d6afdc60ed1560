"""The per-address failed-login bucket (broker/security/auth_failures.py) and the connection
counts and creation rate (broker/network/connection_limits.py), on a fake clock."""

from __future__ import annotations

import pytest

from minibroker.broker.network.connection_limits import (
    ConnectionLimits,
    CreationRate,
    parse_overrides,
)
from minibroker.broker.security.auth_failures import (
    FAILURE_BURST,
    MAX_ADDRESSES,
    AuthFailureLimiter,
)
from minibroker.protocol.errors import ConfigError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_address_gets_a_burst_of_failures_then_one_per_interval() -> None:
    clock = Clock()
    limiter = AuthFailureLimiter(delay_s=0.1, rate_per_s=2.0, clock=clock)
    for _ in range(FAILURE_BURST):
        assert limiter.try_take("10.0.0.1")
    assert not limiter.try_take("10.0.0.1")
    assert limiter.try_take("10.0.0.2")  # another address has its own bucket
    clock.now += 0.5  # one failure's worth at 2 a second
    assert limiter.try_take("10.0.0.1")
    assert not limiter.try_take("10.0.0.1")


def test_a_passed_check_gives_its_reservation_back() -> None:
    clock = Clock()
    limiter = AuthFailureLimiter(delay_s=0.1, rate_per_s=1.0, clock=clock)
    for _ in range(3 * FAILURE_BURST):
        assert limiter.try_take("h")
        limiter.refund("h")  # right passwords never run the bucket dry


def test_the_table_of_addresses_is_bounded() -> None:
    limiter = AuthFailureLimiter(delay_s=0.1, rate_per_s=1.0, clock=Clock())
    for i in range(MAX_ADDRESSES + 50):
        limiter.try_take(f"h{i}")
    assert len(limiter._buckets) == MAX_ADDRESSES


def test_connections_are_counted_per_address_with_overrides_and_in_all() -> None:
    limits = ConnectionLimits(max_connections=5, max_per_ip=2, overrides={"b": 4})
    assert [limits.admit("a") for _ in range(3)] == [None, None, "max_connections_per_ip"]
    assert [limits.admit("b") for _ in range(4)] == [None, None, None, "max_connections"]
    limits.release("a")
    assert limits.admit("c") is None
    assert limits.open == 5 and set(limits.by_address) == {"a", "b", "c"}
    limits.release("c")
    assert "c" not in limits.by_address


def test_max_connections_minus_one_follows_the_open_file_limit() -> None:
    assert 0 < ConnectionLimits(max_connections=-1).max_connections < 2**31 - 1


def test_overrides_are_host_count_pairs() -> None:
    assert parse_overrides("127.0.0.1:10, ::1:3,") == {"127.0.0.1": 10, "::1": 3}
    with pytest.raises(ConfigError, match=r"max\.connections\.per\.ip\.overrides"):
        parse_overrides("localhost")


def test_creation_past_the_rate_waits_for_its_token() -> None:
    clock = Clock()
    rate = CreationRate(4, clock=clock)
    assert [rate.creation_wait_s() for _ in range(4)] == [0.0] * 4
    assert rate.creation_wait_s() == pytest.approx(0.25)
    assert rate.creation_wait_s() == pytest.approx(0.5)
    clock.now += 1.0
    assert rate.creation_wait_s() == 0.0
    assert rate.throttle_time_s == pytest.approx(0.75)
