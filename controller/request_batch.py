"""ControllerBrokerRequestBatch: collects one round of decisions, sends one request per
(broker, kind).

How this works: while the state machines handle a set of transitions they ``add_*``
partitions to the batch; nothing goes out until ``send_requests()``, which builds at most
one LeaderAndIsr, one UpdateMetadata and one StopReplica body per broker and hands them,
in that order, to a ``RequestSender`` (the channel manager, or a recorder in tests).
Order matters: a broker learns its new role (LeaderAndIsr) before the cluster-wide view
(UpdateMetadata), and stops replicas last.

Answers: every StopReplica answer goes to ``on_stop_replica_response`` (with its
request), every LeaderAndIsr answer to ``on_leader_and_isr_response``. Both run in the
channel's sender task, so they only queue a controller event.

Bodies follow protocol/messages/control.py (Kafka's messages in snake_case, with one
flat ``partition_states`` list whose entries name their topic, and brokers as
``{id, host, port, rack}``); each body is built as its route's generated send-side
``<Api>RequestBody`` (protocol/messages/bodies.py), so mypy checks every key sent. Every body is
stamped with ``controller_id`` and ``controller_epoch``, and with the addressed broker's
``broker_epoch`` (the czxid of its /brokers/ids znode as the controller last read it,
KIP-380). Brokers obey only the controller ZooKeeper names and refuse a request meant
for an earlier registration of theirs (STALE_CONTROLLER_EPOCH / STALE_BROKER_EPOCH:
docs/architecture.md, "The controller").

LeaderAndIsr:   partition_states[{topic_name, partition_index, controller_epoch, leader,
                leader_epoch, isr, zk_version, replicas, adding_replicas,
                removing_replicas, is_new}], live_leaders[broker]
UpdateMetadata: partition_states[{topic_name, partition_index, controller_epoch, leader,
                leader_epoch, isr, zk_version, replicas, offline_replicas}],
                live_brokers[broker]
StopReplica:    partition_states[{topic_name, partition_index, leader_epoch,
                delete_partition}]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from minibroker.controller.context import ControllerContext
from minibroker.protocol.api import ApiKey, Body
from minibroker.protocol.messages import bodies
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr

LEADER_AND_ISR = ApiKey.LEADER_AND_ISR
STOP_REPLICA = ApiKey.STOP_REPLICA
UPDATE_METADATA = ApiKey.UPDATE_METADATA

NO_BROKER_EPOCH = -1
NO_LEADER_EPOCH = -1
"""StopReplica leader epoch meaning "don't check"."""
EPOCH_DURING_DELETE = -2
"""StopReplica leader epoch for a topic being deleted: the broker stops whatever epoch."""

ResponseCallback = Callable[[int, Body], None]
"""Called with (broker_id, response body) when a broker answers."""

StopReplicaCallback = Callable[[int, Mapping[str, Any], Body], None]
"""Called with (broker_id, request body, response body) for every StopReplica."""


class RequestSender(Protocol):
    def send(
        self,
        broker_id: int,
        api_key: int,
        body: Mapping[str, Any],
        on_response: ResponseCallback | None,
    ) -> None:
        """Queue a request for a broker; never blocks."""


class BatchNotEmptyError(RuntimeError):
    """new_batch() found requests of a previous round that were never sent: a bug."""


@dataclass(frozen=True, slots=True)
class _LeaderAndIsrEntry:
    leader_and_isr: LeaderAndIsr
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    is_new: bool


@dataclass(frozen=True, slots=True)
class BrokerRequest:
    broker_id: int
    api_key: int
    body: Mapping[str, Any]
    """As its route's generated ``<Api>RequestBody`` (protocol/messages/bodies.py)."""


class ControllerBrokerRequestBatch:
    def __init__(
        self,
        context: ControllerContext,
        controller_id: int,
        sender: RequestSender,
        on_stop_replica_response: StopReplicaCallback | None = None,
        on_leader_and_isr_response: ResponseCallback | None = None,
    ) -> None:
        self._context = context
        self._controller_id = controller_id
        self._sender = sender
        self._on_stop_replica_response = on_stop_replica_response
        self._on_leader_and_isr_response = on_leader_and_isr_response
        self._leader_and_isr: dict[int, dict[TopicPartition, _LeaderAndIsrEntry]] = {}
        self._stop_replica: dict[int, dict[TopicPartition, bool]] = {}
        self._metadata_brokers: set[int] = set()
        self._metadata_partitions: dict[TopicPartition, LeaderAndIsr] = {}

    def is_empty(self) -> bool:
        return not (self._leader_and_isr or self._stop_replica or self._metadata_brokers)

    def new_batch(self) -> None:
        if not self.is_empty():
            raise BatchNotEmptyError("controller request batch still holds unsent requests")

    def clear(self) -> None:
        self._leader_and_isr.clear()
        self._stop_replica.clear()
        self._metadata_brokers.clear()
        self._metadata_partitions.clear()

    def add_leader_and_isr(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        leader_and_isr: LeaderAndIsr,
        replicas: Iterable[int],
        *,
        is_new: bool = False,
    ) -> None:
        """Tell ``broker_ids`` (those alive) the partition's leadership; every live broker
        then gets the same partition in UpdateMetadata."""
        reassignment = self._context.partitions_being_reassigned.get(tp)
        entry = _LeaderAndIsrEntry(
            leader_and_isr,
            tuple(replicas),
            reassignment.adding if reassignment else (),
            reassignment.removing if reassignment else (),
            is_new,
        )
        for broker_id in broker_ids:
            if broker_id < 0 or broker_id not in self._context.live_brokers:
                continue
            per_broker = self._leader_and_isr.setdefault(broker_id, {})
            previous = per_broker.get(tp)
            # A replica first created in this round stays "new" even if a later
            # transition in the same round re-adds it.
            new_before = previous is not None and previous.is_new
            per_broker[tp] = replace(entry, is_new=True) if new_before else entry
        # add_update_metadata(every live broker, [tp]), written out: a failover calls
        # this for each of 20,000 replicas.
        self._metadata_brokers.update(self._context.live_brokers)
        lai = self._context.leadership_for_metadata(tp)
        if lai is not None:
            self._metadata_partitions[tp] = lai

    def add_stop_replica(
        self, broker_ids: Iterable[int], tp: TopicPartition, *, delete: bool
    ) -> None:
        for broker_id in broker_ids:
            if broker_id < 0 or broker_id not in self._context.live_brokers:
                continue
            per_broker = self._stop_replica.setdefault(broker_id, {})
            per_broker[tp] = per_broker.get(tp, False) or delete  # a delete is never undone

    def add_update_metadata(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> None:
        """UpdateMetadata for ``partitions`` to ``broker_ids``; with no partitions the
        request still carries the live broker list."""
        self._metadata_brokers.update(b for b in broker_ids if b in self._context.live_brokers)
        for tp in partitions:
            lai = self._context.leadership_for_metadata(tp)
            if lai is not None:
                self._metadata_partitions[tp] = lai

    # -- building and sending --------------------------------------------------------

    def requests(self, controller_epoch: int) -> list[BrokerRequest]:
        """Every request of this round, LeaderAndIsr first, then UpdateMetadata, then
        StopReplica; brokers in ascending id order so the output is deterministic."""
        out: list[BrokerRequest] = []
        for broker_id in sorted(self._leader_and_isr):
            body = self._leader_and_isr_body(broker_id, controller_epoch)
            out.append(BrokerRequest(broker_id, LEADER_AND_ISR, body))
        if self._metadata_brokers:
            states, brokers, topic_ids = self._update_metadata_parts()
            for broker_id in sorted(self._metadata_brokers):
                metadata: bodies.UpdateMetadataRequestBody = {
                    "controller_id": self._controller_id,
                    "controller_epoch": controller_epoch,
                    "broker_epoch": self._broker_epoch(broker_id),
                    "partition_states": states,
                    "live_brokers": brokers,
                    "topic_ids": topic_ids,
                }
                out.append(BrokerRequest(broker_id, UPDATE_METADATA, metadata))
        for broker_id in sorted(self._stop_replica):
            stop = self._stop_replica_body(broker_id, controller_epoch)
            out.append(BrokerRequest(broker_id, STOP_REPLICA, stop))
        return out

    def _broker_epoch(self, broker_id: int) -> int:
        """The addressed broker's epoch as last read (KIP-380), stamped on each request."""
        broker = self._context.live_brokers.get(broker_id)
        return NO_BROKER_EPOCH if broker is None else broker.epoch

    def send_requests(self, controller_epoch: int) -> None:
        try:
            for request in self.requests(controller_epoch):
                callback: ResponseCallback | None = None
                if request.api_key == STOP_REPLICA and self._on_stop_replica_response:
                    callback = functools.partial(
                        _answer_with_request, self._on_stop_replica_response, request.body
                    )
                elif request.api_key == LEADER_AND_ISR:
                    callback = self._on_leader_and_isr_response
                self._sender.send(request.broker_id, request.api_key, request.body, callback)
        finally:
            self.clear()

    def _broker(self, broker_id: int) -> bodies.UpdateMetadataRequestBodyLiveBroker | None:
        b = self._context.live_brokers.get(broker_id)
        if b is None:
            return None
        body: bodies.UpdateMetadataRequestBodyLiveBroker = {
            "id": b.id,
            "host": b.host,
            "port": b.port,
            "rack": b.rack,
        }
        if b.kafka_address is not None:
            body["kafka_host"], body["kafka_port"] = b.kafka_address
        return body

    def _leader_and_isr_body(
        self, broker_id: int, controller_epoch: int
    ) -> bodies.LeaderAndIsrRequestBody:
        states: list[bodies.LeaderAndIsrRequestBodyPartitionState] = []
        leaders: set[int] = set()
        for tp, entry in sorted(self._leader_and_isr[broker_id].items()):
            lai = entry.leader_and_isr
            leaders.add(lai.leader)
            states.append(
                {
                    "topic_name": tp.topic,
                    "partition_index": tp.partition,
                    "controller_epoch": lai.controller_epoch,
                    "leader": lai.leader,
                    "leader_epoch": lai.leader_epoch,
                    "isr": list(lai.isr),
                    "zk_version": lai.zk_version,
                    "replicas": list(entry.replicas),
                    "adding_replicas": list(entry.adding),
                    "removing_replicas": list(entry.removing),
                    "is_new": entry.is_new,
                }
            )
        live_leaders: list[bodies.LeaderAndIsrRequestBodyLiveLeader] = [
            b for leader in sorted(leaders) if (b := self._broker(leader)) is not None
        ]
        return {
            "controller_id": self._controller_id,
            "controller_epoch": controller_epoch,
            "broker_epoch": self._broker_epoch(broker_id),
            "partition_states": states,
            "live_leaders": live_leaders,
            "topic_ids": self._topic_ids(tp.topic for tp in self._leader_and_isr[broker_id]),
        }

    def _topic_ids(self, topics: Iterable[str]) -> list[bodies.LeaderAndIsrRequestBodyTopicId]:
        """The ids of those of ``topics`` that have one (KIP-516)."""
        ids = self._context.topic_ids
        return [
            {"topic_name": topic, "topic_id": ids[topic]}
            for topic in sorted(set(topics))
            if topic in ids
        ]

    def _update_metadata_parts(
        self,
    ) -> tuple[
        list[bodies.UpdateMetadataRequestBodyPartitionState],
        list[bodies.UpdateMetadataRequestBodyLiveBroker],
        list[bodies.UpdateMetadataRequestBodyTopicId],
    ]:
        """Partition states, live brokers and topic ids: the same for every broker."""
        live = self._context.live_or_shutting_down_broker_ids
        states: list[bodies.UpdateMetadataRequestBodyPartitionState] = []
        for tp, lai in sorted(self._metadata_partitions.items()):
            replicas = self._context.replicas_for(tp)
            states.append(
                {
                    "topic_name": tp.topic,
                    "partition_index": tp.partition,
                    "controller_epoch": lai.controller_epoch,
                    "leader": lai.leader,
                    "leader_epoch": lai.leader_epoch,
                    "isr": list(lai.isr),
                    "zk_version": lai.zk_version,
                    "replicas": list(replicas),
                    "offline_replicas": [
                        r
                        for r in replicas
                        if not self._context.is_replica_online(r, tp, include_shutting_down=True)
                    ],
                }
            )
        brokers = [b for broker_id in sorted(live) if (b := self._broker(broker_id)) is not None]
        topic_ids = self._topic_ids(tp.topic for tp in self._metadata_partitions)
        return states, brokers, topic_ids

    def _stop_replica_body(
        self, broker_id: int, controller_epoch: int
    ) -> bodies.StopReplicaRequestBody:
        states: list[bodies.StopReplicaRequestBodyPartitionState] = []
        for tp, delete in sorted(self._stop_replica[broker_id].items()):
            lai = self._context.leadership.get(tp)
            if tp.topic in self._context.topics_to_be_deleted:
                epoch = EPOCH_DURING_DELETE
            else:
                epoch = lai.leader_epoch if lai is not None else NO_LEADER_EPOCH
            states.append(
                {
                    "topic_name": tp.topic,
                    "partition_index": tp.partition,
                    "leader_epoch": epoch,
                    "delete_partition": delete,
                }
            )
        return {
            "controller_id": self._controller_id,
            "controller_epoch": controller_epoch,
            "broker_epoch": self._broker_epoch(broker_id),
            "partition_states": states,
        }


def _answer_with_request(
    callback: StopReplicaCallback, request: Mapping[str, Any], broker_id: int, response: Body
) -> None:
    callback(broker_id, request, response)
