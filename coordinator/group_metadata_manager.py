"""GroupMetadataManager: the groups this broker coordinates, and their durable state.

How this works. A group lives in partition ``partition_for(group_id, N)`` of
``__consumer_offsets`` (protocol/offsets_topic.py); the leader of that partition is its
coordinator. The broker's ReplicaManager tells this manager when it becomes leader of
an offsets partition (``became_leader``: the partition is *loading* until every record
up to the log end is read back into ``groups``, and requests for its groups answer
COORDINATOR_LOAD_IN_PROGRESS meanwhile) and when it stops leading one (``resigned``:
its groups become Dead, parked requests answer NOT_COORDINATOR, and so do later ones).

Every change that must survive a coordinator failover is written to the partition with
acks=all before it is applied in memory: a group's metadata (generation, protocol,
leader, members and their assignments) when a rebalance completes, each committed
offset, and tombstones (null values) when offsets expire or are deleted and when a
group is deleted. Offsets expire after ``offsets.retention.minutes``: those of a group
without members counted from when it became Empty, those committed outside the group
protocol (standalone consumers) from their commit.

The group state machine and the join / sync protocol are coordinator/coordinator.py;
this module owns only what is stored and who owns it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import trio

from minibroker.coordinator.group import Group, GroupState, Member
from minibroker.coordinator.offsets_log import (
    Acknowledgement,
    OffsetsLog,
    TxnProducer,
    commit_error,
)
from minibroker.protocol.errors import (
    CoordinatorLoadInProgressError,
    CorruptMessageError,
    InvalidCommitOffsetSizeError,
    KafkaError,
    NotCoordinatorError,
)
from minibroker.protocol.offsets_topic import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    partition_for,
)
from minibroker.protocol.records.types import Record
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log_config import Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OffsetsConfig:
    num_partitions: int
    retention_ms: int
    metadata_max_bytes: int


class GroupMetadataManager:
    def __init__(
        self,
        offsets_log: OffsetsLog,
        config: OffsetsConfig,
        *,
        clock: Clock,
        num_partitions: Callable[[], int] | None = None,
        on_unload: Callable[[Group], None] = lambda group: None,
    ) -> None:
        """``num_partitions`` gives the offsets topic's partition count once it exists
        (default: ``config.num_partitions``); ``on_unload`` is called for each group
        dropped when this broker stops coordinating it (the coordinator answers its
        parked requests)."""
        self.log = offsets_log
        self.config = config
        self.clock = clock
        self._num_partitions = num_partitions or (lambda: config.num_partitions)
        self.on_unload = on_unload
        self.groups: dict[str, Group] = {}
        self.owned: dict[int, int] = {}
        """Offsets partitions loaded and led here -> the leader epoch they were loaded at."""
        self.loading: dict[int, int] = {}
        """Offsets partitions being loaded -> the leader epoch the load is for."""
        self._commits = 0
        """Offset commits written so far: each commit's place in the log's order."""

    # -- ownership -----------------------------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self._num_partitions())

    def check_owner(self, group_id: str) -> None:
        """Raise NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS unless this broker
        coordinates ``group_id`` now."""
        partition = self.partition_of(group_id)
        if partition in self.loading:
            raise CoordinatorLoadInProgressError(f"loading __consumer_offsets-{partition}")
        if partition not in self.owned:
            raise NotCoordinatorError(f"this broker does not lead __consumer_offsets-{partition}")

    def is_owner(self, group_id: str) -> bool:
        return self.partition_of(group_id) in self.owned

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def add_group(self, group: Group) -> Group:
        return self.groups.setdefault(group.group_id, group)

    def owned_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if g.state is not GroupState.DEAD]

    # -- leadership ----------------------------------------------------------------------------

    async def became_leader(self, partition: int, epoch: int) -> None:
        """Load ``partition`` (led at ``epoch``) unless it is loaded at that epoch."""
        if self.owned.get(partition) == epoch or self.loading.get(partition) == epoch:
            return
        if partition in self.owned:
            # Led again at a newer epoch without a resignation in between: what is in
            # memory is what was written, keep it.
            self.owned[partition] = epoch
            return
        self.loading[partition] = epoch
        try:
            loaded = await self._read_partition(partition)
        except CorruptMessageError as exc:
            log.error("cannot load __consumer_offsets-%d: %s", partition, exc)
            if self.loading.get(partition) == epoch:
                del self.loading[partition]
            return
        if self.loading.get(partition) != epoch or self.log.leader_epoch(partition) != epoch:
            return  # resigned (or re-elected) meanwhile: that event decides
        del self.loading[partition]
        for group in loaded:
            self.groups[group.group_id] = group
        self.owned[partition] = epoch
        log.info("loaded %d groups of __consumer_offsets-%d", len(loaded), partition)

    def resigned(self, partition: int) -> None:
        """Stop coordinating the groups of ``partition``."""
        self.loading.pop(partition, None)
        if self.owned.pop(partition, None) is None:
            return
        for group in [
            g for g in self.groups.values() if self.partition_of(g.group_id) == partition
        ]:
            del self.groups[group.group_id]
            group.transition_to(GroupState.DEAD, self.clock())
            self.on_unload(group)
        log.info("stopped coordinating the groups of __consumer_offsets-%d", partition)

    async def _read_partition(self, partition: int) -> list[Group]:
        metadata: dict[str, GroupMetadataValue | None] = {}
        offsets: dict[str, dict[TopicPartition, OffsetCommitValue | None]] = {}
        # A transaction's offsets count once its marker commits them; still open ones
        # are kept pending, as before the failover.
        open_txns: dict[int, dict[str, dict[TopicPartition, OffsetCommitValue | None]]] = {}
        for item in self.log.read_logged(partition):
            if item is None:
                await trio.sleep(0)
                continue
            if item.marker is not None:
                ended = open_txns.pop(item.producer_id, {})
                if item.marker:
                    for group_id, txn_offsets in ended.items():
                        offsets.setdefault(group_id, {}).update(txn_offsets)
                continue
            record = item.record
            if record.key is None:
                continue
            key = decode_key(record.key)
            if isinstance(key, OffsetCommitKey):
                tp = TopicPartition(key.topic, key.partition)
                value = None if record.value is None else decode_offset_commit_value(record.value)
                target = (
                    open_txns.setdefault(item.producer_id, {}) if item.transactional else offsets
                )
                target.setdefault(key.group, {})[tp] = value
            else:
                value_ = None if record.value is None else decode_group_metadata_value(record.value)
                metadata[key.group] = value_
        groups = []
        pending_groups = {g for txn in open_txns.values() for g in txn}
        for group_id in metadata.keys() | offsets.keys() | pending_groups:
            stored = metadata.get(group_id)
            group_offsets: dict[TopicPartition, OffsetCommitValue] = {
                tp: v for tp, v in offsets.get(group_id, {}).items() if v is not None
            }
            pending = {
                pid: {tp: v for tp, v in txn[group_id].items() if v is not None}
                for pid, txn in open_txns.items()
                if group_id in txn
            }
            if stored is None and not group_offsets and not pending:
                continue
            group = _group_from_record(group_id, stored, group_offsets, self.clock())
            group.pending_txn_offsets = pending
            groups.append(group)
        return groups

    # -- writes --------------------------------------------------------------------------------

    async def store_group(
        self, group: Group, assignments: Mapping[str, bytes]
    ) -> KafkaError | None:
        """Write the group's metadata with ``assignments`` (member id -> bytes)."""
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.current_state_timestamp,
            members=tuple(
                _member_record(m, group.protocol_name, assignments.get(m.member_id, b""))
                for m in group.members.values()
            ),
        )
        record = Record(
            encode_group_metadata_value(value),
            key=encode_group_metadata_key(GroupMetadataKey(group.group_id)),
            timestamp=self.clock(),
        )
        error = await self.log.append(self.partition_of(group.group_id), [record])()
        if error is None:
            return None
        mapped = commit_error(error)
        # Kafka answers a group write too large for the log UNKNOWN_SERVER_ERROR (the
        # offsets' INVALID_COMMIT_OFFSET_SIZE would mean nothing to a SyncGroup).
        return (
            KafkaError(error.message)
            if isinstance(mapped, InvalidCommitOffsetSizeError)
            else mapped
        )

    def store_offsets(
        self,
        group: Group,
        offsets: Mapping[TopicPartition, OffsetCommitValue],
    ) -> Acknowledgement:
        """Write ``offsets`` now; the returned wait makes them the group's committed ones
        once replicated. Commits reach the log in the order of the calls, and a commit
        whose replication completes after a later one of the same partition's (a client
        pipelining async commits) leaves the later one in place, as Kafka's
        appended-offset check does: the committed offset never goes backwards."""
        if not offsets:
            return _nothing_to_store
        records = [
            Record(
                encode_offset_commit_value(value),
                key=encode_offset_commit_key(
                    OffsetCommitKey(group.group_id, tp.topic, tp.partition)
                ),
                timestamp=value.commit_timestamp,
            )
            for tp, value in offsets.items()
        ]
        acknowledged = self.log.append(self.partition_of(group.group_id), records)
        self._commits += 1
        order = self._commits

        async def stored() -> KafkaError | None:
            error = await acknowledged()
            if error is not None:
                return commit_error(error)
            if self.groups.get(group.group_id) is group:
                latest = group.offset_commit_order
                for tp, value in offsets.items():
                    if latest.get(tp, 0) < order:
                        group.offsets[tp] = value
                        latest[tp] = order
            return None

        return stored

    def store_txn_offsets(
        self,
        group: Group,
        producer: TxnProducer,
        offsets: Mapping[TopicPartition, OffsetCommitValue],
    ) -> Acknowledgement:
        """Write a transaction's ``offsets`` as its producer's batch; once replicated
        they are pending until the transaction's marker reaches the group's partition
        (``complete_txn``), and become the committed ones only if it commits."""
        if not offsets:
            return _nothing_to_store
        records = [
            Record(
                encode_offset_commit_value(value),
                key=encode_offset_commit_key(
                    OffsetCommitKey(group.group_id, tp.topic, tp.partition)
                ),
                timestamp=value.commit_timestamp,
            )
            for tp, value in offsets.items()
        ]
        acknowledged = self.log.append(
            self.partition_of(group.group_id), records, producer=producer
        )

        async def stored() -> KafkaError | None:
            error = await acknowledged()
            if error is not None:
                return commit_error(error)
            if self.groups.get(group.group_id) is group:
                group.pending_txn_offsets.setdefault(producer.producer_id, {}).update(offsets)
            return None

        return stored

    def complete_txn(self, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction's marker reached ``partition``: its pending offsets of the
        groups there become committed (or are dropped)."""
        if partition not in self.owned:
            return
        for group in self.groups.values():
            if self.partition_of(group.group_id) != partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending is None:
                continue
            if committed:
                self._commits += 1
                for tp, value in pending.items():
                    group.offsets[tp] = value
                    group.offset_commit_order[tp] = self._commits

    async def delete_offsets(
        self, group: Group, tps: Iterable[TopicPartition]
    ) -> KafkaError | None:
        """Write tombstones for ``tps`` and forget them."""
        tps = [tp for tp in tps if tp in group.offsets]
        if not tps:
            return None
        now = self.clock()
        records = [
            Record(
                None,
                key=encode_offset_commit_key(
                    OffsetCommitKey(group.group_id, tp.topic, tp.partition)
                ),
                timestamp=now,
            )
            for tp in tps
        ]
        error = await self.log.append(self.partition_of(group.group_id), records)()
        if error is not None:
            return commit_error(error)
        for tp in tps:
            group.offsets.pop(tp, None)
        return None

    async def delete_group(self, group: Group) -> KafkaError | None:
        """Tombstone the group and all its offsets; it becomes Dead."""
        now = self.clock()
        records = [
            Record(
                None,
                key=encode_offset_commit_key(
                    OffsetCommitKey(group.group_id, tp.topic, tp.partition)
                ),
                timestamp=now,
            )
            for tp in group.offsets
        ]
        records.append(
            Record(
                None, key=encode_group_metadata_key(GroupMetadataKey(group.group_id)), timestamp=now
            )
        )
        error = await self.log.append(self.partition_of(group.group_id), records)()
        if error is not None:
            return commit_error(error)
        group.offsets.clear()
        group.offset_commit_order.clear()
        if group.state is not GroupState.DEAD:
            group.transition_to(GroupState.DEAD, now)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        return None

    # -- expiry --------------------------------------------------------------------------------

    def expired_offsets(self, group: Group, now_ms: int) -> list[TopicPartition]:
        """Kafka's rule (KIP-211): a group with members keeps its offsets; an empty
        group's expire ``offsets.retention.minutes`` after it became empty; offsets
        committed outside the group protocol (no protocol type) after their commit. A
        commit that asked for its own retention (OffsetCommit v2-4) expires then."""
        retention = self.config.retention_ms
        expired = []
        for tp, value in group.offsets.items():
            if value.expire_timestamp >= 0:
                if value.expire_timestamp <= now_ms:
                    expired.append(tp)
                continue
            if group.protocol_type is None:
                base = value.commit_timestamp
            elif group.state is GroupState.EMPTY:
                base = max(group.current_state_timestamp, value.commit_timestamp)
            else:
                continue
            if base + retention <= now_ms:
                expired.append(tp)
        return expired

    async def expire_offsets(self) -> int:
        """One retention pass over the owned groups; returns the offsets removed."""
        removed = 0
        now = self.clock()
        for group in list(self.owned_groups()):
            expired = self.expired_offsets(group, now)
            if expired:
                error = await self.delete_offsets(group, expired)
                if error is not None:
                    log.warning("cannot expire offsets of group %r: %s", group.group_id, error)
                    continue
                removed += len(expired)
            if group.state is GroupState.EMPTY and not group.offsets and not group.members:
                error = await self.delete_group(group)
                if error is not None:
                    log.warning("cannot remove empty group %r: %s", group.group_id, error)
        return removed


def _member_record(m: Member, protocol: str | None, assignment: bytes) -> MemberRecord:
    return MemberRecord(
        member_id=m.member_id,
        group_instance_id=m.group_instance_id,
        client_id=m.client_id,
        client_host=m.client_host,
        rebalance_timeout=m.rebalance_timeout_ms,
        session_timeout=m.session_timeout_ms,
        subscription=next((meta for name, meta in m.protocols if name == protocol), b""),
        assignment=assignment,
    )


def _group_from_record(
    group_id: str,
    value: GroupMetadataValue | None,
    offsets: dict[TopicPartition, OffsetCommitValue],
    now_ms: int,
) -> Group:
    """A loaded group: Empty without members, else Stable with its stored generation
    (members must heartbeat within their session timeout, as after any failover)."""
    group = Group(group_id, offsets=dict(offsets))
    if value is None:
        group.current_state_timestamp = now_ms
        return group
    group.protocol_type = value.protocol_type or None
    group.generation_id = value.generation
    group.protocol_name = value.protocol
    group.current_state_timestamp = (
        value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms
    )
    for m in value.members:
        member = Member(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout,
            session_timeout_ms=m.session_timeout,
            protocol_type=value.protocol_type,
            protocols=[(value.protocol or "", m.subscription)],
            assignment=m.assignment,
            is_new=False,
        )
        group.add(member)
    group.leader_id = value.leader if value.leader in group.members else group.leader_id
    if group.members:
        group.state = GroupState.STABLE
    return group


async def _nothing_to_store() -> KafkaError | None:
    return None
