"""LogRateLimiter: the first lines of an interval pass, the rest become one count."""

from __future__ import annotations

import logging

import pytest

from minibroker.broker.requests.log_limiter import LogRateLimiter

LOGGER = "tests.log_limiter"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_lines_beyond_the_burst_are_suppressed_within_an_interval(
    caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    limiter = LogRateLimiter(logging.getLogger(LOGGER), burst=3, interval_s=60, clock=clock)
    for i in range(1000):
        limiter.warning("bad request %d", i)
    assert messages(caplog) == ["bad request 0", "bad request 1", "bad request 2"]
    assert limiter.suppressed == 997


def test_the_next_interval_opens_with_one_summary_of_what_was_suppressed(
    caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    limiter = LogRateLimiter(logging.getLogger(LOGGER), burst=2, interval_s=60, clock=clock)
    for i in range(21_000):
        limiter.info("rejected %d", i)
    clock.now += 60
    limiter.info("rejected again")
    assert messages(caplog) == [
        "rejected 0",
        "rejected 1",
        "20998 similar messages suppressed in the last 60 s (at most 2 per interval)",
        "rejected again",
    ]
    assert limiter.suppressed == 0


def test_a_quiet_interval_logs_no_summary(
    caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    limiter = LogRateLimiter(logging.getLogger(LOGGER), burst=2, interval_s=1, clock=clock)
    limiter.info("one")
    clock.now += 5
    limiter.info("two")
    assert messages(caplog) == ["one", "two"]


def test_lines_below_the_logger_level_are_neither_logged_nor_counted(
    caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    limiter = LogRateLimiter(logging.getLogger(LOGGER), burst=1, clock=clock)
    for _ in range(5):
        limiter.info("chatter")
    assert messages(caplog) == []
    assert limiter.suppressed == 0
