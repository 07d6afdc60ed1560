"""The inter-broker replication throttle (Kafka's ReplicationQuotaManager).

How this works. A reassignment copies whole partitions between brokers; left alone
that copy takes every byte of network and disk the brokers have. Kafka bounds it with
two pieces of configuration, and so does minibroker:

- *which* replicas are throttled: the topic configs
  ``leader.replication.throttled.replicas`` (on the leaders that send) and
  ``follower.replication.throttled.replicas`` (on the followers that receive), each
  ``""`` (none), ``"*"`` (every replica of the topic) or
  ``"partition:brokerId,partition:brokerId,..."``. A broker only cares about the entries
  naming itself: ``throttled_partitions`` turns a list into the partitions throttled
  *for that broker*, cached per (value, broker) so the fetch paths pay a dict lookup.
- *how fast*: the dynamic broker configs ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` (bytes/s; absent or -1 = unlimited), set on
  each broker's two ``ReplicationQuota`` objects by broker/admin/broker_configs.py.

A ``ReplicationQuota`` measures bytes/s over a sliding window of ``WINDOW_SAMPLES``
samples of ``SAMPLE_S`` seconds (Kafka's replication.quota.window.num / .size.seconds,
scaled down: a partition copy of a few seconds must be shaped within the first second,
not after eleven). As Kafka's Rate, the window counts as at least ``WINDOW_SAMPLES - 1``
whole samples long, so a burst at the start is spread over that span rather than
measured over microseconds. Nothing blocks here: per fetch, the fetch paths hand the
throttled partitions at most the quota's ``allowance()`` between them
(``FetchBudget``), leave a partition out when nothing is left (the quota is full), and
``record()`` what they did move (bytes of throttled partitions only). Kafka does not
bound the size: with its 11 s window a 1 MiB fetch is small, with ours it is not, and a
window that forgets a big overshoot lets the rate run far over its bound. What is left
is at most one record batch over the allowance (a fetch always carries whole batches).

Who uses it: the leader (broker/replication/replica_manager.py) bounds a throttled partition's
records in a follower's Fetch answer (none while the quota is full: HW and offsets
still go back) when that follower is not in the ISR; the follower
(broker/replication/replica_fetcher.py) bounds a throttled partition's ask, or leaves it out of
its Fetch, while it has not caught up. In-sync replicas are never held back - their
bytes still count, as in Kafka, so a throttle set on live partitions slows only the
copies. Everything runs on the broker's Trio thread; no locks.
"""

from __future__ import annotations

import functools
import re
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

WINDOW_SAMPLES = 5
"""Samples in the sliding window (Kafka's replication.quota.window.num is 11)."""
SAMPLE_S = 0.2
"""Length of one sample (Kafka's replication.quota.window.size.seconds is 1): a 1 s
window keeps a throttled copy within a few percent of its rate after its first second."""

UNLIMITED = -1
"""The rate of a quota that never throttles (config absent, -1 or Long.MAX_VALUE)."""

LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"

ALL_REPLICAS = "*"
_ENTRY = re.compile(r"[0-9]+:[0-9]+")


class AllPartitions:
    """The parsed ``"*"``: every partition of the topic, on every broker."""

    def __contains__(self, partition: object) -> bool:
        return True

    def __repr__(self) -> str:
        return "AllPartitions()"


ALL = AllPartitions()
Throttled = frozenset[int] | AllPartitions


def throttled_replicas_problem(value: str) -> str | None:
    """None when ``value`` is a valid throttled-replicas list, else what is wrong
    (Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker`` entries)."""
    text = value.strip()
    if text in ("", ALL_REPLICAS):
        return None
    for entry in text.split(","):
        if not _ENTRY.fullmatch(entry.strip()):
            return (
                "must be the literal '*' or a list of replicas in the format "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )
    return None


def parse_throttled_replicas(value: str) -> dict[int, frozenset[int]] | AllPartitions:
    """``"0:1,0:2,1:3"`` -> {0: {1, 2}, 1: {3}}; ``"*"`` -> ALL; ``""`` -> {}.
    ValueError on a malformed list (see ``throttled_replicas_problem``)."""
    problem = throttled_replicas_problem(value)
    if problem is not None:
        raise ValueError(problem)
    text = value.strip()
    if text == ALL_REPLICAS:
        return ALL
    replicas: dict[int, set[int]] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        partition, broker = entry.split(":")
        replicas.setdefault(int(partition), set()).add(int(broker))
    return {p: frozenset(b) for p, b in replicas.items()}


def format_throttled_replicas(replicas: dict[int, frozenset[int]] | dict[int, set[int]]) -> str:
    """The config value for ``{partition: brokers}``, in a stable order."""
    return ",".join(f"{p}:{b}" for p in sorted(replicas) for b in sorted(replicas[p]))


@functools.lru_cache(maxsize=4096)
def throttled_partitions(value: str, broker_id: int) -> Throttled:
    """The partitions of a topic throttled for ``broker_id`` by a throttled-replicas
    value (cached: the fetch paths call this per partition per fetch). A malformed value
    (never written by AlterConfigs, which validates) throttles nothing."""
    try:
        parsed = parse_throttled_replicas(value)
    except ValueError:
        return frozenset()
    if isinstance(parsed, AllPartitions):
        return parsed
    return frozenset(p for p, brokers in parsed.items() if broker_id in brokers)


@dataclass(slots=True)
class _Sample:
    start: float
    bytes: int = 0


@dataclass(slots=True)
class ReplicationQuota:
    """A byte-rate bound measured over a sliding window (see the module docstring).

    ``clock`` returns seconds from any fixed origin (monotonic); tests pass a fake."""

    rate: int = UNLIMITED  # bytes/s; UNLIMITED (or < 1) never throttles
    clock: Callable[[], float] = time.monotonic
    samples: int = WINDOW_SAMPLES
    sample_s: float = SAMPLE_S
    recorded_total: int = 0  # every byte ever recorded (the throttled-bytes metric)
    _window: deque[_Sample] = field(default_factory=deque)

    @property
    def unlimited(self) -> bool:
        return self.rate < 1

    def set_rate(self, rate: int) -> None:
        """A new bound, effective for the next check (the window is kept)."""
        self.rate = rate

    def record(self, nbytes: int) -> None:
        """``nbytes`` of throttled replication moved now."""
        if nbytes <= 0:
            return
        now = self.clock()
        self._purge(now)
        if not self._window or now - self._window[-1].start >= self.sample_s:
            self._window.append(_Sample(now))
        self._window[-1].bytes += nbytes
        self.recorded_total += nbytes

    def _purge(self, now: float) -> None:
        """Drop samples that started a whole window ago (they measure nothing now)."""
        oldest_kept = now - self.samples * self.sample_s
        window = self._window
        while window and (window[0].start <= oldest_kept or len(window) > self.samples):
            window.popleft()

    def _measure(self, now: float) -> tuple[int, float]:
        """(bytes in the window, time since its oldest sample started)."""
        self._purge(now)
        total = sum(s.bytes for s in self._window)
        return total, now - self._window[0].start if self._window else 0.0

    def _span(self, elapsed: float) -> float:
        """The span a rate is measured over: as Kafka's Rate, never less than the
        window minus the current sample."""
        return max(elapsed, (self.samples - 1) * self.sample_s)

    def measured_rate(self) -> float:
        """Bytes/s over the window, as the bound is checked against."""
        total, elapsed = self._measure(self.clock())
        return total / self._span(elapsed)

    def is_exceeded(self) -> bool:
        if self.unlimited:
            return False
        total, elapsed = self._measure(self.clock())
        return total > self.rate * self._span(elapsed)

    def allowance(self) -> int:
        """Bytes that can be recorded now without exceeding the bound: a throttled
        fetch asks for no more, so one large fetch cannot overshoot the rate by much
        (unlimited: ``sys.maxsize``)."""
        if self.unlimited:
            return sys.maxsize
        total, elapsed = self._measure(self.clock())
        return max(0, int(self.rate * self._span(elapsed)) - total)

    def throttle_time_s(self) -> float:
        """How long, recording nothing more, until ``is_exceeded()`` turns False (0 when
        it is already): the time since the oldest sample must grow to total / rate.
        Never more than a whole window, after which every sample has expired."""
        if not self.is_exceeded():
            return 0.0
        total, elapsed = self._measure(self.clock())
        return min(max(total / self.rate - elapsed, 0.0), self.samples * self.sample_s)


@dataclass(slots=True)
class ReplicationQuotas:
    """A broker's two replication quotas: what it sends as leader, what it receives
    as follower."""

    leader: ReplicationQuota
    follower: ReplicationQuota

    @classmethod
    def unlimited(cls, clock: Callable[[], float] = time.monotonic) -> ReplicationQuotas:
        return cls(ReplicationQuota(clock=clock), ReplicationQuota(clock=clock))


def is_listed(value: str, broker_id: int, partition: int) -> bool:
    """Does the throttled-replicas ``value`` list ``partition`` for ``broker_id``?
    (An empty value, the common case, lists nothing and costs no cache lookup.)"""
    return bool(value) and partition in throttled_partitions(value, broker_id)


def is_throttled_copy(value: str, broker_id: int, partition: int, in_sync: bool) -> bool:
    """Does the throttle apply to this replica of ``partition``? Only to a listed
    partition whose follower is catching up (Kafka's shouldLeaderThrottle /
    shouldFollowerThrottle, without the quota check, which ``FetchBudget`` makes)."""
    return not in_sync and is_listed(value, broker_id, partition)


class FetchBudget:
    """The bytes one fetch may carry for throttled copies, handed out from a quota's
    allowance as the fetch visits its partitions (read once, on first use)."""

    __slots__ = ("_left", "_quota")

    def __init__(self, quota: ReplicationQuota) -> None:
        self._quota = quota
        self._left: int | None = None

    def take(self, want: int) -> int:
        """Up to ``want`` bytes for one partition; 0 means leave it out this time."""
        if self._left is None:
            self._left = self._quota.allowance()
        granted = min(want, self._left)
        self._left -= granted
        return granted
