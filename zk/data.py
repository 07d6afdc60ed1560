"""Kafka's ZooKeeper data layer (Kafka's KafkaZkClient) over ``ZkClient``.

How this works: each method reads or writes the znodes of ``controller.zk_model`` and
returns typed values. Multi-partition operations are pipelined (one round trip for
all partitions), which keeps controller failover fast with many partitions.

Fencing. A controller's writes must not land after another controller took over. The
winner of ``register_controller`` learns the znode version of ``/controller_epoch`` it
wrote; passing it as ``controller_epoch_zk_version`` turns each write into a
ZooKeeper transaction [check /controller_epoch version, write] (as Kafka 2.x does),
and a failed check raises ``ControllerMovedError``. Brokers updating their own ISR pass
nothing: the partition state's zkVersion alone guards those.

Watches are one-shot (see ``controller.zk_client``): ``watch=True`` arms one on the read
it belongs to; the resulting ``WatchEvent`` names the path to read (and re-arm) again.

Who calls what: brokers register themselves and report ISR changes; the active
controller owns everything under /brokers/topics/*/partitions, /controller_epoch and the
admin notifications it consumes; any broker may create topics and deletion marks
(CreateTopics / DeleteTopics on a non-controller broker).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import trio

from minibroker.protocol.errors import MinibrokerError, TopicAlreadyExistsError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import (
    BadVersion,
    CheckOp,
    CreateOp,
    NodeExists,
    NoNode,
    SetOp,
    TxnOp,
    WatchEvent,
    WatchType,
    ZkClient,
    ZkError,
    ZkEvent,
    ZkState,
)
from minibroker.zk.model import (
    BROKER_IDS_PATH,
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    INITIAL_CONTROLLER_EPOCH,
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    LOG_DIR_EVENT_PREFIX,
    PERSISTENT_PATHS,
    PREFERRED_REPLICA_ELECTION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
    BrokerInfo,
    ControllerMovedError,
    LeaderAndIsr,
    ProducerIdBlock,
    TopicAssignment,
    WriteResult,
    ZkDataError,
    broker_path,
    decode_broker_info,
    decode_controller,
    decode_controller_epoch,
    decode_log_dir_event,
    decode_partition_list,
    decode_partition_state,
    decode_producer_id_block,
    decode_reassignment,
    decode_topic_assignment,
    decode_topic_config,
    delete_topic_path,
    encode_broker_info,
    encode_config_change,
    encode_controller,
    encode_controller_epoch,
    encode_log_dir_event,
    encode_partition_list,
    encode_partition_state,
    encode_producer_id_block,
    encode_reassignment,
    encode_topic_assignment,
    encode_topic_config,
    isr_change_path,
    log_dir_event_path,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
)

log = logging.getLogger("minibroker.controller.zk")

Clock = Callable[[], int]
T = TypeVar("T")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class BrokerIdInUseError(MinibrokerError):
    """Another live session already registered this broker id."""


class KafkaZkClient:
    """Kafka's znodes as typed async calls. ``clock`` gives wall-clock ms (injectable)."""

    def __init__(self, zk: ZkClient, *, clock: Clock = wall_clock_ms) -> None:
        self.zk = zk
        self.clock = clock

    async def create_top_level_paths(self) -> None:
        """The persistent parents every broker expects (idempotent)."""
        for path in PERSISTENT_PATHS:
            await self.zk.ensure_path(path)

    # -- brokers ------------------------------------------------------------------------

    async def register_broker(self, info: BrokerInfo, *, stale_wait: float = 0.0) -> int:
        """Create the ephemeral ``/brokers/ids/N``; returns the broker epoch (its czxid).

        Re-registering from the same session (after a reconnect) is not an error. A
        znode owned by another session is: at once with ``stale_wait`` 0 (Kafka's
        behaviour), else once it has not vanished within ``stale_wait`` seconds. A
        broker restarted right after a crash passes about the session timeout, which is
        how long its previous session's znode can outlive the old process.
        """
        info = dataclasses.replace(info, timestamp_ms=self.clock())
        path = broker_path(info.id)
        deadline = trio.current_time() + stale_wait
        with self.zk.subscribe() as events:
            while True:
                with contextlib.suppress(NodeExists):
                    await self.zk.create(
                        path, encode_broker_info(info), ephemeral=True, makepath=True
                    )
                stat = await self.zk.exists(path)
                if stat is not None and stat.ephemeral_owner == self.zk.session_id:
                    return stat.czxid
                if stat is None:
                    continue  # it vanished between our create and exists: try again
                if deadline > trio.current_time():
                    log.warning(
                        "broker id %d is held by session 0x%x; waiting up to %.1f s for it "
                        "to expire",
                        info.id,
                        stat.ephemeral_owner,
                        deadline - trio.current_time(),
                    )
                if not await self._wait_for_deletion(path, events, deadline):
                    raise BrokerIdInUseError(
                        f"broker id {info.id} is registered by another session "
                        f"(0x{stat.ephemeral_owner:x})"
                    )

    async def _wait_for_deletion(
        self, path: str, events: trio.MemoryReceiveChannel[ZkEvent], deadline: float
    ) -> bool:
        """True once ``path`` is gone, False if it still exists at ``deadline``."""
        gone = WatchEvent(WatchType.DELETED, path)
        with trio.move_on_at(deadline):
            if await self.zk.exists(path, watch=True) is None:
                return True
            async for event in events:
                if event == gone:
                    return True
        return False

    async def get_broker_ids(self, *, watch: bool = False) -> set[int]:
        return {int(child) for child in await self._children(BROKER_IDS_PATH, watch)}

    async def get_live_brokers(self, *, watch: bool = False) -> dict[int, BrokerInfo]:
        """Every registered broker with its epoch; ``watch`` arms the /brokers/ids child
        watch (Kafka's BrokerChange)."""
        ids = sorted(await self.get_broker_ids(watch=watch))
        results = await self.zk.get_many([broker_path(i) for i in ids])
        brokers = {}
        for broker_id, result in zip(ids, results, strict=True):
            if isinstance(result, NoNode):
                continue  # deregistered between the two reads
            if isinstance(result, ZkError):
                raise result
            data, stat = result
            brokers[broker_id] = decode_broker_info(broker_id, data, epoch=stat.czxid)
        return brokers

    # -- topics ------------------------------------------------------------------------

    async def get_topics(self, *, watch: bool = False) -> set[str]:
        """Topic names; ``watch`` arms the /brokers/topics child watch (TopicChange)."""
        return set(await self._children(TOPICS_PATH, watch))

    async def create_topic(
        self, topic: str, partitions: Mapping[int, Sequence[int]], config: Mapping[str, str]
    ) -> None:
        """Write the topic's config, then its assignment (Kafka's order: a controller
        that sees the topic always finds its config). TopicAlreadyExistsError if the
        assignment znode exists (also while a deletion is pending)."""
        if await self.zk.exists(topic_path(topic)) is not None:
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        await self.set_topic_config(topic, config, notify=False)
        assignment = TopicAssignment(topic, {p: tuple(r) for p, r in partitions.items()})
        try:
            await self.zk.create(
                topic_path(topic), encode_topic_assignment(assignment), makepath=True
            )
        except NodeExists as exc:
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.") from exc

    async def get_assignment(self, topic: str, *, watch: bool = False) -> TopicAssignment | None:
        """``watch`` arms a data watch on the topic znode (Kafka's PartitionModifications)."""
        try:
            data, stat = await self.zk.get(topic_path(topic), watch=watch)
        except NoNode:
            return None
        return decode_topic_assignment(topic, data, zk_version=stat.version)

    async def get_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        names = sorted(topics)
        results = await self.zk.get_many([topic_path(t) for t in names])
        found = {}
        for topic, result in zip(names, results, strict=True):
            if isinstance(result, NoNode):
                continue
            if isinstance(result, ZkError):
                raise result
            found[topic] = decode_topic_assignment(topic, result[0], zk_version=result[1].version)
        return found

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
            await self.zk.create(topic_config_path(topic), data, makepath=True)
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
        for topic in topics:
            await self._delete_if_present(delete_topic_path(topic))

    async def delete_topic_znodes(self, topic: str) -> None:
        """Last step of a deletion: assignment, partition states and config go."""
        await self._delete_if_present(topic_path(topic), recursive=True)
        await self._delete_if_present(topic_config_path(topic))

    # -- partition states (implements state_machines.PartitionStateStore) ---------------

    async def read_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """The state of each partition that has a state znode."""
        tps = sorted(partitions)
        results = await self.zk.get_many([partition_state_path(tp) for tp in tps])
        states = {}
        for tp, result in zip(tps, results, strict=True):
            if isinstance(result, NoNode):
                continue
            if isinstance(result, ZkError):
                raise result
            states[tp] = decode_partition_state(tp, result[0], result[1].version)
        return states

    async def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        *,
        controller_epoch_zk_version: int | None = None,
    ) -> WriteResult:
        """Create state znodes (and their parents); an existing one is a conflict."""
        tps = sorted(states)
        parents = sorted({partitions_path(tp.topic) for tp in tps}) + [
            partition_path(tp) for tp in tps
        ]
        for result in await self.zk.create_many([CreateOp(p) for p in parents]):
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

    # -- controller election -------------------------------------------------------------

    async def get_controller_id(self, *, watch: bool = False) -> int | None:
        """The active controller's broker id, or None. ``watch`` arms an exists watch on
        /controller, which fires on creation, deletion and change (ControllerChange)."""
        if await self.zk.exists(CONTROLLER_PATH, watch=watch) is None:
            return None
        try:
            data, _ = await self.zk.get(CONTROLLER_PATH)
        except NoNode:
            return None  # resigned just now; the exists watch reports it
        return decode_controller(data)

    async def try_create_controller(self, broker_id: int) -> bool:
        """Create the ephemeral /controller; False if another broker holds it."""
        try:
            await self.zk.create(
                CONTROLLER_PATH, encode_controller(broker_id, self.clock()), ephemeral=True
            )
        except NodeExists:
            return False
        return True

    async def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, znode version) of /controller_epoch, None before any controller."""
        try:
            data, stat = await self.zk.get(CONTROLLER_EPOCH_PATH)
        except NoNode:
            return None
        return decode_controller_epoch(data), stat.version

    async def _get_or_create_controller_epoch(self) -> tuple[int, int]:
        current = await self.get_controller_epoch()
        if current is not None:
            return current
        # NodeExists: another candidate created it first; read theirs.
        with contextlib.suppress(NodeExists):
            await self.zk.create(
                CONTROLLER_EPOCH_PATH, encode_controller_epoch(INITIAL_CONTROLLER_EPOCH)
            )
        current = await self.get_controller_epoch()
        assert current is not None, "/controller_epoch vanished right after creation"
        return current

    async def increment_controller_epoch(self) -> tuple[int, int]:
        """Epoch + 1 with a conditional set; returns (new epoch, new znode version).
        ControllerMovedError if another controller bumped it first."""
        epoch, version = await self._get_or_create_controller_epoch()
        try:
            stat = await self.zk.set(
                CONTROLLER_EPOCH_PATH, encode_controller_epoch(epoch + 1), version=version
            )
        except BadVersion as exc:
            raise ControllerMovedError(f"controller epoch moved past {epoch}") from exc
        return epoch + 1, stat.version

    async def register_controller(self, broker_id: int) -> tuple[int, int]:
        """Become controller: create /controller and bump /controller_epoch atomically.

        Returns (new epoch, its znode version) for fencing later writes. Raises
        ControllerMovedError if another broker is controller or won the race.
        """
        epoch, version = await self._get_or_create_controller_epoch()
        try:
            results = await self.zk.commit(
                [
                    CreateOp(
                        CONTROLLER_PATH, encode_controller(broker_id, self.clock()), ephemeral=True
                    ),
                    SetOp(CONTROLLER_EPOCH_PATH, encode_controller_epoch(epoch + 1), version),
                ]
            )
        except (NodeExists, BadVersion) as exc:
            raise ControllerMovedError(f"broker {broker_id} lost the controller election") from exc
        return epoch + 1, results[1].version

    async def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if it is still ours (a newer controller's is left alone)."""
        try:
            data, stat = await self.zk.get(CONTROLLER_PATH)
            if decode_controller(data) == broker_id:
                await self.zk.delete(CONTROLLER_PATH, version=stat.version)
        except (NoNode, BadVersion):
            pass

    # -- admin notifications -------------------------------------------------------------

    async def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        """A broker reports ISR changes; returns the sequential znode's name."""
        path = await self.zk.create(
            isr_change_path(ISR_CHANGE_PREFIX),
            encode_partition_list(partitions),
            sequence=True,
            makepath=True,
        )
        return path.rsplit("/", 1)[-1]

    async def get_isr_change_notifications(self, *, watch: bool = False) -> list[str]:
        """Pending notification names in creation order; ``watch`` arms the child watch."""
        names = await self._children(ISR_CHANGE_NOTIFICATION_PATH, watch)
        return sorted(n for n in names if n.startswith(ISR_CHANGE_PREFIX))

    async def read_isr_change_notifications(self, names: Iterable[str]) -> set[TopicPartition]:
        """Union of the partitions the named notifications report (gone ones skipped)."""
        paths = [isr_change_path(n) for n in names]
        changed: set[TopicPartition] = set()
        for path, result in zip(paths, await self.zk.get_many(paths), strict=True):
            if isinstance(result, NoNode):
                continue
            if isinstance(result, ZkError):
                raise result
            changed |= decode_partition_list(result[0], path)
        return changed

    async def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        for name in names:
            await self._delete_if_present(isr_change_path(name))

    async def create_log_dir_event_notification(self, broker_id: int) -> str:
        """A broker reports that one of its log dirs failed; returns the znode's name."""
        path = await self.zk.create(
            log_dir_event_path(LOG_DIR_EVENT_PREFIX),
            encode_log_dir_event(broker_id),
            sequence=True,
            makepath=True,
        )
        return path.rsplit("/", 1)[-1]

    async def get_log_dir_event_notifications(self, *, watch: bool = False) -> list[str]:
        """Pending log dir event names in creation order; ``watch`` arms the child watch."""
        names = await self._children(LOG_DIR_EVENT_NOTIFICATION_PATH, watch)
        return sorted(n for n in names if n.startswith(LOG_DIR_EVENT_PREFIX))

    async def read_log_dir_event_notifications(self, names: Iterable[str]) -> set[int]:
        """The brokers the named events report (gone ones skipped; one that is not
        Kafka's JSON is logged and skipped, so it cannot wedge the controller)."""
        paths = [log_dir_event_path(n) for n in names]
        brokers: set[int] = set()
        for path, result in zip(paths, await self.zk.get_many(paths), strict=True):
            if isinstance(result, NoNode):
                continue
            if isinstance(result, ZkError):
                raise result
            try:
                brokers.add(decode_log_dir_event(result[0], path))
            except ZkDataError as exc:
                log.warning("ignoring %s: %s", path, exc)
        return brokers

    async def delete_log_dir_event_notifications(self, names: Iterable[str]) -> None:
        for name in names:
            await self._delete_if_present(log_dir_event_path(name))

    async def get_reassignment(
        self, *, watch: bool = False
    ) -> dict[TopicPartition, tuple[int, ...]]:
        """Requested targets (RAR) from /admin/reassign_partitions, {} when absent.
        ``watch`` arms an exists watch (fires on create, change and delete)."""
        return await self._read_optional(REASSIGN_PARTITIONS_PATH, watch, decode_reassignment, dict)

    async def set_reassignment(self, targets: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Write the pending reassignments; an empty mapping deletes the znode (Kafka)."""
        if not targets:
            await self.delete_reassignment()
            return
        await self._set_or_create(REASSIGN_PARTITIONS_PATH, encode_reassignment(targets))

    async def delete_reassignment(self) -> None:
        await self._delete_if_present(REASSIGN_PARTITIONS_PATH)

    async def get_preferred_replica_election(self, *, watch: bool = False) -> set[TopicPartition]:
        return await self._read_optional(
            PREFERRED_REPLICA_ELECTION_PATH,
            watch,
            lambda data: decode_partition_list(data, PREFERRED_REPLICA_ELECTION_PATH),
            set,
        )

    async def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> bool:
        """False if an election is already pending (Kafka refuses a second one)."""
        try:
            await self.zk.create(
                PREFERRED_REPLICA_ELECTION_PATH, encode_partition_list(partitions), makepath=True
            )
        except NodeExists:
            return False
        return True

    async def delete_preferred_replica_election(self) -> None:
        await self._delete_if_present(PREFERRED_REPLICA_ELECTION_PATH)

    # -- helpers -------------------------------------------------------------------------

    async def allocate_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock:
        """Reserve the next ``size`` producer ids for ``broker_id`` (Kafka's
        ZkProducerIdManager): read /latest_producer_id_block, write the block after it
        with a conditional set on the znode version, and retry if another broker won."""
        while True:
            try:
                data, stat = await self.zk.get(PRODUCER_ID_BLOCK_PATH)
            except NoNode:
                with contextlib.suppress(NodeExists):
                    await self.zk.create(PRODUCER_ID_BLOCK_PATH, b"")
                continue
            latest = decode_producer_id_block(data)
            start = 0 if latest is None else latest.end + 1
            block = ProducerIdBlock(broker_id, start, start + size - 1)
            try:
                await self.zk.set(
                    PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(block), version=stat.version
                )
            except BadVersion:
                continue  # another broker took this block first: take the next one
            return block

    async def _write(self, ops: Sequence[TxnOp], fence: int | None) -> list[Any]:
        """One atomic write, fenced by the controller epoch version when given."""
        guard: list[TxnOp] = [] if fence is None else [CheckOp(CONTROLLER_EPOCH_PATH, fence)]
        try:
            return await self.zk.commit([*guard, *ops])
        except BadVersion as exc:
            if fence is not None and exc.failed_op == 0:
                raise ControllerMovedError("/controller_epoch changed: resign") from exc
            raise

    async def _write_each(self, ops: Sequence[TxnOp], fence: int | None) -> list[Any]:
        """Independent writes in one round trip; per op its result or its ZkError. Each
        is its own transaction, [check /controller_epoch, op] when fenced."""
        guard: list[TxnOp] = [] if fence is None else [CheckOp(CONTROLLER_EPOCH_PATH, fence)]
        results = await self.zk.commit_many([[*guard, op] for op in ops])
        outcomes: list[Any] = []
        for result in results:
            if isinstance(result, BadVersion) and guard and result.failed_op == 0:
                raise ControllerMovedError("/controller_epoch changed: resign") from result
            outcomes.append(result if isinstance(result, ZkError) else result[-1])
        return outcomes

    async def _read_optional(
        self, path: str, watch: bool, decode: Callable[[bytes], T], empty: Callable[[], T]
    ) -> T:
        """Decode ``path``, or ``empty()`` when it does not exist; ``watch`` arms an
        exists watch either way."""
        if await self.zk.exists(path, watch=watch) is None:
            return empty()
        try:
            data, _ = await self.zk.get(path)
        except NoNode:
            return empty()
        return decode(data)

    async def _children(self, path: str, watch: bool) -> list[str]:
        """Children of one of the PERSISTENT_PATHS, creating it if missing: a child watch
        needs the znode to exist, and an empty cluster simply has none yet."""
        try:
            return await self.zk.get_children(path, watch=watch)
        except NoNode:
            await self.zk.ensure_path(path)
            return await self.zk.get_children(path, watch=watch)

    async def _set_or_create(self, path: str, data: bytes) -> None:
        try:
            await self.zk.set(path, data)
        except NoNode:
            await self.zk.create(path, data, makepath=True)

    async def _delete_if_present(self, path: str, *, recursive: bool = False) -> None:
        with contextlib.suppress(NoNode):
            await self.zk.delete(path, recursive=recursive)
