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
"""

from __future__ import annotations

import dataclasses
import socket
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from minibroker.broker.properties import parse_properties
from minibroker.broker.replication_quota import throttled_replicas_problem
from minibroker.protocol.errors import ConfigError

Validator = Callable[[Any], str | None]
"""Returns None when the value is acceptable, else what is wrong with it."""

LONG_MAX = 2**63 - 1
"""Kafka's Long.MAX_VALUE, its spelling of "no limit" for several byte and count keys."""

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete",)  # compaction is not implemented
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


def at_least(low: int) -> Validator:
    return lambda v: None if v is None or v >= low else f"must be >= {low}"


def between(low: int, high: int) -> Validator:
    return lambda v: None if v is None or low <= v <= high else f"must be in [{low}, {high}]"


def one_of(*choices: str) -> Validator:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"


def non_empty(v: Any) -> str | None:
    return None if v else "must not be empty"


def _key(
    name: str,
    default: Any,
    doc: str,
    check: Validator | None = None,
    inherits: str | None = None,
) -> Any:
    """One row of a configuration table (see the module docstring)."""
    meta = {"name": name, "doc": doc, "check": check, "inherits": inherits}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Broker properties (Kafka 2.x names and defaults unless the doc says otherwise)."""

    broker_id: int = _key(
        "broker.id",
        0,
        "This broker's id; Kafka's -1 auto-generation is not supported.",
        at_least(0),
    )
    broker_rack: str | None = _key("broker.rack", None, "Rack of this broker (metadata only).")
    listeners: str = _key(
        "listeners",
        "PLAINTEXT://:9092",
        "Where to listen: PLAINTEXT://host:port or host:port; empty host = all interfaces, "
        "port 0 = any free port.",
    )
    advertised_listeners: str | None = _key(
        "advertised.listeners", None, "Endpoint published to clients; default: listeners."
    )
    kafka_listeners: str | None = _key(
        "kafka.listeners",
        None,
        "Where to serve Kafka's binary protocol (host:port, port 0 = any free port), beside "
        "the msgpack listener; unset = no Kafka listener.",
    )
    kafka_advertised_listeners: str | None = _key(
        "kafka.advertised.listeners",
        None,
        "Kafka-protocol endpoint published to Kafka clients; default: kafka.listeners.",
    )
    log_dirs: list[str] = _key(  # noqa: RUF009 - _key uses a default_factory for lists
        "log.dirs", ["/tmp/kafka-logs"], "Comma-separated data directories.", non_empty
    )
    zookeeper_connect: str | None = _key(
        "zookeeper.connect",
        None,
        "host:port[,host:port...][/chroot]; unset = standalone broker without a controller.",
    )
    zookeeper_session_timeout_ms: int = _key(
        "zookeeper.session.timeout.ms", 18000, "ZooKeeper session timeout.", at_least(1)
    )
    zookeeper_connection_timeout_ms: int | None = _key(
        "zookeeper.connection.timeout.ms", None, "Connect timeout; default: session timeout."
    )
    num_partitions: int = _key(
        "num.partitions", 1, "Partitions of auto-created topics.", at_least(1)
    )
    default_replication_factor: int = _key(
        "default.replication.factor", 1, "Replication factor of auto-created topics.", at_least(1)
    )
    auto_create_topics_enable: bool = _key(
        "auto.create.topics.enable", True, "Create a topic when Metadata names an unknown one."
    )
    delete_topic_enable: bool = _key("delete.topic.enable", True, "Allow topic deletion.")
    min_insync_replicas: int = _key(
        "min.insync.replicas", 1, "Smallest ISR that accepts acks=all writes.", at_least(1)
    )
    unclean_leader_election_enable: bool = _key(
        "unclean.leader.election.enable", False, "Allow an out-of-ISR replica to lead."
    )
    replica_lag_time_max_ms: int = _key(
        "replica.lag.time.max.ms",
        30000,
        "A follower not caught up this long leaves the ISR.",
        at_least(1),
    )
    replica_fetch_max_bytes: int = _key(
        "replica.fetch.max.bytes",
        1048576,
        "Bytes per partition a follower fetch asks for.",
        at_least(0),
    )
    replica_fetch_min_bytes: int = _key(
        "replica.fetch.min.bytes", 1, "min_bytes of follower fetches.", at_least(0)
    )
    replica_fetch_response_max_bytes: int = _key(
        "replica.fetch.response.max.bytes",
        10485760,
        "max_bytes of a follower fetch.",
        at_least(0),
    )
    replica_fetch_wait_max_ms: int = _key(
        "replica.fetch.wait.max.ms", 500, "max_wait_ms of follower fetches.", at_least(0)
    )
    replica_fetch_backoff_ms: int = _key(
        "replica.fetch.backoff.ms", 1000, "Pause after a failed follower fetch.", at_least(0)
    )
    num_replica_fetchers: int = _key(
        "num.replica.fetchers", 1, "Fetcher tasks per source broker.", at_least(1)
    )
    replica_high_watermark_checkpoint_interval_ms: int = _key(
        "replica.high.watermark.checkpoint.interval.ms",
        5000,
        "How often replication-offset-checkpoint is written.",
        at_least(1),
    )
    replica_alter_log_dirs_io_max_bytes_per_second: int = _key(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        LONG_MAX,
        "Throttle of log-dir moves (bytes/s).",
        at_least(1),
    )
    log_segment_bytes: int = _key(
        "log.segment.bytes", 1073741824, "Roll a segment at this size.", at_least(14)
    )
    log_roll_ms: int | None = _key(
        "log.roll.ms", None, "Roll a segment this old (ms).", at_least(1)
    )
    log_roll_hours: int = _key("log.roll.hours", 168, "log.roll.ms in hours.", at_least(1))
    log_index_interval_bytes: int = _key(
        "log.index.interval.bytes", 4096, "Bytes between sparse index entries.", at_least(0)
    )
    log_index_size_max_bytes: int = _key(
        "log.index.size.max.bytes", 10485760, "Preallocated size of an index file.", at_least(4)
    )
    log_retention_ms: int | None = _key(
        "log.retention.ms", None, "Delete segments older than this; -1 = forever.", at_least(-1)
    )
    log_retention_minutes: int | None = _key(
        "log.retention.minutes", None, "log.retention.ms in minutes.", at_least(-1)
    )
    log_retention_hours: int = _key(
        "log.retention.hours", 168, "log.retention.ms in hours.", at_least(-1)
    )
    log_retention_bytes: int = _key(
        "log.retention.bytes",
        -1,
        "Delete old segments beyond this size; -1 = no limit.",
        at_least(-1),
    )
    log_retention_check_interval_ms: int = _key(
        "log.retention.check.interval.ms", 300000, "How often retention runs.", at_least(1)
    )
    log_scrubber_enable: bool = _key(
        "log.scrubber.enable",
        True,
        "Re-check the CRC-32C of every closed segment in the background; a corrupt "
        "replica found so is taken out of service and repaired from the leader.",
    )
    log_scrubber_io_max_bytes_per_second: int = _key(
        "log.scrubber.io.max.bytes.per.second",
        4 * 1024 * 1024,
        "Read rate of the scrubber (bytes/s): small enough to leave the disk to produce "
        "and fetch, a 1 GiB segment every ~4 minutes.",
        at_least(1),
    )
    log_scrubber_interval_ms: int = _key(
        "log.scrubber.interval.ms",
        3600000,
        "Pause between two scrubber passes over every closed segment.",
        at_least(1),
    )
    producer_id_expiration_ms: int = _key(
        "producer.id.expiration.ms",
        86400000,
        "A partition forgets an idempotent producer idle this long (checked with retention).",
        at_least(1),
    )
    group_min_session_timeout_ms: int = _key(
        "group.min.session.timeout.ms",
        6000,
        "Shortest session timeout a group member may ask for (INVALID_SESSION_TIMEOUT).",
        at_least(1),
    )
    group_max_session_timeout_ms: int = _key(
        "group.max.session.timeout.ms",
        1800000,
        "Longest session timeout a group member may ask for (INVALID_SESSION_TIMEOUT).",
        at_least(1),
    )
    group_initial_rebalance_delay_ms: int = _key(
        "group.initial.rebalance.delay.ms",
        3000,
        "An empty group's first rebalance waits this long for more members (dev and test"
        " clusters set it low).",
        at_least(0),
    )
    group_max_size: int = _key(
        "group.max.size", 2147483647, "Most members one group may have.", at_least(1)
    )
    offsets_topic_num_partitions: int = _key(
        "offsets.topic.num.partitions",
        50,
        "Partitions of __consumer_offsets (fixed once it is created).",
        at_least(1),
    )
    offsets_topic_replication_factor: int = _key(
        "offsets.topic.replication.factor",
        3,
        "Replicas of __consumer_offsets, capped by the brokers alive when it is created.",
        at_least(1),
    )
    offsets_commit_timeout_ms: int = _key(
        "offsets.commit.timeout.ms",
        5000,
        "How long a commit waits for every in-sync replica of its offsets partition.",
        at_least(1),
    )
    offsets_retention_minutes: int = _key(
        "offsets.retention.minutes",
        10080,
        "Committed offsets of a group without members are kept this long.",
        at_least(1),
    )
    offsets_retention_check_interval_ms: int = _key(
        "offsets.retention.check.interval.ms",
        600000,
        "How often expired offsets are looked for.",
        at_least(1),
    )
    offset_metadata_max_bytes: int = _key(
        "offset.metadata.max.bytes",
        4096,
        "Longest metadata string a commit may carry (OFFSET_METADATA_TOO_LARGE).",
        at_least(0),
    )
    log_segment_delete_delay_ms: int = _key(
        "log.segment.delete.delay.ms",
        60000,
        "Delay before a deleted segment's files go.",
        at_least(0),
    )
    log_flush_interval_messages: int = _key(
        "log.flush.interval.messages", LONG_MAX, "fsync after this many messages.", at_least(1)
    )
    log_flush_interval_ms: int | None = _key(
        "log.flush.interval.ms", None, "fsync a log this long after its last flush.", at_least(0)
    )
    log_flush_offset_checkpoint_interval_ms: int = _key(
        "log.flush.offset.checkpoint.interval.ms",
        60000,
        "How often recovery-point-offset-checkpoint is written.",
        at_least(0),
    )
    log_flush_start_offset_checkpoint_interval_ms: int = _key(
        "log.flush.start.offset.checkpoint.interval.ms",
        60000,
        "How often log-start-offset-checkpoint is written.",
        at_least(0),
    )
    log_message_timestamp_type: str = _key(
        "log.message.timestamp.type",
        "CreateTime",
        "CreateTime or LogAppendTime.",
        one_of(*TIMESTAMP_TYPES),
    )
    log_cleanup_policy: str = _key(
        "log.cleanup.policy", "delete", "Only delete is supported.", one_of(*CLEANUP_POLICIES)
    )
    compression_type: str = _key(
        "compression.type",
        "producer",
        "Codec batches are stored in: producer (as sent), uncompressed, gzip, snappy, lz4, zstd.",
        one_of(*COMPRESSION_TYPES),
    )
    num_recovery_threads_per_data_dir: int = _key(
        "num.recovery.threads.per.data.dir", 1, "Log recovery workers per log dir.", at_least(1)
    )
    message_max_bytes: int = _key(
        "message.max.bytes", 1048588, "Largest record batch accepted (bytes).", at_least(0)
    )
    fetch_max_bytes: int = _key(
        "fetch.max.bytes", 57671680, "Cap on a fetch response's record bytes.", at_least(0)
    )
    socket_request_max_bytes: int = _key(
        "socket.request.max.bytes", 104857600, "Largest request frame.", at_least(1)
    )
    connections_max_idle_ms: int = _key(
        "connections.max.idle.ms", 600000, "Close connections idle this long.", at_least(1)
    )
    queued_max_request_bytes: int = _key(
        "queued.max.request.bytes",
        536870912,
        "Queued request and response bytes over all connections before no new request"
        " is read; -1 = unbounded (Kafka's default, which lets clients that never read"
        " their responses exhaust memory).",
        at_least(-1),
    )
    request_max_partitions: int = _key(
        "request.max.partitions",
        5000,
        "Most partitions (topics, for Metadata) one Produce, Fetch, ListOffsets,"
        " OffsetForLeaderEpoch or Metadata request may name; more is INVALID_REQUEST."
        " Not a Kafka key: a request is handled on the event loop, ~20 us a partition,"
        " so this bounds one request's hold on every other client to ~100 ms.",
        at_least(1),
    )
    request_receive_timeout_ms: int = _key(
        "request.receive.timeout.ms",
        30000,
        "Close a connection whose request frame, once started, is not complete in this"
        " long (not a Kafka key: Kafka only has connections.max.idle.ms).",
        at_least(1),
    )
    request_timeout_ms: int = _key(
        "request.timeout.ms",
        30000,
        "Longest acks=all wait; also inter-broker requests.",
        at_least(0),
    )
    controller_socket_timeout_ms: int = _key(
        "controller.socket.timeout.ms",
        30000,
        "Timeout of controller-to-broker requests.",
        at_least(0),
    )
    controlled_shutdown_enable: bool = _key(
        "controlled.shutdown.enable", True, "Move leadership away before stopping."
    )
    controlled_shutdown_max_retries: int = _key(
        "controlled.shutdown.max.retries", 3, "Attempts of controlled shutdown.", at_least(0)
    )
    controlled_shutdown_retry_backoff_ms: int = _key(
        "controlled.shutdown.retry.backoff.ms", 5000, "Pause between attempts.", at_least(0)
    )
    auto_leader_rebalance_enable: bool = _key(
        "auto.leader.rebalance.enable", True, "Move leadership back to preferred replicas."
    )
    leader_imbalance_check_interval_seconds: int = _key(
        "leader.imbalance.check.interval.seconds", 300, "How often to check.", at_least(1)
    )
    leader_imbalance_per_broker_percentage: int = _key(
        "leader.imbalance.per.broker.percentage",
        10,
        "Imbalance that triggers a rebalance.",
        between(0, 100),
    )
    metrics_port: int = _key(
        "metrics.port",
        -1,
        "Prometheus /metrics port (minibroker's own key); -1 = off, 0 = any free port.",
        between(-1, 65535),
    )
    inter_broker_listener_name: str = _key(
        "inter.broker.listener.name",
        "PLAINTEXT",
        "The listener that carries controller requests (LeaderAndIsr, StopReplica, "
        "UpdateMetadata); refused on every other listener.",
    )
    standalone_accept_controller_requests: bool = _key(
        "standalone.accept.controller.requests",
        False,
        "Standalone only (minibroker's own key): obey LeaderAndIsr / StopReplica / "
        "UpdateMetadata from any sender, for tests and benches that play the controller "
        "on a broker nobody else reaches. Ignored with zookeeper.connect.",
    )

    # -- derived values ------------------------------------------------------------------

    @property
    def retention_ms(self) -> int:
        """Effective retention: .ms, else .minutes, else .hours (Kafka's precedence)."""
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return _scaled(self.log_retention_minutes, 60_000)
        return _scaled(self.log_retention_hours, 3_600_000)

    @property
    def roll_ms(self) -> int:
        if self.log_roll_ms is not None:
            return self.log_roll_ms
        return self.log_roll_hours * 3_600_000

    @property
    def listen_address(self) -> tuple[str, int]:
        """(host, port) of ``listeners``; host "" means all interfaces."""
        return parse_endpoint(self.listeners, "listeners")

    @property
    def advertised_address(self) -> tuple[str, int]:
        """(host, port) given to clients; the port is 0 until the server binds."""
        if self.advertised_listeners:
            return parse_endpoint(self.advertised_listeners, "advertised.listeners")
        host, port = self.listen_address
        return (host if host not in ("", "0.0.0.0", "::") else socket.gethostname(), port)

    @property
    def kafka_listen_address(self) -> tuple[str, int] | None:
        """(host, port) of ``kafka.listeners``, None without a Kafka listener."""
        if not self.kafka_listeners:
            return None
        return parse_endpoint(self.kafka_listeners, "kafka.listeners")

    @property
    def kafka_advertised_address(self) -> tuple[str, int] | None:
        """(host, port) Kafka clients are given; the port is 0 until the server binds."""
        if self.kafka_advertised_listeners:
            return parse_endpoint(self.kafka_advertised_listeners, "kafka.advertised.listeners")
        listen = self.kafka_listen_address
        if listen is None:
            return None
        host, port = listen
        if host in ("", "0.0.0.0", "::"):
            host = self.advertised_address[0]
        return host, port

    def topic_config(self, overrides: Mapping[str, str] | None = None) -> TopicConfig:
        """This broker's topic defaults with a topic's own overrides applied."""
        base: dict[str, Any] = {}
        for f in dataclasses.fields(TopicConfig):
            inherits = f.metadata["inherits"]
            base[f.name] = getattr(self, inherits) if inherits else f.default
        defaults = TopicConfig(**base)
        return _apply(defaults, overrides or {}) if overrides else defaults

    # -- construction --------------------------------------------------------------------

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
        return _apply(cls(), values)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """Per-topic keys; each default comes from the broker key named in ``inherits``."""

    segment_bytes: int = _key(
        "segment.bytes", 1073741824, "Roll at this size.", at_least(14), "log_segment_bytes"
    )
    segment_ms: int = _key("segment.ms", 604800000, "Roll at this age.", at_least(1), "roll_ms")
    segment_index_bytes: int = _key(
        "segment.index.bytes",
        10485760,
        "Index file size.",
        at_least(4),
        "log_index_size_max_bytes",
    )
    index_interval_bytes: int = _key(
        "index.interval.bytes",
        4096,
        "Bytes between index entries.",
        at_least(0),
        "log_index_interval_bytes",
    )
    retention_ms: int = _key(
        "retention.ms", 604800000, "Age limit; -1 = forever.", at_least(-1), "retention_ms"
    )
    retention_bytes: int = _key(
        "retention.bytes", -1, "Size limit; -1 = none.", at_least(-1), "log_retention_bytes"
    )
    min_insync_replicas: int = _key(
        "min.insync.replicas", 1, "Smallest ISR for acks=all.", at_least(1), "min_insync_replicas"
    )
    unclean_leader_election_enable: bool = _key(
        "unclean.leader.election.enable",
        False,
        "Allow out-of-ISR leaders.",
        None,
        "unclean_leader_election_enable",
    )
    message_timestamp_type: str = _key(
        "message.timestamp.type",
        "CreateTime",
        "CreateTime or LogAppendTime.",
        one_of(*TIMESTAMP_TYPES),
        "log_message_timestamp_type",
    )
    max_message_bytes: int = _key(
        "max.message.bytes", 1048588, "Largest batch.", at_least(0), "message_max_bytes"
    )
    cleanup_policy: str = _key(
        "cleanup.policy", "delete", "Only delete.", one_of(*CLEANUP_POLICIES), "log_cleanup_policy"
    )
    compression_type: str = _key(
        "compression.type",
        "producer",
        "Stored codec: producer (as sent), uncompressed, gzip, snappy, lz4, zstd.",
        one_of(*COMPRESSION_TYPES),
        "compression_type",
    )
    flush_messages: int = _key(
        "flush.messages",
        LONG_MAX,
        "fsync every N messages.",
        at_least(1),
        "log_flush_interval_messages",
    )
    flush_ms: int = _key("flush.ms", LONG_MAX, "fsync this often (ms).", at_least(0), None)
    file_delete_delay_ms: int = _key(
        "file.delete.delay.ms",
        60000,
        "Delay before deleted files go.",
        at_least(0),
        "log_segment_delete_delay_ms",
    )
    leader_replication_throttled_replicas: str = _key(
        "leader.replication.throttled.replicas",
        "",
        "Replicas throttled on the sending leader: '*' or partition:broker,...",
        throttled_replicas_problem,
    )
    follower_replication_throttled_replicas: str = _key(
        "follower.replication.throttled.replicas",
        "",
        "Replicas throttled on the receiving follower: '*' or partition:broker,...",
        throttled_replicas_problem,
    )

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"


def _scaled(value: int, factor: int) -> int:
    return value if value < 0 else value * factor


def parse_endpoint(text: str, key: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` or ``host:port`` (IPv6 as ``[::1]:port``) -> (host, port)."""
    spec = text.strip().split(",")[0]
    if "://" in spec:
        scheme, _, spec = spec.partition("://")
        if scheme.upper() != "PLAINTEXT":
            raise ConfigError(f"{key}: only PLAINTEXT listeners are supported, not {scheme!r}")
    host, sep, port_text = spec.rpartition(":")
    if not sep:
        raise ConfigError(f"{key}: expected host:port, got {text!r}")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"{key}: bad port {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key}: port {port} out of range")
    return host, port


def _parse_value(text: str, kind: Any, key: str) -> Any:
    """Parse the text of one property as the field's annotated type."""
    text = text.strip()
    args = typing.get_args(kind)
    if type(None) in args:  # X | None: empty or "null" means None
        if text in ("", "null"):
            return None
        kind = next(a for a in args if a is not type(None))
    try:
        if kind is bool:
            lowered = text.lower()
            if lowered not in ("true", "false"):
                raise ValueError
            return lowered == "true"
        if kind is int:
            return int(text)
        if kind is str:
            return text
        if typing.get_origin(kind) is list:
            return [part.strip() for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"{key}: invalid value {text!r} (expected {_kind_name(kind)})") from None
    raise AssertionError(f"unsupported config type {kind!r} for {key}")


def _kind_name(kind: Any) -> str:
    return {bool: "true or false", int: "an integer", str: "a string"}.get(kind, "a list")


_C = TypeVar("_C", BrokerConfig, TopicConfig)


def _apply(base: _C, values: Mapping[str, Any]) -> _C:
    """``base`` with ``values`` (Kafka names -> text or typed value) applied and validated."""
    table = {f.metadata["name"]: f for f in dataclasses.fields(base)}
    hints = typing.get_type_hints(type(base))
    changes: dict[str, Any] = {}
    for key, raw in values.items():
        f = table.get(key)
        if f is None:
            raise ConfigError(f"{key}: unknown configuration key")
        value = _parse_value(raw, hints[f.name], key) if isinstance(raw, str) else raw
        changes[f.name] = value
    for f in dataclasses.fields(base):
        value = changes.get(f.name, getattr(base, f.name))
        check = f.metadata["check"]
        problem = check(value) if check is not None else None
        if problem:
            raise ConfigError(f"{f.metadata['name']}: {problem} (got {value!r})")
    result = dataclasses.replace(base, **changes)
    if isinstance(result, BrokerConfig):
        result.listen_address  # noqa: B018 - fail at start-up on a malformed listener
        if result.advertised_listeners:
            result.advertised_address  # noqa: B018
        result.kafka_advertised_address  # noqa: B018 - and on a malformed Kafka listener
    return result


def describe_keys(config_type: type[BrokerConfig] | type[TopicConfig]) -> list[tuple[str, str]]:
    """(Kafka name, doc) of every key, in declaration order (for ``--help``-style output)."""
    return [(f.metadata["name"], f.metadata["doc"]) for f in dataclasses.fields(config_type)]
