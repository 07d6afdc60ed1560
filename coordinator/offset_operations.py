"""The offset and administration APIs' side of the GroupCoordinator: OffsetCommit's
group checks (Kafka's handleCommitOffsets), OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups and OffsetDelete.

A collaborator of GroupCoordinator (coordinator/coordinator.py), working through its
``GroupRebalancer`` (coordinator/rebalance.py: the manager, the clock, members'
sessions and detached writes); kept apart because these requests never change a
group's membership.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.coordinator.group import Answer, Group, GroupState, Written
from minibroker.coordinator.offsets_log import Acknowledgement, TxnProducer
from minibroker.coordinator.rebalance import GroupRebalancer
from minibroker.protocol.errors import (
    NONE,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    KafkaError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from minibroker.protocol.offsets_topic import OffsetCommitValue
from minibroker.protocol.topic_partition import TopicPartition


class GroupOffsetOperations:
    """OffsetCommit, TxnOffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
    DeleteGroups and OffsetDelete on the groups of one coordinator."""

    def __init__(self, rebalancer: GroupRebalancer) -> None:
        self.rebalancer = rebalancer
        self.manager = rebalancer.manager

    # -- offsets -------------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetCommitValue],
    ) -> Answer[Written[TopicPartition]]:
        """Answer: ``{"errors": {tp: code}}`` once the commit is written (or refused)."""
        return self._commit(
            group_id, generation_id, member_id, group_instance_id, offsets,
            self.manager.store_offsets,
        )  # fmt: skip

    def commit_txn_offsets(
        self,
        group_id: str,
        producer: TxnProducer,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetCommitValue],
    ) -> Answer[Written[TopicPartition]]:
        """TxnOffsetCommit: ``offsets`` written as the producer's, pending until its
        transaction ends. A v3+ request names the member (KIP-447) and is checked as a
        commit is; an older one (generation -1) only needs the group to exist or be
        new."""
        return self._commit(
            group_id, generation_id, member_id, group_instance_id, offsets,
            lambda group, valid: self.manager.store_txn_offsets(group, producer, valid),
            transactional=True,
        )  # fmt: skip

    def _commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetCommitValue],
        store: Callable[[Group, dict[TopicPartition, OffsetCommitValue]], Acknowledgement],
        *,
        transactional: bool = False,
    ) -> Answer[Written[TopicPartition]]:
        """Check the committer, refuse oversized metadata, ``store`` the rest (written
        now, in request order) and answer once the write is done."""
        answer: Answer[Written[TopicPartition]] = Answer()
        try:
            group = self._group_for_commit(
                group_id, generation_id, member_id, group_instance_id, transactional
            )
        except KafkaError as exc:
            answer.set({"errors": dict.fromkeys(offsets, exc.code)})
            return answer
        errors: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, OffsetCommitValue] = {}
        for tp, value in offsets.items():
            if len(value.metadata.encode()) > self.manager.config.metadata_max_bytes:
                errors[tp] = OffsetMetadataTooLargeError.code
            else:
                valid[tp] = value
        stored = store(group, valid)

        async def write() -> Written[TopicPartition]:
            error = await stored()
            code = NONE if error is None else error.code
            return {"errors": {**errors, **dict.fromkeys(valid, code)}}

        return self.rebalancer.detached(write)

    def unstable_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions an open transaction holds offsets of (OffsetFetch
        ``require_stable``, KIP-447)."""
        group = self.manager.group(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}

    def _group_for_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        transactional: bool = False,
    ) -> Group:
        self.manager.check_owner(group_id)
        group = self.manager.group(group_id)
        if group is None:
            if generation_id >= 0:
                raise IllegalGenerationError(f"group {group_id!r} has no generation")
            # A consumer outside the group protocol (assign(), not subscribe()).
            return self.manager.add_group(
                Group(group_id, current_state_timestamp=self.rebalancer.clock())
            )
        if group.is_(GroupState.DEAD):
            raise CoordinatorNotAvailableError(f"group {group_id!r} is being removed")
        if group.is_static_member_fenced(member_id, instance_id):
            raise FencedInstanceIdError(f"instance {instance_id!r} is held by another")
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return group
        if transactional and generation_id < 0 and not member_id and instance_id is None:
            # A TxnOffsetCommit before v3 (KIP-447) cannot name a member: Kafka takes it
            # whatever the group's state (Sarama's legacy group id path sends it so).
            return group
        if group.is_(GroupState.COMPLETING_REBALANCE):
            raise RebalanceInProgressError(f"group {group_id!r} is completing a rebalance")
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"{member_id} is not a member of {group_id!r}")
        if generation_id != group.generation_id:
            raise IllegalGenerationError(
                f"generation {generation_id} is not the group's {group.generation_id}"
            )
        self.rebalancer.extend_session(member)
        return group

    def fetch_offsets(
        self, group_id: str, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetCommitValue | None]:
        """Committed offsets (None: no commit); ``tps`` None asks for all."""
        self.manager.check_owner(group_id)
        group = self.manager.group(group_id)
        committed = {} if group is None else group.offsets
        if tps is None:
            return dict(committed)
        return {tp: committed.get(tp) for tp in tps}

    # -- administration ------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> Group | None:
        self.manager.check_owner(group_id)
        return self.manager.group(group_id)

    def list_groups(self) -> list[Group]:
        return self.manager.owned_groups()

    def delete_groups(self, group_ids: list[str]) -> Answer[Written[str]]:
        """Answer: ``{"errors": {group_id: code}}``."""
        errors: dict[str, int] = {}
        deletable: list[Group] = []
        for group_id in group_ids:
            try:
                self.manager.check_owner(group_id)
                group = self.manager.group(group_id)
                if group is None or group.is_(GroupState.DEAD):
                    raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
                if not group.is_(GroupState.EMPTY):
                    raise NonEmptyGroupError(f"group {group_id!r} has members")
            except KafkaError as exc:
                errors[group_id] = exc.code
            else:
                deletable.append(group)

        async def delete() -> Written[str]:
            for group in deletable:
                error = await self.manager.delete_group(group)
                errors[group.group_id] = NONE if error is None else error.code
            return {"errors": errors}

        return self.rebalancer.detached(delete)

    def delete_offsets(
        self, group_id: str, tps: list[TopicPartition]
    ) -> Answer[Written[TopicPartition]]:
        """Answer: ``{"errors": {tp: code}}``; raises what the whole request answers."""
        self.manager.check_owner(group_id)
        group = self.manager.group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
        # As Kafka: an empty group's offsets all go; a consumer group's only for topics
        # no member subscribes to; any other group with members keeps them.
        if group.is_(GroupState.EMPTY):
            subscribed: set[str] | None = set()
        elif group.protocol_type == "consumer":
            subscribed = group.subscribed_topics()
        else:
            raise NonEmptyGroupError(f"group {group_id!r} has members")
        errors: dict[TopicPartition, int] = {}
        deletable = []
        for tp in tps:
            if subscribed is None or tp.topic in subscribed:
                errors[tp] = GroupSubscribedToTopicError.code
            else:
                deletable.append(tp)

        async def delete() -> Written[TopicPartition]:
            error = await self.manager.delete_offsets(group, deletable)
            code = NONE if error is None else error.code
            return {"errors": {**errors, **dict.fromkeys(deletable, code)}}

        return self.rebalancer.detached(delete)
