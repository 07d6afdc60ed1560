"""Topic changes: new topics, partitions added to a topic, and topic config changes.

How this works (Kafka's TopicChange, PartitionModifications and
TopicUncleanLeaderElectionEnable events):

* the /brokers/topics child watch becomes TopicChange: topics whose znode is gone are
  forgotten; new ones are loaded (arming a data watch on each topic znode) and their
  partitions go New -> Online with their replicas New -> Online;
* a topic znode's data watch becomes PartitionModifications: partitions added to the
  topic (CreatePartitions) come online the same way;
* the /config/changes child watch becomes TopicConfigChange: a topic whose
  ``unclean.leader.election.enable`` turns true gets its offline partitions elected at
  once. Only notifications newer than the last one read count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from minibroker.controller import events as ev
from minibroker.controller.context import ControllerContext
from minibroker.controller.controller_zk import ControllerZk, TopicReplicas
from minibroker.controller.partition_state_machine import PartitionStateMachine
from minibroker.controller.replica_state_machine import ReplicaStateMachine
from minibroker.controller.state_machines import PartitionState, ReplicaState
from minibroker.protocol.topic_ids import new_topic_id
from minibroker.protocol.topic_partition import TopicPartition


class UncleanElectionPolicy:
    """Whether a topic may elect a leader from outside its ISR: the topic's
    ``unclean.leader.election.enable`` override, else the broker's default."""

    def __init__(self, default: bool) -> None:
        self._default = default
        self._overrides: dict[str, bool] = {}

    def allowed(self, topic: str) -> bool:
        return self._overrides.get(topic, self._default)

    def set_override(self, topic: str, override: bool | None) -> None:
        """``None``: the topic has no override (any earlier one is dropped)."""
        if override is None:
            self._overrides.pop(topic, None)
        else:
            self._overrides[topic] = override

    def clear(self) -> None:
        self._overrides.clear()


class TopicChangeHandler:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZk,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        unclean: UncleanElectionPolicy,
        *,
        note_recorded_reassignment: Callable[[str, TopicReplicas], None],
    ) -> None:
        """``note_recorded_reassignment(topic, replicas)`` sees every loaded topic znode,
        whose adding/removing replicas say a reassignment is in progress."""
        self._ctx = context
        self._zk = zk
        self._psm = partition_state_machine
        self._rsm = replica_state_machine
        self._unclean = unclean
        self._note_recorded_reassignment = note_recorded_reassignment
        self._last_config_change = ""

    def reset(self) -> None:
        """Forget what was read (on resignation)."""
        self._unclean.clear()
        self._last_config_change = ""

    async def load_topics(self, topics: Iterable[str]) -> set[TopicPartition]:
        """Read the assignments of ``topics`` (arming their watches) and their unclean
        election overrides into the context; returns their partitions."""
        assignments = await self._zk.get_topic_assignments(sorted(topics), watch=True)
        loaded: set[TopicPartition] = set()
        for topic, replicas in assignments.items():
            for partition, ar in replicas.partitions.items():
                tp = TopicPartition(topic, partition)
                self._ctx.set_assignment(tp, ar)
                loaded.add(tp)
            self._note_recorded_reassignment(topic, replicas)
            await self._note_topic_id(topic, replicas.topic_id)
        overrides = await self._zk.get_unclean_leader_election_overrides(assignments)
        for topic, override in overrides.items():
            self._unclean.set_override(topic, override)
        return loaded

    async def _note_topic_id(self, topic: str, topic_id: bytes | None) -> None:
        """Keep the topic's id; a topic from before ids gets one (Kafka's controller
        does the same on failover), written conditionally: a writer that got there
        first wins, and the next read of the znode brings its id."""
        if topic_id is None:
            fresh = new_topic_id()
            if not await self._zk.set_topic_id(topic, fresh):
                return
            topic_id = fresh
        self._ctx.topic_ids[topic] = topic_id

    async def skip_config_changes_so_far(self) -> None:
        """On failover: the topic configs were just read, so only config change
        notifications written from now on matter (arms the /config/changes watch)."""
        names = await self._zk.get_config_changes(watch=True)
        self._last_config_change = max(names, default="")

    async def on_topic_change(self, event: ev.TopicChange) -> None:
        topics = await self._zk.get_all_topics(watch=True)
        known = self._ctx.all_topics
        for gone in known - topics:
            self._ctx.remove_topic(gone)
        new_partitions = await self.load_topics(topics - known)
        if new_partitions:
            await self.on_new_partition_creation(new_partitions)

    async def on_partition_modifications(self, event: ev.PartitionModifications) -> None:
        topic = event.topic
        assignments = await self._zk.get_topic_assignments([topic], watch=True)
        replicas = assignments.get(topic)
        if replicas is None or topic in self._ctx.topics_to_be_deleted:
            return
        added = {
            TopicPartition(topic, p): ar
            for p, ar in replicas.partitions.items()
            if not self._ctx.replicas_for(TopicPartition(topic, p))
        }
        for tp, ar in added.items():
            self._ctx.set_assignment(tp, ar)
        await self._note_topic_id(topic, replicas.topic_id)
        if added:
            await self.on_new_partition_creation(set(added))

    async def on_new_partition_creation(self, partitions: set[TopicPartition]) -> None:
        replicas = self._ctx.replicas_for_partitions(partitions)
        await self._psm.handle_state_changes(partitions, PartitionState.NEW)
        await self._rsm.handle_state_changes(replicas, ReplicaState.NEW)
        await self._psm.handle_state_changes(partitions, PartitionState.ONLINE)
        await self._rsm.handle_state_changes(replicas, ReplicaState.ONLINE)

    async def on_topic_config_change(self, event: ev.TopicConfigChange) -> None:
        """A topic that now allows unclean election gets its offline partitions elected
        at once."""
        names = await self._zk.get_config_changes(watch=True)
        fresh = [n for n in names if n > self._last_config_change]
        if not fresh:
            return
        self._last_config_change = fresh[-1]
        newly_unclean: set[str] = set()
        changed = [
            topic
            for topic in await self._zk.read_config_change_topics(fresh)
            if topic in self._ctx.assignments
        ]
        overrides = await self._zk.get_unclean_leader_election_overrides(changed)
        for topic in changed:
            was_allowed = self._unclean.allowed(topic)
            self._unclean.set_override(topic, overrides.get(topic))
            if self._unclean.allowed(topic) and not was_allowed:
                newly_unclean.add(topic)
        offline = {
            tp
            for tp in self._ctx.partitions_in_states([PartitionState.OFFLINE])
            if tp.topic in newly_unclean
        }
        if offline:
            await self._psm.handle_state_changes(offline, PartitionState.ONLINE)
