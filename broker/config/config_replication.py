"""The replication and leadership keys of ``BrokerConfig``: the ISR, follower fetches,
controlled shutdown and the preferred-leader rebalance."""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.broker.config.config_keys import LONG_MAX, at_least, between, config_key

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
"""The one ``replica.selector.class`` served: Kafka's rack-aware selector
(broker/replication/replica_selector.py)."""


@dataclass(frozen=True)
class ReplicationSettings:
    """The replication and leadership keys of ``BrokerConfig``."""

    __slots__ = ()  # BrokerConfig holds the slots

    min_insync_replicas: int = config_key(
        "min.insync.replicas", 1, "Smallest ISR that accepts acks=all writes.", at_least(1)
    )
    unclean_leader_election_enable: bool = config_key(
        "unclean.leader.election.enable", False, "Allow an out-of-ISR replica to lead."
    )
    replica_selector_class: str | None = config_key(
        "replica.selector.class",
        None,
        f"Follower fetching (KIP-392): {RACK_AWARE_REPLICA_SELECTOR} points consumers with"
        " a client.rack at a replica in their rack; unset, they read from leaders.",
        lambda v: (
            None
            if v in (None, "", RACK_AWARE_REPLICA_SELECTOR)
            else f"only {RACK_AWARE_REPLICA_SELECTOR} is served"
        ),
    )
    replica_lag_time_max_ms: int = config_key(
        "replica.lag.time.max.ms",
        30000,
        "A follower not caught up this long leaves the ISR.",
        at_least(1),
    )
    replica_fetch_max_bytes: int = config_key(
        "replica.fetch.max.bytes",
        1048576,
        "Bytes per partition a follower fetch asks for.",
        at_least(0),
    )
    replica_fetch_min_bytes: int = config_key(
        "replica.fetch.min.bytes", 1, "min_bytes of follower fetches.", at_least(0)
    )
    replica_fetch_response_max_bytes: int = config_key(
        "replica.fetch.response.max.bytes",
        10485760,
        "max_bytes of a follower fetch.",
        at_least(0),
    )
    replica_fetch_wait_max_ms: int = config_key(
        "replica.fetch.wait.max.ms", 500, "max_wait_ms of follower fetches.", at_least(0)
    )
    replica_fetch_backoff_ms: int = config_key(
        "replica.fetch.backoff.ms", 1000, "Pause after a failed follower fetch.", at_least(0)
    )
    num_replica_fetchers: int = config_key(
        "num.replica.fetchers", 1, "Fetcher tasks per source broker.", at_least(1)
    )
    replica_high_watermark_checkpoint_interval_ms: int = config_key(
        "replica.high.watermark.checkpoint.interval.ms",
        5000,
        "How often replication-offset-checkpoint is written.",
        at_least(1),
    )
    replica_alter_log_dirs_io_max_bytes_per_second: int = config_key(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        LONG_MAX,
        "Throttle of log-dir moves (bytes/s).",
        at_least(1),
    )
    leader_replication_throttled_rate: int = config_key(
        "leader.replication.throttled.rate",
        LONG_MAX,
        "Bytes/s this broker sends as leader to the replicas topics list in"
        " leader.replication.throttled.replicas (normally set dynamically).",
        at_least(1),
    )
    follower_replication_throttled_rate: int = config_key(
        "follower.replication.throttled.rate",
        LONG_MAX,
        "Bytes/s this broker fetches as follower for the replicas topics list in"
        " follower.replication.throttled.replicas (normally set dynamically).",
        at_least(1),
    )
    controlled_shutdown_enable: bool = config_key(
        "controlled.shutdown.enable", True, "Move leadership away before stopping."
    )
    controlled_shutdown_max_retries: int = config_key(
        "controlled.shutdown.max.retries", 3, "Attempts of controlled shutdown.", at_least(0)
    )
    controlled_shutdown_retry_backoff_ms: int = config_key(
        "controlled.shutdown.retry.backoff.ms", 5000, "Pause between attempts.", at_least(0)
    )
    auto_leader_rebalance_enable: bool = config_key(
        "auto.leader.rebalance.enable", True, "Move leadership back to preferred replicas."
    )
    leader_imbalance_check_interval_seconds: int = config_key(
        "leader.imbalance.check.interval.seconds", 300, "How often to check.", at_least(1)
    )
    leader_imbalance_per_broker_percentage: int = config_key(
        "leader.imbalance.per.broker.percentage",
        10,
        "Imbalance that triggers a rebalance.",
        between(0, 100),
    )
