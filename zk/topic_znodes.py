"""Topics: assignments (``/brokers/topics/T``), configs (``/config/topics/T``),
deletion marks (``/admin/delete_topics/T``) and partition states
(``/brokers/topics/T/partitions/P/state``).

Any broker creates topics and marks them for deletion (CreateTopics / DeleteTopics);
the controller owns the partition states and the assignments after creation, and
removes a deleted topic's znodes. Partition state writes are conditional on the
znode's version (a leader changing its ISR and the controller race on it) and, from
the controller, fenced by its epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from minibroker.protocol.errors import TopicAlreadyExistsError
from minibroker.protocol.topic_ids import new_topic_id
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import (
    BadVersion,
    CreateOp,
    NodeExists,
    NoNode,
    SetOp,
    WatchEvent,
    ZkError,
    ZkState,
)
from minibroker.zk.model import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    TOPICS_PATH,
    decode_partition_state,
    decode_topic_assignment,
    decode_topic_config,
    delete_topic_path,
    encode_config_change,
    encode_partition_state,
    encode_topic_assignment,
    encode_topic_config,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
)
from minibroker.zk.values import LeaderAndIsr, TopicAssignment, WriteResult
from minibroker.zk.znodes import ZnodeAccess


class TopicZnodes(ZnodeAccess):
    async def get_topics(self, *, watch: bool = False) -> set[str]:
        """Topic names; ``watch`` arms the /brokers/topics child watch (TopicChange)."""
        return set(await self._children(TOPICS_PATH, watch))

    async def create_topic(
        self, topic: str, partitions: Mapping[int, Sequence[int]], config: Mapping[str, str]
    ) -> None:
        """Write the topic's config, then its assignment (Kafka's order: a controller
        that sees the topic always finds its config). TopicAlreadyExistsError if the
        assignment znode exists (also while a deletion is pending)."""
        error = (await self.create_topics({topic: (partitions, config)}))[topic]
        if error is not None:
            raise error

    async def create_topics(
        self, topics: Mapping[str, tuple[Mapping[int, Sequence[int]], Mapping[str, str]]]
    ) -> dict[str, TopicAlreadyExistsError | None]:
        """``create_topic`` for many topics at once, each as (assignment, config): a
        handful of pipelined round trips whatever their number, where one topic after
        the other cost four round trips each. Per topic None, or why it was not made."""
        names = sorted(topics)
        outcome: dict[str, TopicAlreadyExistsError | None] = {}
        present = await self.zk.get_many([topic_path(t) for t in names])
        for name, result in zip(names, present, strict=True):
            if not isinstance(result, NoNode):
                if isinstance(result, ZkError):
                    raise result
                outcome[name] = TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        new = [t for t in names if t not in outcome]
        configs = [encode_topic_config(topics[t][1]) for t in new]
        written = await self.zk.set_many(
            [SetOp(topic_config_path(t), data) for t, data in zip(new, configs, strict=True)]
        )
        missing = [
            CreateOp(topic_config_path(t), data)
            for t, data, result in zip(new, configs, written, strict=True)
            if isinstance(result, NoNode)
        ]
        errors = [r for r in written if isinstance(r, ZkError) and not isinstance(r, NoNode)]
        errors += [
            r
            for r in await self.zk.create_many(missing, makepath=True)
            if isinstance(r, ZkError) and not isinstance(r, NodeExists)
        ]
        if errors:
            raise errors[0]
        assignments = [
            CreateOp(
                topic_path(t),
                encode_topic_assignment(
                    TopicAssignment(
                        t,
                        {p: tuple(r) for p, r in topics[t][0].items()},
                        topic_id=new_topic_id(),
                    )
                ),
            )
            for t in new
        ]
        made = await self.zk.create_many(assignments, makepath=True)
        for name, path in zip(new, made, strict=True):
            if isinstance(path, NodeExists):
                outcome[name] = TopicAlreadyExistsError(f"Topic '{name}' already exists.")
            elif isinstance(path, ZkError):
                raise path
            else:
                outcome[name] = None
        return outcome

    async def get_assignment(self, topic: str, *, watch: bool = False) -> TopicAssignment | None:
        """``watch`` arms a data watch on the topic znode (Kafka's PartitionModifications)."""
        try:
            data, stat = await self.zk.get(topic_path(topic), watch=watch)
        except NoNode:
            return None
        return decode_topic_assignment(topic, data, zk_version=stat.version)

    async def get_assignments(
        self, topics: Iterable[str], *, watch: bool = False
    ) -> dict[str, TopicAssignment]:
        """The assignments of those of ``topics`` that exist, in one round trip;
        ``watch`` arms each one's data watch (PartitionModifications)."""
        present = await self._read_present(sorted(topics), topic_path, watch=watch)
        return {
            topic: decode_topic_assignment(topic, data, zk_version=stat.version)
            for topic, (data, stat) in present.items()
        }

    async def set_assignment(
        self, assignment: TopicAssignment, *, controller_epoch_zk_version: int | None = None
    ) -> TopicAssignment:
        """Conditional on ``assignment.zk_version`` (-1: unconditional); returns the
        assignment with its new zk_version. BadVersion if it changed meanwhile."""
        op = SetOp(
            topic_path(assignment.topic), encode_topic_assignment(assignment), assignment.zk_version
        )
        stat = (await self._write([op], controller_epoch_zk_version))[-1]
        return dataclasses.replace(assignment, zk_version=stat.version)

    async def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """The configs of those of ``topics`` that have one, in one round trip."""
        present = await self._read_present(sorted(topics), topic_config_path)
        return {topic: decode_topic_config(topic, data) for topic, (data, _) in present.items()}

    async def get_topic_config(self, topic: str) -> dict[str, str]:
        try:
            data, _ = await self.zk.get(topic_config_path(topic))
        except NoNode:
            return {}
        return decode_topic_config(topic, data)

    async def set_topic_config(
        self, topic: str, config: Mapping[str, str], *, notify: bool = True
    ) -> None:
        """Create or replace ``/config/topics/T``; ``notify`` adds the /config/changes
        sequence znode brokers watch for dynamic topic config."""
        data = encode_topic_config(config)
        try:
            await self.zk.set(topic_config_path(topic), data)
        except NoNode:
            try:
                await self.zk.create(topic_config_path(topic), data, makepath=True)
            except NodeExists:
                # Another broker created it between our set and create (two auto-
                # creations of one topic): write ours over it, as the set would have.
                await self.zk.set(topic_config_path(topic), data)
        if notify:
            await self.zk.create(
                f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}",
                encode_config_change(f"topics/{topic}"),
                sequence=True,
                makepath=True,
            )

    # -- topic deletion ----------------------------------------------------------------

    async def mark_topic_for_deletion(self, topic: str) -> bool:
        """Create ``/admin/delete_topics/T``; False if it was already marked."""
        try:
            await self.zk.create(delete_topic_path(topic), makepath=True)
        except NodeExists:
            return False
        return True

    async def wait_for_topics_deleted(self, topics: Iterable[str]) -> None:
        """Return once ``/brokers/topics/T`` of every topic is gone: the controller has
        finished deleting them (every replica stopped and deleted, the znodes removed).
        Never gives up by itself; cancel it to stop waiting.

        Each topic znode carries an exists watch; any firing on a pending path, and any
        (re)connection (whose lost watches need re-arming), leads to a re-read.
        """
        pending = {topic_path(t) for t in topics}
        with self.zk.subscribe() as events:  # before the reads, so no firing is missed
            while True:
                for path in sorted(pending):
                    if await self.zk.exists(path, watch=True) is None:
                        pending.discard(path)
                if not pending:
                    return
                async for event in events:
                    if isinstance(event, WatchEvent):
                        if event.path in pending:
                            break
                    elif event.state is ZkState.CONNECTED:
                        break

    async def get_topic_deletions(self, *, watch: bool = False) -> set[str]:
        """Topics marked for deletion; ``watch`` arms the child watch (TopicDeletion)."""
        return set(await self._children(DELETE_TOPICS_PATH, watch))

    async def delete_topic_deletion_marks(self, topics: Iterable[str]) -> None:
        await self._delete_all_present(delete_topic_path(topic) for topic in topics)

    async def delete_topic_znodes(self, topic: str) -> None:
        """Last step of a deletion: assignment, partition states and config go."""
        await self._delete_if_present(topic_path(topic), recursive=True)
        await self._delete_if_present(topic_config_path(topic))

    # -- partition states (implements state_machines.PartitionStateStore) ---------------

    async def read_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """The state of each partition that has a state znode."""
        present = await self._read_present(sorted(partitions), partition_state_path)
        return {
            tp: decode_partition_state(tp, data, stat.version)
            for tp, (data, stat) in present.items()
        }

    async def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        *,
        controller_epoch_zk_version: int | None = None,
    ) -> WriteResult:
        """Create state znodes (and their parents); an existing one is a conflict."""
        tps = sorted(states)
        # Each level of parents in its own batch: a transaction that fails on a parent
        # made earlier must not leave a child's parent missing in a later one.
        for parents in (
            sorted({partitions_path(tp.topic) for tp in tps}),
            map(partition_path, tps),
        ):
            for result in await self._write_each([CreateOp(p) for p in parents], None):
                if isinstance(result, ZkError) and not isinstance(result, NodeExists):
                    raise result
        ops = [CreateOp(partition_state_path(tp), encode_partition_state(states[tp])) for tp in tps]
        outcomes = await self._write_each(ops, controller_epoch_zk_version)
        written = WriteResult()
        for tp, outcome in zip(tps, outcomes, strict=True):
            if isinstance(outcome, NodeExists):
                written.conflicts.add(tp)
            elif isinstance(outcome, ZkError):
                raise outcome
            else:
                written.written[tp] = dataclasses.replace(states[tp], zk_version=0)
        return written

    async def update_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        *,
        controller_epoch_zk_version: int | None = None,
    ) -> WriteResult:
        """Set each state znode only if its version is still the value's zk_version; a
        moved version (or a vanished znode) is a conflict to re-read and decide again."""
        tps = sorted(states)
        ops = [
            SetOp(
                partition_state_path(tp), encode_partition_state(states[tp]), states[tp].zk_version
            )
            for tp in tps
        ]
        outcomes = await self._write_each(ops, controller_epoch_zk_version)
        written = WriteResult()
        for tp, outcome in zip(tps, outcomes, strict=True):
            if isinstance(outcome, (BadVersion, NoNode)):
                written.conflicts.add(tp)
            elif isinstance(outcome, ZkError):
                raise outcome
            else:
                written.written[tp] = dataclasses.replace(states[tp], zk_version=outcome.version)
        return written
