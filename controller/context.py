"""The controller's in-memory picture of the cluster (Kafka's ControllerContext).

How this works: the active controller loads this object from ZooKeeper when it takes
over (onControllerFailover) and afterwards changes it only from its single event loop, so
nothing here is locked. ZooKeeper stays the source of truth: every decision is written
there first and mirrored here second, and a fresh controller can rebuild all of it.

What it holds:

* live brokers (registered under ``/brokers/ids``) and the subset that asked for a
  controlled shutdown;
* replicas on failed log dirs of live brokers (Kafka's replicasOnOfflineDirs): the
  broker is up but answered KAFKA_STORAGE_ERROR for them, so they count as offline
  replicas until the broker registers again;
* the replica assignment (AR) of every partition, ordered: ``AR[0]`` is the preferred
  leader;
* the leadership of every partition that ever had one: leader, leader epoch, ISR, the
  controller epoch that wrote it and the znode version used for conditional updates;
* the partition and replica states of the two state machines (the transition tables
  live in ``controller.state_machines``; this module only stores the current state);
* topics queued for deletion, reassignments in progress, and the controller's own epoch
  with the znode version of ``/controller_epoch``.

Derived queries (partitions on a broker, offline partitions, ...) are computed on demand:
the maps are small (thousands of partitions) and a cache would be one more thing to keep
consistent.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from minibroker.controller.state_machines import PartitionReplica, PartitionState, ReplicaState
from minibroker.protocol.topic_partition import TopicPartition  # re-exported
from minibroker.zk.values import INITIAL_CONTROLLER_EPOCH, LeaderAndIsr

NO_LEADER = -1
"""Leader id of a partition whose leader is gone and no replacement could be elected."""

LEADER_DURING_DELETE = -2
"""Leader id advertised in UpdateMetadata for partitions of a topic being deleted, so
clients stop routing to them (Kafka's LeaderAndIsr.LeaderDuringDelete)."""

INITIAL_LEADER_EPOCH = 0


class BrokerAddress(Protocol):
    """What the controller needs of a registered broker (``/brokers/ids/N``)."""

    @property
    def id(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def rack(self) -> str | None: ...
    @property
    def epoch(self) -> int:
        """The czxid of its /brokers/ids znode (KIP-380's broker epoch)."""
        ...

    @property
    def kafka_address(self) -> tuple[str, int] | None: ...


@dataclass(frozen=True, slots=True)
class ReassignmentContext:
    """A reassignment in progress: OAR (the replicas before) and RAR (the target)."""

    original: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def adding(self) -> tuple[int, ...]:
        """RAR - OAR: the replicas the reassignment creates."""
        return tuple(r for r in self.target if r not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        """OAR - RAR: the replicas the reassignment deletes."""
        return tuple(r for r in self.original if r not in self.target)

    @property
    def union(self) -> tuple[int, ...]:
        """OAR + RAR, the assignment during the reassignment (target first, so a new
        leader elected meanwhile is preferably one that stays)."""
        return self.target + self.removing


@dataclass(slots=True)
class ControllerContext:
    live_brokers: dict[int, BrokerAddress] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    # topic -> partition -> AR; nested so topic-level queries need no scan.
    assignments: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[PartitionReplica, ReplicaState] = field(default_factory=dict)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    partitions_being_reassigned: dict[TopicPartition, ReassignmentContext] = field(
        default_factory=dict
    )
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)
    """Broker id -> its partitions whose log dir failed (their replicas are offline)."""
    topic_ids: dict[str, bytes] = field(default_factory=dict)
    """Topic -> its id (KIP-516), as /brokers/topics/T holds it."""
    epoch: int = INITIAL_CONTROLLER_EPOCH
    epoch_zk_version: int = -1

    # -- brokers ---------------------------------------------------------------------

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers that may lead or follow: registered and not shutting down."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    def is_replica_online(
        self,
        broker_id: int,
        tp: TopicPartition | None = None,
        *,
        include_shutting_down: bool = False,
    ) -> bool:
        """Whether the broker is alive (and not stopping, unless asked) and, given a
        partition, its replica of it is not on a failed log dir."""
        if broker_id not in self.live_brokers:
            return False
        if not include_shutting_down and broker_id in self.shutting_down_broker_ids:
            return False
        return tp is None or tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    def online_replica_brokers(
        self, tp: TopicPartition, *, include_shutting_down: bool = False
    ) -> set[int]:
        """The brokers whose replica of ``tp`` could lead or follow now: what the leader
        selectors call "live" for this partition."""
        live = set(self.live_brokers)
        if not include_shutting_down:
            live -= self.shutting_down_broker_ids
        return {b for b in live if tp not in self.replicas_on_offline_dirs.get(b, ())}

    def set_live_brokers(self, brokers: Iterable[BrokerAddress]) -> None:
        self.live_brokers = {b.id: b for b in brokers}
        self.shutting_down_broker_ids &= set(self.live_brokers)
        for gone in self.replicas_on_offline_dirs.keys() - self.live_brokers.keys():
            del self.replicas_on_offline_dirs[gone]

    def add_live_brokers(self, brokers: Iterable[BrokerAddress]) -> None:
        for broker in brokers:
            self.live_brokers[broker.id] = broker
            self.replicas_on_offline_dirs.pop(broker.id, None)

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self.live_brokers.pop(broker_id, None)
            self.shutting_down_broker_ids.discard(broker_id)
            # A restarted broker rescans its dirs: what failed before may be back.
            self.replicas_on_offline_dirs.pop(broker_id, None)

    # -- topics and assignment -------------------------------------------------------

    @property
    def all_topics(self) -> set[str]:
        return set(self.assignments)

    def set_assignment(self, tp: TopicPartition, replicas: Iterable[int]) -> None:
        self.assignments.setdefault(tp.topic, {})[tp.partition] = tuple(replicas)

    def replicas_for(self, tp: TopicPartition) -> tuple[int, ...]:
        """AR of a partition; empty when the partition is unknown."""
        return self.assignments.get(tp.topic, {}).get(tp.partition, ())

    def partitions_for_topic(self, topic: str) -> set[TopicPartition]:
        return {TopicPartition(topic, p) for p in self.assignments.get(topic, {})}

    def all_partitions(self) -> Iterator[TopicPartition]:
        for topic, partitions in self.assignments.items():
            for partition in partitions:
                yield TopicPartition(topic, partition)

    def remove_topic(self, topic: str) -> None:
        """Forget everything about a topic once its deletion completed."""
        for partition in self.assignments.pop(topic, {}):
            tp = TopicPartition(topic, partition)
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.pop(tp, None)
        for replica in [r for r in self.replica_states if r.topic == topic]:
            del self.replica_states[replica]
        self.topic_ids.pop(topic, None)
        self.topics_to_be_deleted.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    # -- derived queries -------------------------------------------------------------

    def partitions_on_broker(self, broker_id: int) -> set[TopicPartition]:
        return {tp for tp in self.all_partitions() if broker_id in self.replicas_for(tp)}

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> set[PartitionReplica]:
        wanted = set(broker_ids)
        return {
            PartitionReplica(tp.topic, tp.partition, r)
            for tp in self.all_partitions()
            for r in self.replicas_for(tp)
            if r in wanted
        }

    def replicas_for_partitions(
        self, partitions: Iterable[TopicPartition]
    ) -> set[PartitionReplica]:
        return {
            PartitionReplica(tp.topic, tp.partition, r)
            for tp in partitions
            for r in self.replicas_for(tp)
        }

    def replicas_for_topic(self, topic: str) -> set[PartitionReplica]:
        return self.replicas_for_partitions(self.partitions_for_topic(topic))

    def partitions_with_offline_leader(
        self, replicas: Iterable[PartitionReplica]
    ) -> set[TopicPartition]:
        """Partitions led by one of ``replicas`` (which just went offline), leaving out
        topics being deleted: these need a new leader."""
        return {
            r.topic_partition
            for r in replicas
            if r.topic not in self.topics_to_be_deleted
            and (lai := self.leadership.get(r.topic_partition)) is not None
            and lai.leader == r.replica
        }

    def partitions_led_by(self, broker_id: int) -> set[TopicPartition]:
        return {tp for tp, lai in self.leadership.items() if lai.leader == broker_id}

    def offline_partitions(self) -> set[TopicPartition]:
        """Partitions with no live leader, not counting topics being deleted (Kafka's
        OfflinePartitionsCount)."""
        return {
            tp
            for tp in self.all_partitions()
            if tp.topic not in self.topics_to_be_deleted and not self._has_live_leader(tp)
        }

    def _has_live_leader(self, tp: TopicPartition) -> bool:
        lai = self.leadership.get(tp)
        return lai is not None and self.is_replica_online(
            lai.leader, tp, include_shutting_down=True
        )

    def partitions_in_states(self, states: Iterable[PartitionState]) -> set[TopicPartition]:
        wanted = set(states)
        return {tp for tp, state in self.partition_states.items() if state in wanted}

    def replicas_in_state(self, topic: str, state: ReplicaState) -> set[PartitionReplica]:
        return {r for r, s in self.replica_states.items() if r.topic == topic and s == state}

    def preferred_replica_imbalance(self) -> dict[int, set[TopicPartition]]:
        """Preferred leader (AR[0]) -> its partitions currently led by another broker;
        what auto.leader.rebalance looks at. Reassigning or deleting partitions are left
        out: their AR is about to change."""
        result: dict[int, set[TopicPartition]] = {}
        for tp in self.all_partitions():
            replicas = self.replicas_for(tp)
            lai = self.leadership.get(tp)
            if (
                not replicas
                or lai is None
                or tp.topic in self.topics_to_be_deleted
                or tp in self.partitions_being_reassigned
            ):
                continue
            result.setdefault(replicas[0], set())
            if lai.leader != replicas[0]:
                result[replicas[0]].add(tp)
        return result

    def leadership_for_metadata(self, tp: TopicPartition) -> LeaderAndIsr | None:
        """Leadership as UpdateMetadata advertises it: topics being deleted show
        LEADER_DURING_DELETE so clients stop using them."""
        lai = self.leadership.get(tp)
        if lai is not None and tp.topic in self.topics_to_be_deleted:
            return replace(lai, leader=LEADER_DURING_DELETE)
        return lai

    def update_leadership(self, states: Mapping[TopicPartition, LeaderAndIsr]) -> None:
        self.leadership.update(states)

    def reset(self) -> None:
        """Forget everything (on resignation); the next failover reloads from ZooKeeper."""
        fresh = ControllerContext()
        for name in self.__slots__:
            setattr(self, name, getattr(fresh, name))
