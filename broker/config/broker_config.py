"""Broker and topic configuration: Kafka's property names, types and defaults.

How this works: each configuration class is a frozen dataclass whose fields ARE the
table. A field's name is the Kafka property with dots turned into underscores
(``log.segment.bytes`` -> ``log_segment_bytes``); its metadata carries the Kafka name,
the validator and the one-line doc; its annotation is the type used to parse the text
of a ``.properties`` file. So a key is declared exactly once, and code reads typed
attributes (``config.message_max_bytes``) instead of looking strings up.

Sources, later ones winning: the defaults below, a ``.properties`` file (Java's
``java.util.Properties`` syntax), then command-line overrides. An unknown key or a
value that does not parse or validate raises ``ConfigError`` naming the key.

Topic-level keys (``TopicConfig``) inherit their defaults from a broker key
(``segment.bytes`` from ``log.segment.bytes`` ...); ``BrokerConfig.topic_config``
applies a topic's overrides (from ``/config/topics/T``) on top of those.

``BrokerConfig`` is one table assembled from one part per concern: listeners and
security (broker/config/config_listeners.py), the log and its cleaner (broker/config/config_log.py),
replication and leadership (broker/config/config_replication.py), the group coordinator
(broker/config/config_groups.py), and here the keys of the broker itself (identity, ZooKeeper,
topic creation, request limits, metrics). The parts are dataclasses without slots of
their own; ``BrokerConfig`` holds the slots of every key. How a row is declared, parsed
and validated is broker/config/config_keys.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minibroker.broker.config.config_groups import GroupSettings
from minibroker.broker.config.config_keys import (
    LONG_MAX,
    apply_values,
    at_least,
    between,
    config_key,
    fraction,
    one_of,
)
from minibroker.broker.config.config_listeners import ListenerSettings
from minibroker.broker.config.config_log import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    TIMESTAMP_TYPES,
    LogSettings,
)
from minibroker.broker.config.config_replication import ReplicationSettings
from minibroker.broker.config.config_transactions import TransactionSettings
from minibroker.broker.config.properties import parse_properties
from minibroker.broker.quotas.replication_quota import throttled_replicas_problem
from minibroker.protocol.errors import ConfigError


@dataclass(frozen=True, slots=True)
class BrokerConfig(
    GroupSettings, TransactionSettings, ReplicationSettings, LogSettings, ListenerSettings
):
    """Broker properties (Kafka 2.x names and defaults unless the doc says otherwise)."""

    broker_id: int = config_key(
        "broker.id",
        0,
        "This broker's id; Kafka's -1 auto-generation is not supported.",
        at_least(0),
    )
    broker_rack: str | None = config_key(
        "broker.rack",
        None,
        "Rack of this broker (metadata, and follower fetching: replica.selector.class).",
    )
    zookeeper_connect: str | None = config_key(
        "zookeeper.connect",
        None,
        "host:port[,host:port...][/chroot]; unset = standalone broker without a controller.",
    )
    zookeeper_session_timeout_ms: int = config_key(
        "zookeeper.session.timeout.ms", 18000, "ZooKeeper session timeout.", at_least(1)
    )
    zookeeper_connection_timeout_ms: int | None = config_key(
        "zookeeper.connection.timeout.ms", None, "Connect timeout; default: session timeout."
    )
    num_partitions: int = config_key(
        "num.partitions", 1, "Partitions of auto-created topics.", at_least(1)
    )
    default_replication_factor: int = config_key(
        "default.replication.factor", 1, "Replication factor of auto-created topics.", at_least(1)
    )
    auto_create_topics_enable: bool = config_key(
        "auto.create.topics.enable", True, "Create a topic when Metadata names an unknown one."
    )
    delete_topic_enable: bool = config_key("delete.topic.enable", True, "Allow topic deletion.")
    fetch_max_bytes: int = config_key(
        "fetch.max.bytes", 57671680, "Cap on a fetch response's record bytes.", at_least(0)
    )
    socket_request_max_bytes: int = config_key(
        "socket.request.max.bytes", 104857600, "Largest request frame.", at_least(1)
    )
    connections_max_idle_ms: int = config_key(
        "connections.max.idle.ms", 600000, "Close connections idle this long.", at_least(1)
    )
    queued_max_request_bytes: int = config_key(
        "queued.max.request.bytes",
        536870912,
        "Queued request and response bytes over all connections before no new request"
        " is read; -1 = unbounded (Kafka's default, which lets clients that never read"
        " their responses exhaust memory).",
        at_least(-1),
    )
    request_max_partitions: int = config_key(
        "request.max.partitions",
        5000,
        "Most partitions (topics, for Metadata; groups, resources, ACLs for the APIs"
        " naming those) one request may name; more is INVALID_REQUEST, checked before"
        " any per-item work."
        " Not a Kafka key: a request is handled on the event loop, ~20 us a partition,"
        " so this bounds one request's hold on every other client to ~100 ms.",
        at_least(1),
    )
    request_receive_timeout_ms: int = config_key(
        "request.receive.timeout.ms",
        30000,
        "Close a connection whose request frame, once started, is not complete in this"
        " long (not a Kafka key: Kafka only has connections.max.idle.ms).",
        at_least(1),
    )
    request_timeout_ms: int = config_key(
        "request.timeout.ms",
        30000,
        "Longest acks=all wait; also inter-broker requests.",
        at_least(0),
    )
    controller_socket_timeout_ms: int = config_key(
        "controller.socket.timeout.ms",
        30000,
        "Timeout of controller-to-broker requests.",
        at_least(0),
    )
    metrics_port: int = config_key(
        "metrics.port",
        -1,
        "Prometheus /metrics port (minibroker's own key); -1 = off, 0 = any free port.",
        between(-1, 65535),
    )
    metrics_bind_address: str | None = config_key(
        "metrics.bind.address",
        None,
        "Address the /metrics endpoint binds (minibroker's own key); default: the host"
        " of listeners.",
    )
    quota_window_num: int = config_key(
        "quota.window.num",
        11,
        "Samples a client quota's rate is measured over (broker/quotas/client_quotas.py).",
        at_least(2),
    )
    quota_window_size_seconds: int = config_key(
        "quota.window.size.seconds", 1, "Length of one client quota sample.", at_least(1)
    )
    standalone_accept_controller_requests: bool = config_key(
        "standalone.accept.controller.requests",
        False,
        "Standalone only (minibroker's own key): obey LeaderAndIsr / StopReplica / "
        "UpdateMetadata from any sender, for tests and benches that play the controller "
        "on a broker nobody else reaches. Ignored with zookeeper.connect.",
    )

    def topic_config(self, overrides: Mapping[str, str] | None = None) -> TopicConfig:
        """This broker's topic defaults with a topic's own overrides applied."""
        base: dict[str, Any] = {}
        for f in dataclasses.fields(TopicConfig):
            inherits = f.metadata["inherits"]
            base[f.name] = getattr(self, inherits) if inherits else f.default
        defaults = TopicConfig(**base)
        return apply_values(defaults, overrides or {}) if overrides else defaults

    @classmethod
    def from_properties(
        cls,
        path: str | Path | None = None,
        overrides: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    ) -> BrokerConfig:
        """Defaults, then the file at ``path``, then ``overrides`` (e.g. CLI flags)."""
        values: dict[str, str] = {}
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
            values.update(parse_properties(text))
        values.update(dict(overrides.items()) if isinstance(overrides, Mapping) else overrides)
        config = apply_values(cls(), values)
        config.check_listeners()
        return config


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """Per-topic keys; each default comes from the broker key named in ``inherits``."""

    segment_bytes: int = config_key(
        "segment.bytes", 1073741824, "Roll at this size.", at_least(14), "log_segment_bytes"
    )
    segment_ms: int = config_key(
        "segment.ms", 604800000, "Roll at this age.", at_least(1), "roll_ms"
    )
    segment_index_bytes: int = config_key(
        "segment.index.bytes",
        10485760,
        "Index file size.",
        at_least(4),
        "log_index_size_max_bytes",
    )
    index_interval_bytes: int = config_key(
        "index.interval.bytes",
        4096,
        "Bytes between index entries.",
        at_least(0),
        "log_index_interval_bytes",
    )
    retention_ms: int = config_key(
        "retention.ms", 604800000, "Age limit; -1 = forever.", at_least(-1), "retention_ms"
    )
    retention_bytes: int = config_key(
        "retention.bytes",
        -1,
        "Size limit; -1 = none.",
        at_least(-1),
        "log_retention_bytes",
        kind="LONG",
    )
    min_insync_replicas: int = config_key(
        "min.insync.replicas", 1, "Smallest ISR for acks=all.", at_least(1), "min_insync_replicas"
    )
    unclean_leader_election_enable: bool = config_key(
        "unclean.leader.election.enable",
        False,
        "Allow out-of-ISR leaders.",
        None,
        "unclean_leader_election_enable",
    )
    message_timestamp_type: str = config_key(
        "message.timestamp.type",
        "CreateTime",
        "CreateTime or LogAppendTime.",
        one_of(*TIMESTAMP_TYPES),
        "log_message_timestamp_type",
    )
    max_message_bytes: int = config_key(
        "max.message.bytes", 1048588, "Largest batch.", at_least(0), "message_max_bytes"
    )
    cleanup_policy: str = config_key(
        "cleanup.policy",
        "delete",
        "delete, compact or compact,delete.",
        one_of(*CLEANUP_POLICIES),
        "log_cleanup_policy",
        kind="LIST",
    )
    min_cleanable_dirty_ratio: float = config_key(
        "min.cleanable.dirty.ratio",
        0.5,
        "Clean once this share of the log is dirty.",
        fraction,
        "log_cleaner_min_cleanable_ratio",
    )
    min_compaction_lag_ms: int = config_key(
        "min.compaction.lag.ms",
        0,
        "Records stay uncompacted at least this long.",
        at_least(0),
        "log_cleaner_min_compaction_lag_ms",
    )
    max_compaction_lag_ms: int = config_key(
        "max.compaction.lag.ms",
        LONG_MAX,
        "Records are compacted within about this long.",
        at_least(1),
        "log_cleaner_max_compaction_lag_ms",
    )
    delete_retention_ms: int = config_key(
        "delete.retention.ms",
        86400000,
        "How long tombstones survive cleaning.",
        at_least(0),
        "log_cleaner_delete_retention_ms",
    )
    compression_type: str = config_key(
        "compression.type",
        "producer",
        "Stored codec: producer (as sent), uncompressed, gzip, snappy, lz4, zstd.",
        one_of(*COMPRESSION_TYPES),
        "compression_type",
    )
    flush_messages: int = config_key(
        "flush.messages",
        LONG_MAX,
        "fsync every N messages.",
        at_least(1),
        "log_flush_interval_messages",
    )
    flush_ms: int = config_key("flush.ms", LONG_MAX, "fsync this often (ms).", at_least(0), None)
    file_delete_delay_ms: int = config_key(
        "file.delete.delay.ms",
        60000,
        "Delay before deleted files go.",
        at_least(0),
        "log_segment_delete_delay_ms",
    )
    leader_replication_throttled_replicas: str = config_key(
        "leader.replication.throttled.replicas",
        "",
        "Replicas throttled on the sending leader: '*' or partition:broker,...",
        throttled_replicas_problem,
        kind="LIST",
    )
    follower_replication_throttled_replicas: str = config_key(
        "follower.replication.throttled.replicas",
        "",
        "Replicas throttled on the receiving follower: '*' or partition:broker,...",
        throttled_replicas_problem,
        kind="LIST",
    )

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"
