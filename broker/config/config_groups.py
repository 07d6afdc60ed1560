"""The group coordinator's keys of ``BrokerConfig``: session timeouts, the first
rebalance's delay, and the ``__consumer_offsets`` topic and its retention."""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.broker.config.config_keys import at_least, config_key


@dataclass(frozen=True)
class GroupSettings:
    """The group coordinator's keys of ``BrokerConfig``."""

    __slots__ = ()  # BrokerConfig holds the slots

    group_min_session_timeout_ms: int = config_key(
        "group.min.session.timeout.ms",
        6000,
        "Shortest session timeout a group member may ask for (INVALID_SESSION_TIMEOUT).",
        at_least(1),
    )
    group_max_session_timeout_ms: int = config_key(
        "group.max.session.timeout.ms",
        1800000,
        "Longest session timeout a group member may ask for (INVALID_SESSION_TIMEOUT).",
        at_least(1),
    )
    group_initial_rebalance_delay_ms: int = config_key(
        "group.initial.rebalance.delay.ms",
        3000,
        "An empty group's first rebalance waits this long for more members, again while"
        " they keep arriving (dev and test clusters set it low; 0 waits 50 ms rounds).",
        at_least(0),
    )
    group_max_size: int = config_key(
        "group.max.size", 2147483647, "Most members one group may have.", at_least(1)
    )
    offsets_topic_num_partitions: int = config_key(
        "offsets.topic.num.partitions",
        50,
        "Partitions of __consumer_offsets (fixed once it is created).",
        at_least(1),
    )
    offsets_topic_replication_factor: int = config_key(
        "offsets.topic.replication.factor",
        3,
        "Replicas of __consumer_offsets, capped by the brokers alive when it is created.",
        at_least(1),
    )
    offsets_commit_timeout_ms: int = config_key(
        "offsets.commit.timeout.ms",
        5000,
        "How long a commit waits for every in-sync replica of its offsets partition.",
        at_least(1),
    )
    offsets_retention_minutes: int = config_key(
        "offsets.retention.minutes",
        10080,
        "Committed offsets of a group without members are kept this long.",
        at_least(1),
    )
    offsets_retention_check_interval_ms: int = config_key(
        "offsets.retention.check.interval.ms",
        600000,
        "How often expired offsets are looked for.",
        at_least(1),
    )
    offset_metadata_max_bytes: int = config_key(
        "offset.metadata.max.bytes",
        4096,
        "Longest metadata string a commit may carry (OFFSET_METADATA_TOO_LARGE).",
        at_least(0),
    )
