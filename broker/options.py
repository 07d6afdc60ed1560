"""The switches of a broker that benchmarks and crash tests set, handed to ``Broker``
by whoever builds it (``minibroker broker`` reads them from its environment once,
node/cli.py), never read from the environment inside the broker. Its own module so the
command can build them without importing the broker."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BrokerOptions:
    """Switches for benchmarks and crash tests, set by whoever builds the broker (the
    ``minibroker broker`` command reads them from its environment once, node/cli.py);
    the defaults are production's."""

    request_metrics: bool = True
    """False: the request-path counters are no-ops, so a benchmark can measure their
    cost (broker/metrics.py)."""
    cleaner_stop_at: str | None = None
    """A swap step at which the log cleaner freezes the broker for a crash test to kill
    it (broker/logdirs/log_cleaner.py)."""


PRODUCTION = BrokerOptions()
"""No switch set: what a broker runs with unless a benchmark or test says otherwise."""
