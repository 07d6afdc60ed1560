"""The replication throttle's pieces on their own: the sliding-window byte-rate quota
(fake clock), the throttled-replicas lists (parsing, validation as topic configs), and
the leader / follower decisions of which partitions to hold back."""

from __future__ import annotations

import pytest

from minibroker.broker.admin.broker_configs import (
    FOLLOWER_THROTTLE,
    LEADER_THROTTLE,
    UNLIMITED,
    BrokerConfigs,
    validate_broker_configs,
)
from minibroker.broker.admin.topic_configs import validate_topic_overrides
from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.quotas.replication_quota import (
    ALL,
    FetchBudget,
    ReplicationQuota,
    ReplicationQuotas,
    format_throttled_replicas,
    is_throttled_copy,
    parse_throttled_replicas,
    throttled_partitions,
    throttled_replicas_problem,
)
from minibroker.protocol.errors import ConfigError, InvalidConfigError

RATE = 1000  # bytes/s
SAMPLES, SAMPLE_S = 5, 0.2  # a 1 s window, measured over at least 0.8 s


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def quota(clock: FakeClock, rate: int = RATE) -> ReplicationQuota:
    return ReplicationQuota(rate, clock=clock, samples=SAMPLES, sample_s=SAMPLE_S)


# -- the quota --------------------------------------------------------------------------


def test_bytes_under_the_rate_do_not_exceed_the_quota() -> None:
    clock = FakeClock()
    q = quota(clock)
    for _ in range(30):  # 90 bytes every 0.1 s: 90% of the rate
        q.record(90)
        clock.now += 0.1
        assert not q.is_exceeded()
    assert q.measured_rate() == pytest.approx(0.9 * RATE, rel=0.15)


def test_a_burst_at_the_start_is_measured_over_the_window_not_over_no_time() -> None:
    clock = FakeClock()
    q = quota(clock)
    q.record(800)  # 0.8 s worth at once: still within the rate over the minimum span
    assert not q.is_exceeded()
    q.record(1)
    assert q.is_exceeded()


def test_bytes_over_the_rate_exceed_the_quota_until_enough_time_passes() -> None:
    clock = FakeClock()
    q = quota(clock)
    q.record(900)  # 0.9 s worth
    assert q.is_exceeded()
    wait = q.throttle_time_s()
    assert wait == pytest.approx(900 / RATE)
    clock.now += wait - 0.01
    assert q.is_exceeded()
    clock.now += 0.02
    assert not q.is_exceeded()
    assert q.throttle_time_s() == 0.0


def test_samples_older_than_the_window_roll_out() -> None:
    clock = FakeClock()
    q = quota(clock)
    q.record(5000)
    clock.now += SAMPLES * SAMPLE_S + 0.01  # the whole window has passed
    assert q.measured_rate() == 0.0 and not q.is_exceeded()
    q.record(500)
    assert not q.is_exceeded()


def test_the_wait_is_never_longer_than_the_window() -> None:
    clock = FakeClock()
    q = quota(clock)
    q.record(10**9)
    assert q.throttle_time_s() == pytest.approx(SAMPLES * SAMPLE_S)


def test_an_unlimited_quota_is_never_exceeded_but_still_counts() -> None:
    clock = FakeClock()
    q = quota(clock, rate=-1)
    q.record(10**9)
    assert not q.is_exceeded() and q.throttle_time_s() == 0.0
    assert q.recorded_total == 10**9


def test_a_new_rate_applies_to_the_next_check() -> None:
    clock = FakeClock()
    q = quota(clock)
    q.record(1500)
    assert q.is_exceeded()
    q.set_rate(10_000)
    assert not q.is_exceeded()
    q.set_rate(-1)
    q.record(10**6)
    assert not q.is_exceeded()


# -- the throttled-replicas lists ---------------------------------------------------------


@pytest.mark.parametrize("value", ["", "*", " * ", "0:1", "0:1,0:2,3:1", " 0:1 , 1:2 "])
def test_valid_throttled_replica_lists(value: str) -> None:
    assert throttled_replicas_problem(value) is None


@pytest.mark.parametrize("value", ["1", "0:", ":1", "0-1", "a:1", "0:1,", "0:1;1:2", "**", "-1:1"])
def test_malformed_throttled_replica_lists_are_refused(value: str) -> None:
    assert throttled_replicas_problem(value) is not None
    with pytest.raises(ValueError):
        parse_throttled_replicas(value)


def test_a_list_parses_to_partitions_and_their_brokers() -> None:
    assert parse_throttled_replicas("0:1, 0:2,3:1") == {0: {1, 2}, 3: {1}}
    assert parse_throttled_replicas("") == {}
    assert parse_throttled_replicas("*") is ALL
    assert format_throttled_replicas({3: {1}, 0: {2, 1}}) == "0:1,0:2,3:1"


def test_each_broker_keeps_only_the_partitions_throttled_for_itself() -> None:
    value = "0:1,0:2,1:2,2:3"
    assert throttled_partitions(value, 1) == {0}
    assert throttled_partitions(value, 2) == {0, 1}
    assert throttled_partitions(value, 4) == frozenset()
    assert 7 in throttled_partitions("*", 4)
    assert throttled_partitions("bad", 1) == frozenset()


@pytest.mark.parametrize(
    "key", ["leader.replication.throttled.replicas", "follower.replication.throttled.replicas"]
)
def test_the_lists_are_topic_configs_validated_like_kafka(key: str) -> None:
    broker = BrokerConfig()
    assert validate_topic_overrides(broker, {key: "0:1,1:2"}) is not None
    with pytest.raises(InvalidConfigError, match=key):
        validate_topic_overrides(broker, {key: "0-1"})
    with pytest.raises(ConfigError, match=key):
        broker.topic_config({key: "everything"})
    assert getattr(broker.topic_config(), key.replace(".", "_")) == ""


# -- the broker rates ---------------------------------------------------------------------


def test_the_dynamic_rates_set_both_quotas_and_minus_one_or_absent_is_unlimited() -> None:
    quotas = ReplicationQuotas.unlimited()
    configs = BrokerConfigs(BrokerConfig(), None, zk=None, quotas=quotas)
    configs.apply_overrides({LEADER_THROTTLE: "5000", FOLLOWER_THROTTLE: "7000"})
    assert (quotas.leader.rate, quotas.follower.rate) == (5000, 7000)
    configs.apply_overrides({LEADER_THROTTLE: "-1"})
    assert quotas.leader.unlimited and quotas.follower.unlimited
    configs.apply_overrides({FOLLOWER_THROTTLE: str(UNLIMITED)})
    assert quotas.follower.unlimited
    assert validate_broker_configs({LEADER_THROTTLE: "-1"}) == {LEADER_THROTTLE: UNLIMITED}
    with pytest.raises(InvalidConfigError, match=LEADER_THROTTLE):
        validate_broker_configs({LEADER_THROTTLE: "-2"})


# -- which partitions are held back -------------------------------------------------------


@pytest.mark.parametrize(
    ("listed", "in_sync", "throttled"),
    [
        (True, False, True),  # a listed copy catching up: throttled
        (True, True, False),  # in-sync (leader: in the ISR; follower: caught up): never
        (False, False, False),  # not listed for this broker
    ],
)
def test_only_listed_replicas_that_are_catching_up_are_throttled(
    listed: bool, in_sync: bool, throttled: bool
) -> None:
    assert is_throttled_copy("0:1" if listed else "0:2", 1, 0, in_sync) is throttled
    assert is_throttled_copy("*", 4, 5, in_sync) is (not in_sync)
    assert is_throttled_copy("", 1, 0, in_sync) is False


def test_a_fetch_budget_shares_the_allowance_between_throttled_partitions() -> None:
    clock = FakeClock()
    q = quota(clock)
    q.record(500)  # the allowance is 0.8 s x 1000 B/s - 500 = 300 bytes
    assert q.allowance() == 300
    budget = FetchBudget(q)
    assert (budget.take(200), budget.take(200), budget.take(200)) == (200, 100, 0)
    q.record(10_000)
    assert q.is_exceeded() and FetchBudget(q).take(1 << 20) == 0
    assert FetchBudget(quota(clock, rate=-1)).take(1 << 20) == 1 << 20
