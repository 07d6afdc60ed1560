"""The values Kafka keeps in ZooKeeper, as the brokers and the controller use them:
registered brokers and their endpoints, topic assignments, partition states
(``LeaderAndIsr``), producer id blocks, and the errors reading or fencing them raises.

Plain values, sans-IO; their JSON is declared in ``zk.model`` beside the znode layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from minibroker.protocol.errors import MinibrokerError
from minibroker.protocol.topic_partition import TopicPartition

KAFKA_LISTENER = "KAFKA"
"""Listener name of a broker's Kafka-protocol endpoint (the msgpack one is PLAINTEXT)."""

DEFAULT_SECURITY_PROTOCOL = "PLAINTEXT"
"""The security protocol of a listener a broker's znode does not name."""


class ZkDataError(MinibrokerError):
    """A znode holds something that is not Kafka's JSON for that path."""


INITIAL_CONTROLLER_EPOCH = 0
"""The epoch before any controller ran; the first controller writes 1."""


class ControllerMovedError(MinibrokerError):
    """Another broker became controller: a conditional write on /controller_epoch failed
    or a znode carries a newer controller epoch. The controller must resign."""


# -- brokers ---------------------------------------------------------------------------


class EndPoint(NamedTuple):
    """One listener of a broker; written as ``LISTENER://host:port``."""

    listener: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> EndPoint:
        listener, sep, address = text.partition("://")
        host, colon, port = address.rpartition(":")
        if not (sep and colon and listener and port.isdigit()):
            raise ZkDataError(f"bad endpoint {text!r} (expected LISTENER://host:port)")
        return cls(listener, host.strip("[]"), int(port))


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A registered broker. ``epoch`` is the czxid of its znode (Kafka's broker epoch:
    it grows each time the broker registers again) and is not part of the JSON."""

    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    timestamp_ms: int = 0
    jmx_port: int = -1
    epoch: int = -1
    security_protocols: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    """(listener, security protocol) pairs; a listener not named is PLAINTEXT."""
    identity_key: str | None = field(default=None, compare=False)
    """The broker's public identity key (protocol/broker_proof.py), None if it has none."""

    def security_protocol(self, listener: str) -> str:
        return dict(self.security_protocols).get(listener, DEFAULT_SECURITY_PROTOCOL)

    @property
    def host(self) -> str:
        return self.endpoints[0].host if self.endpoints else ""

    @property
    def port(self) -> int:
        return self.endpoints[0].port if self.endpoints else -1

    @property
    def kafka_address(self) -> tuple[str, int] | None:
        """(host, port) of the broker's Kafka-protocol listener, if it has one."""
        for endpoint in self.endpoints:
            if endpoint.listener == KAFKA_LISTENER:
                return endpoint.host, endpoint.port
        return None


# -- topics and partitions ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """A topic's replica assignment: partition -> AR (AR[0] is the preferred leader),
    plus the replicas a reassignment is adding / removing (KIP-455), and the topic's id
    (KIP-516; None for a topic written before ids)."""

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    zk_version: int = -1
    topic_id: bytes | None = None


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """The content of ``/brokers/topics/T/partitions/P/state`` plus its znode version.

    ``zk_version`` is the version of the znode this value was read from or written as;
    a conditional update passes it as the expected version.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int

    def new_leader(self, leader: int, isr: Iterable[int], controller_epoch: int) -> LeaderAndIsr:
        """The next leadership: a new leader and/or ISR always bumps the leader epoch so
        brokers can fence requests from the old one (docs/architecture.md, "The
        controller")."""
        return replace(
            self,
            leader=leader,
            leader_epoch=self.leader_epoch + 1,
            isr=tuple(isr),
            controller_epoch=controller_epoch,
        )


@dataclass(slots=True)
class WriteResult:
    """Outcome of a batch of ZooKeeper writes: what was written (with its new znode
    version) and which partitions lost a race (znode exists / version moved on)."""

    written: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    conflicts: set[TopicPartition] = field(default_factory=set)


# -- producer ids ----------------------------------------------------------------------


class ProducerIdBlock(NamedTuple):
    """Producer ids [start, end] reserved for one broker."""

    broker: int
    start: int
    end: int
