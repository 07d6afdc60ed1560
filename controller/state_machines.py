"""The partition and replica state machines: states, legal transitions, and what each
transition does. This module is the single place that defines what is legal; the two
machines that carry transitions out are ``PartitionStateMachine``
(controller/partition_state_machine.py) and ``ReplicaStateMachine``
(controller/replica_state_machine.py).

How this works: each machine is a table ``target state -> states it may be entered
from`` (Kafka's validPreviousStates) plus one method that moves a set of partitions or
replicas to a target state. Every change of state anywhere in the controller goes
through ``handle_state_changes``; an illegal transition raises IllegalStateTransition,
which the machine logs on the state-change logger and reports back in the result while
the legal ones proceed (one bad partition must not stall failover for the rest).

A transition that needs a new leader or ISR (1) decides, with a leader selector,
(2) writes the new ``LeaderAndIsr`` to ZooKeeper through ``PartitionStateStore`` with a
conditional update on the znode version, (3) mirrors it in the ControllerContext and
(4) queues LeaderAndIsr / UpdateMetadata / StopReplica requests in the batch, which is
sent once when the whole set has been handled. ZooKeeper first: if the controller dies
between (2) and (4) its successor reads the decision back and resends it.

A conditional update that loses a race (a leader changed the ISR meanwhile) re-reads the
znode and decides again, up to MAX_ZK_CONFLICT_ROUNDS times.

Partition transitions:
    NonExistent -> New              assignment already in the context; nothing else
    New -> Online                   leader = first live replica of AR, ISR = live AR;
                                    create the state znode; LeaderAndIsr to live AR
    Online, Offline -> Online       elect with a strategy (offline, reassigned,
                                    preferred, unclean, controlled shutdown);
                                    conditional update
    New, Online, Offline -> Offline mark only (the leader is gone)
    Offline -> NonExistent          mark only (topic deleted)

Replica transitions:
    NonExistent -> New              LeaderAndIsr (is_new) to the replica if the
                                    partition has a leader
    New -> Online                   add the replica to AR in memory if missing
    Online, Offline, Ineligible -> Online   resend LeaderAndIsr to the replica
    New, Online, Offline, Ineligible -> Offline   StopReplica (keep data); drop the
                                    replica from the ISR in ZooKeeper; tell the others
    Offline -> DeletionStarted      StopReplica with delete
    Started -> Successful           mark only
    Offline, Started -> Ineligible  mark only (deletion cannot proceed for now)
    Successful -> NonExistent       drop the replica from AR in memory
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple, Protocol, TypeVar

from minibroker.protocol.errors import MinibrokerError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr, WriteResult

log = logging.getLogger("minibroker.controller.state_change")

MAX_ZK_CONFLICT_ROUNDS = 10
"""Re-read-and-retry rounds after lost conditional updates; more means a livelock."""


class PartitionReplica(NamedTuple):
    """One replica of one partition: the broker ``replica`` hosting ``topic-partition``."""

    topic: str
    partition: int
    replica: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __str__(self) -> str:
        return f"[{self.topic}-{self.partition}, replica {self.replica}]"


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaState(enum.Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


_P = PartitionState
_R = ReplicaState

PARTITION_TRANSITIONS: Mapping[PartitionState, frozenset[PartitionState]] = {
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
}
"""Target partition state -> the states it may be entered from."""

REPLICA_TRANSITIONS: Mapping[ReplicaState, frozenset[ReplicaState]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}
"""Target replica state -> the states it may be entered from."""


class IllegalStateTransition(MinibrokerError):
    """A partition or replica was asked to enter a state not reachable from its own."""


class StateChangeFailed(MinibrokerError):
    """A legal transition could not be carried out (no live replica, lost ZK race...)."""


def check_partition_transition(
    tp: TopicPartition, current: PartitionState, target: PartitionState
) -> None:
    if current not in PARTITION_TRANSITIONS[target]:
        raise IllegalStateTransition(
            f"partition {tp}: illegal transition {current.value} -> {target.value}"
        )


def check_replica_transition(
    replica: PartitionReplica, current: ReplicaState, target: ReplicaState
) -> None:
    if current not in REPLICA_TRANSITIONS[target]:
        raise IllegalStateTransition(
            f"replica {replica}: illegal transition {current.value} -> {target.value}"
        )


class PartitionStateStore(Protocol):
    """What the state machines need from ZooKeeper (partition state znodes).

    Implementations fence every write with the controller epoch znode version and raise
    ControllerMovedError when another controller took over.
    """

    async def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr]
    ) -> WriteResult:
        """Create state znodes; an existing znode is a conflict."""
        ...

    async def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr]
    ) -> WriteResult:
        """Set state znodes if their version still equals each value's zk_version."""
        ...

    async def read_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """Current state of each partition that has a state znode."""
        ...


class ElectionStrategy(enum.Enum):
    OFFLINE = "offline"
    REASSIGNED = "reassigned"
    PREFERRED = "preferred"
    UNCLEAN = "unclean"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"


Failures = dict[TopicPartition, MinibrokerError]
ReplicaFailures = dict[PartitionReplica, MinibrokerError]


def log_failure(error: MinibrokerError) -> None:
    log.error("%s", error)


_Item = TypeVar("_Item")
_State = TypeVar("_State")


def split_legal(
    items: Iterable[_Item],
    state_of: Callable[[_Item], _State],
    target: _State,
    check: Callable[[_Item, _State, _State], None],
) -> tuple[list[_Item], dict[_Item, MinibrokerError]]:
    """The items whose move to ``target`` is legal, and the refused ones with their
    (logged) IllegalStateTransition: the first step of both machines' handleStateChanges.
    """
    legal: list[_Item] = []
    refused: dict[_Item, MinibrokerError] = {}
    for item in items:
        try:
            check(item, state_of(item), target)
        except IllegalStateTransition as exc:
            log_failure(exc)
            refused[item] = exc
        else:
            legal.append(item)
    return legal, refused
