"""Cluster metadata and the client's connections, shared by Producer, Consumer and Admin.

How this works. ``ClusterClient`` bootstraps from a comma-separated ``host:port`` list:
the first reachable address answers a Metadata request, which names every broker; from
then on the client keeps one connection per broker address, opened when first needed
and shared by every task of the client (the connection pipelines, so sharing costs
nothing). A connection that broke is dropped and the next request opens a new one.

The metadata snapshot (:class:`ClusterMetadata`) is immutable and replaced whole by
``refresh``. Refreshes are coalesced: concurrent callers wait for one Metadata request.
Users call ``request_update()`` when a response says the leader moved
(NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, a lost connection); the background
``run`` task refreshes then, and anyway every ``METADATA_MAX_AGE_S``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from minibroker.broker.cluster.assignment import validate_topic_name
from minibroker.client.errors import wire_error
from minibroker.client.listener_probe import NOT_MSGPACK, WANTS_SASL, listener_wants
from minibroker.net.calls import Call
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey, PackedBody
from minibroker.protocol.errors import (
    ConfigError,
    IllegalSaslStateError,
    InvalidTopicError,
    KafkaError,
    NetworkError,
    UnknownTopicOrPartitionError,
)

METADATA_MAX_AGE_S = 300.0  # Kafka's metadata.max.age.ms: pick up new partitions/brokers
RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms: between metadata attempts
CONNECT_TIMEOUT_S = 10.0  # a broker that does not accept in 10 s is treated as down


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` -> [("h1", 9092), ("h2", 9093)]; raises ConfigError if bad."""
    addresses = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"bad bootstrap address {item!r} (expected host:port)")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ConfigError("no bootstrap address given")
    return addresses


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    kafka: str | None = None
    """``host:port`` of the broker's Kafka-protocol listener, None when it has none."""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1: no leader right now
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: tuple[PartitionInfo, ...]
    error_code: int = 0
    is_internal: bool = False


@dataclass(frozen=True)
class ClusterMetadata:
    """One Metadata response, indexed for the producer's and consumer's lookups."""

    brokers: dict[int, BrokerNode] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    # available_partitions' answers: the producer asks once per batch it sends
    _available: dict[str, tuple[int, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def from_response(cls, body: dict[str, Any]) -> ClusterMetadata:
        brokers = {
            b["node_id"]: BrokerNode(
                b["node_id"], b["host"], b["port"], b.get("rack"), _kafka_address(b)
            )
            for b in body["brokers"]
        }
        topics = {}
        for t in body["topics"]:
            parts = tuple(
                sorted(
                    (
                        PartitionInfo(
                            t["name"],
                            p["partition_index"],
                            p["leader_id"],
                            p.get("leader_epoch", -1),
                            tuple(p["replica_nodes"]),
                            tuple(p["isr_nodes"]),
                            tuple(p.get("offline_replicas", ())),
                            p.get("error_code", 0),
                        )
                        for p in t["partitions"]
                    ),
                    key=lambda p: p.partition,
                )
            )
            topics[t["name"]] = TopicInfo(
                t["name"], parts, t.get("error_code", 0), t.get("is_internal", False)
            )
        return cls(brokers, topics, body.get("controller_id", -1), body.get("cluster_id"))

    def leader(self, topic: str, partition: int) -> int:
        info = self.topics.get(topic)
        if info is None or partition >= len(info.partitions):
            return -1
        return info.partitions[partition].leader

    def partition_count(self, topic: str) -> int:
        info = self.topics.get(topic)
        return len(info.partitions) if info is not None else 0

    def available_partitions(self, topic: str) -> tuple[int, ...]:
        """The topic's partitions that have a leader."""
        available = self._available.get(topic)
        if available is None:
            info = self.topics.get(topic)
            if info is None:
                return ()
            available = tuple(p.partition for p in info.partitions if p.leader >= 0)
            self._available[topic] = available
        return available


def _checked(api_key: int, response: Any) -> Any:
    """The response, unless its top-level error_code says the whole request failed.

    That covers an API the broker does not serve (UNSUPPORTED_VERSION) and errors of
    APIs whose top-level code is their only one; per-partition codes are the caller's.
    """
    code = response.get("error_code", 0) if isinstance(response, dict) else 0
    if code == IllegalSaslStateError.code:  # a request before the login it wants
        message = f"{response.get('error_message')}; {WANTS_SASL}"
        raise wire_error(code, ApiKey(api_key).name, message)
    if code:
        raise wire_error(code, ApiKey(api_key).name, response.get("error_message"))
    return response


class ClusterClient:
    """Bootstrap, metadata cache and one shared connection per broker."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_id: str = "minibroker-client",
        request_timeout_s: float = 30.0,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        allow_auto_topic_creation: bool = False,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = security  # TLS / SASL of every connection (net/security.py)
        # Kafka's allow.auto.create.topics: producers ask brokers to create the unknown
        # topics they name (when auto.create.topics.enable lets them); consumers do not.
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.metadata = ClusterMetadata()
        self.topics: set[str] = set()  # topics whose metadata is kept (None = all)
        self._nursery: trio.Nursery | None = None
        self._connections: dict[tuple[str, int], Connection] = {}
        self._connecting: dict[tuple[str, int], trio.Event] = {}
        self._refreshing: trio.Event | None = None
        self._update_requested = trio.Event()
        self._last_refresh = -math.inf

    # --- lifecycle -------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Owns the connections and refreshes metadata when asked or when it is old."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                while True:
                    with trio.move_on_after(METADATA_MAX_AGE_S):
                        await self._update_requested.wait()
                    self._update_requested = trio.Event()
                    try:
                        await self.refresh()
                    except KafkaError:
                        await trio.sleep(RETRY_BACKOFF_S)
                        self._update_requested.set()  # keep trying in the background
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()

    def request_update(self) -> None:
        """Ask the background task for a metadata refresh soon."""
        self._update_requested.set()

    # --- connections -----------------------------------------------------------------

    async def connection_to(self, host: str, port: int) -> Connection:
        """The shared connection to ``host:port``, opened now if there is none."""
        address = (host, port)
        while True:
            conn = self._connections.get(address)
            if conn is not None:
                if conn.is_usable:
                    return conn
                self.drop_connection(host, port)  # broken: the reader already stopped
                continue
            pending = self._connecting.get(address)
            if pending is None:
                break
            await pending.wait()
            if address not in self._connections:
                raise NetworkError(f"cannot reach broker at {host}:{port}")
        if self._nursery is None:
            raise RuntimeError("ClusterClient.run() is not running")
        done = self._connecting[address] = trio.Event()
        try:
            conn = Connection(
                host,
                port,
                client_id=self.client_id,
                connect_timeout=self.connect_timeout_s,
                request_timeout=self.request_timeout_s,
                security=self.security,
            )
            try:
                await conn.connect()
            except NetworkError as exc:
                raise NetworkError(f"cannot reach broker at {host}:{port}") from exc
            self._connections[address] = conn
            return conn
        finally:
            del self._connecting[address]
            done.set()

    def drop_connection(self, host: str, port: int) -> None:
        """Close a connection that failed; the next request opens a fresh one."""
        conn = self._connections.pop((host, port), None)
        if conn is not None and self._nursery is not None:
            self._nursery.start_soon(conn.aclose)

    async def broker_connection(self, node_id: int) -> Connection:
        broker = self.metadata.brokers.get(node_id)
        if broker is None:
            await self.refresh()
            broker = self.metadata.brokers.get(node_id)
            if broker is None:
                raise NetworkError(f"broker {node_id} is not in the cluster metadata")
        return await self.connection_to(broker.host, broker.port)

    async def request(
        self, node_id: int, api_key: ApiKey, body: Mapping[str, Any] | PackedBody, **kwargs: Any
    ) -> Any:
        """One request to broker ``node_id``; a failed connection is dropped and raised."""
        broker = self.metadata.brokers.get(node_id)
        conn = await self.broker_connection(node_id)
        try:
            return _checked(api_key, await conn.request(api_key, body, **kwargs))
        except NetworkError:
            if broker is not None:
                self.drop_connection(broker.host, broker.port)
            self.request_update()
            raise

    def usable_connection(self, node_id: int) -> Connection | None:
        """The open connection to broker ``node_id``, None when there is none usable
        (``request`` would open one). For a caller that sends a Call on it itself."""
        broker = self.metadata.brokers.get(node_id)
        if broker is None:
            return None
        conn = self._connections.get((broker.host, broker.port))
        return conn if conn is not None and conn.is_usable else None

    async def response(self, call: Call, *, bounded: bool = True) -> Any:
        """Send ``call`` (made on a ``usable_connection``) if it is not on the wire yet
        and wait for its response, as ``request`` does; a task cancelled here leaves the
        call for another task to await. ``bounded``: as in ``Call.response``."""
        try:
            return _checked(call.api_key, await call.connection._response(call, bounded=bounded))
        except NetworkError:
            conn = call.connection
            if self._connections.get((conn.host, conn.port)) is conn:
                self.drop_connection(conn.host, conn.port)
            self.request_update()
            raise

    async def time_out(self, call: Call) -> None:
        """``call`` (awaited ``bounded=False``) is past its deadline: break its connection
        unless it was answered (``Connection.time_out``)."""
        await call.connection.time_out(call)

    async def send(
        self, node_id: int, api_key: ApiKey, body: Mapping[str, Any] | PackedBody
    ) -> None:
        """A request without response (Produce with acks=0)."""
        broker = self.metadata.brokers.get(node_id)
        conn = await self.broker_connection(node_id)
        try:
            await conn.send(api_key, body)
        except NetworkError:
            if broker is not None:
                self.drop_connection(broker.host, broker.port)
            self.request_update()
            raise

    async def request_any(self, api_key: ApiKey, body: Mapping[str, Any], **kwargs: Any) -> Any:
        """One request to any reachable broker: known brokers first, then bootstrap."""
        candidates = [(b.host, b.port) for b in self.metadata.brokers.values()]
        candidates += [a for a in self.bootstrap if a not in candidates]
        last: Exception | None = None
        unanswered = ""  # why a broker that took the connection did not answer
        for host, port in candidates:
            try:
                conn = await self.connection_to(host, port)
            except NetworkError as exc:
                last = exc
                continue
            try:
                response = await conn.request(api_key, body, **kwargs)
            except NetworkError as exc:
                self.drop_connection(host, port)
                last, unanswered = exc, f" ({exc}: {await self._why_hung_up(host, port)})"
            else:
                return _checked(api_key, response)
        where = ",".join(f"{h}:{p}" for h, p in self.bootstrap)
        raise NetworkError(f"cannot reach any broker at {where}{unanswered}") from last

    async def _why_hung_up(self, host: str, port: int) -> str:
        """A hint for a broker that took the connection and hung up on a request."""
        if self.security is not None and self.security.uses_ssl:
            return NOT_MSGPACK
        return await listener_wants(host, port)

    # --- metadata --------------------------------------------------------------------

    async def refresh(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Fetch fresh metadata (for ``topics`` plus the tracked ones); coalesced."""
        if topics is not None:
            self.topics.update(topics)
        if self._refreshing is not None:
            await self._refreshing.wait()
            if topics is None or all(t in self.metadata.topics for t in topics):
                return self.metadata
        self._refreshing = done = trio.Event()
        try:
            wanted = [{"name": t} for t in sorted(self.topics)]
            body = await self.request_any(
                ApiKey.METADATA,
                {"topics": wanted, "allow_auto_topic_creation": self.allow_auto_topic_creation},
            )
            self.metadata = ClusterMetadata.from_response(body)
            self._last_refresh = trio.current_time()
            return self.metadata
        finally:
            self._refreshing = None
            done.set()

    async def describe_all(self) -> ClusterMetadata:
        """Metadata of every topic (not cached as the tracked set)."""
        body = await self.request_any(ApiKey.METADATA, {"topics": None})
        return ClusterMetadata.from_response(body)

    async def topic(
        self, name: str, *, timeout_s: float, missing_after_s: float | None = None
    ) -> TopicInfo:
        """The topic's metadata, waiting for leaders; raises its error if it has one.

        With ``missing_after_s``, a topic the brokers keep calling unknown for that long
        raises UnknownTopicOrPartitionError then (a topic being created, automatically
        or not, is LEADER_NOT_AVAILABLE or appears within moments)."""
        unknown_since: float | None = None
        with trio.move_on_after(timeout_s):
            while True:
                meta = await self.refresh([name])
                info = meta.topics.get(name)
                if info is not None and info.error_code == 0 and info.partitions:
                    return info
                if info is not None and info.error_code:
                    error = wire_error(info.error_code, f"topic {name!r}", _why(info, name))
                    if not error.retriable:
                        raise error
                    if isinstance(error, UnknownTopicOrPartitionError):
                        now = trio.current_time()
                        unknown_since = now if unknown_since is None else unknown_since
                        if missing_after_s is not None and now - unknown_since >= missing_after_s:
                            raise error
                    else:
                        unknown_since = None
                await trio.sleep(RETRY_BACKOFF_S)
        info = self.metadata.topics.get(name)
        code = info.error_code if info is not None else 3
        raise wire_error(code or 3, f"topic {name!r}", f"no metadata after {timeout_s:g} s")


def _why(info: TopicInfo, name: str) -> str | None:
    """The reason behind a topic's error, when the client can tell it: Metadata carries
    no message, and INVALID_TOPIC_EXCEPTION means the name breaks Kafka's rules."""
    if info.error_code != InvalidTopicError.code:
        return None
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        return exc.message
    return None


def _kafka_address(broker: dict[str, Any]) -> str | None:
    """The ``kafka_host`` / ``kafka_port`` a Metadata broker entry carries, as host:port."""
    host = broker.get("kafka_host")
    if host is None:
        return None
    return f"[{host}]:{broker['kafka_port']}" if ":" in host else f"{host}:{broker['kafka_port']}"
