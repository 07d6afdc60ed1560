"""Which transactional ids this broker coordinates, and their values in
``__transaction_state`` (Kafka's TransactionStateManager).

A broker coordinates the ids of the ``__transaction_state`` partitions it leads. On
becoming leader of one it reads the partition from start to end (the last value of each
id wins; a tombstone removes it) before serving its ids (COORDINATOR_LOAD_IN_PROGRESS
meanwhile), then hands the loaded ids to ``on_loaded`` (the coordinator completes
those left in PrepareCommit / PrepareAbort: a failover finishes what was decided). On
losing the leadership it drops them (NOT_COORDINATOR). The leader epoch at load time
is the ids' coordinator epoch, which their markers carry.

``write`` appends one value with acks=all and makes it the id's state once replicated,
provided this broker still coordinates the id at the epoch it wrote under.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeAlias

import trio

from minibroker.coordinator.offsets_log import Acknowledged, ReplicaOffsetsLog, commit_error
from minibroker.protocol.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    CorruptMessageError,
    KafkaError,
    NotCoordinatorError,
)
from minibroker.protocol.records.types import Record
from minibroker.protocol.transaction_log import (
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from minibroker.storage.log_config import Clock
from minibroker.transaction.metadata import TransactionMetadata, TxnState, TxnValue

log = logging.getLogger(__name__)

StateWrite: TypeAlias = Callable[[], Awaitable[None]]
"""The rest of a write to ``__transaction_state``: done once replicated (or raises)."""

PARTITION_CACHE_SIZE = 100_000
"""Transactional ids whose partition is remembered (cleared when full)."""


class TransactionStateManager:
    def __init__(
        self,
        state_log: ReplicaOffsetsLog,
        *,
        num_partitions: Callable[[], int],
        clock: Clock,
    ) -> None:
        """``num_partitions``: partitions of ``__transaction_state`` as they are now."""
        self.log = state_log
        self.num_partitions = num_partitions
        self.clock = clock
        self.transactions: dict[str, TransactionMetadata] = {}
        self.owned: dict[int, int] = {}  # partition -> leader epoch it was loaded at
        self.loading: dict[int, int] = {}
        self.on_loaded: Callable[[Iterable[TransactionMetadata]], None] = lambda _: None
        self._partitions: dict[str, int] = {}
        """id -> its partition at ``_partitions_of`` partitions (a string hash in Python
        costs more than the rest of a lookup; every request asks several times)."""
        self._partitions_of = -1

    def partition_of(self, transactional_id: str) -> int:
        count = self.num_partitions()
        if count != self._partitions_of:
            self._partitions, self._partitions_of = {}, count
        partition = self._partitions.get(transactional_id)
        if partition is None:
            partition = partition_for(transactional_id, count)
            if len(self._partitions) >= PARTITION_CACHE_SIZE:
                self._partitions.clear()
            self._partitions[transactional_id] = partition
        return partition

    def check_owner(self, transactional_id: str) -> None:
        partition = self.partition_of(transactional_id)
        if partition in self.loading:
            raise CoordinatorLoadInProgressError(f"__transaction_state-{partition} is loading")
        if partition not in self.owned:
            raise NotCoordinatorError(
                f"this broker does not coordinate {transactional_id!r}"
                f" (__transaction_state-{partition})"
            )

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    def add(self, transactional_id: str, value: TxnValue) -> TransactionMetadata:
        epoch = self.owned.get(self.partition_of(transactional_id), -1)
        meta = TransactionMetadata(transactional_id, value, coordinator_epoch=epoch)
        self.transactions[transactional_id] = meta
        return meta

    def owned_transactions(self) -> list[TransactionMetadata]:
        return list(self.transactions.values())

    def owner_check(self, meta: TransactionMetadata) -> Callable[[], bool]:
        """A test of whether this broker still coordinates ``meta`` as it does now."""
        partition = self.partition_of(meta.transactional_id)
        epoch = self.owned.get(partition)

        def still_owner() -> bool:
            return (
                epoch is not None
                and self.owned.get(partition) == epoch
                and self.transactions.get(meta.transactional_id) is meta
            )

        return still_owner

    # -- writes --------------------------------------------------------------------------------

    async def write(self, meta: TransactionMetadata, after: TxnValue) -> None:
        """Write ``after`` (``meta``'s pending value); it is the state once replicated.
        Raises NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE when it is not."""
        wait = self.write_now(meta, after)
        if wait is not None:
            await wait()

    def write_now(self, meta: TransactionMetadata, after: TxnValue) -> StateWrite | None:
        """``write``, started now: None when ``after`` was replicated as it was appended
        (its partition's only in-sync replica is this broker) and is the state already;
        else the wait that finishes the write. Raises as ``write``."""
        still_owner = self.owner_check(meta)
        record = Record(
            encode_value(after.to_log()),
            key=encode_key(meta.transactional_id),
            timestamp=self.clock(),
        )
        try:
            acknowledged = self.log.append(self.partition_of(meta.transactional_id), [record])
        except BaseException:
            meta.abandon(after)
            raise
        if isinstance(acknowledged, Acknowledged):
            self._written(meta, after, acknowledged.error, still_owner)
            return None

        async def wait() -> None:
            try:
                error = await acknowledged()
            except BaseException:
                meta.abandon(after)
                raise
            self._written(meta, after, error, still_owner)

        return wait

    def _written(
        self,
        meta: TransactionMetadata,
        after: TxnValue,
        error: KafkaError | None,
        still_owner: Callable[[], bool],
    ) -> None:
        if error is None and still_owner():
            meta.complete(after)
            return
        meta.abandon(after)
        if error is None:
            raise NotCoordinatorError(f"lost {meta.transactional_id!r} while writing")
        mapped = commit_error(error)
        if isinstance(mapped, NotCoordinatorError | CoordinatorNotAvailableError):
            raise mapped
        raise CoordinatorNotAvailableError(mapped.message)

    async def expire(self, meta: TransactionMetadata) -> None:
        """Remove an idle id: its tombstone, then forget it."""
        if meta.pending is not None:
            return
        try:
            after = meta.prepare(TxnState.DEAD, self.clock())
        except Exception:
            return
        still_owner = self.owner_check(meta)
        record = Record(None, key=encode_key(meta.transactional_id), timestamp=self.clock())
        error = await self.log.append(self.partition_of(meta.transactional_id), [record])()
        if error is None and still_owner():
            meta.complete(after)
            del self.transactions[meta.transactional_id]
            log.info("transactional id %r expired", meta.transactional_id)
        else:
            meta.abandon(after)

    # -- leadership ----------------------------------------------------------------------------

    async def became_leader(self, partition: int, epoch: int) -> None:
        """Load ``partition`` (led at ``epoch``) unless it is loaded at that epoch."""
        if self.owned.get(partition) == epoch or self.loading.get(partition) == epoch:
            return
        if partition in self.owned:
            self.resigned(partition)  # a newer epoch: its ids get the new coordinator epoch
        self.loading[partition] = epoch
        try:
            values = await self._read_partition(partition)
        except CorruptMessageError as exc:
            log.error("cannot load __transaction_state-%d: %s", partition, exc)
            if self.loading.get(partition) == epoch:
                del self.loading[partition]
            return
        if self.loading.get(partition) != epoch or self.log.leader_epoch(partition) != epoch:
            return  # resigned (or re-elected) meanwhile: that event decides
        del self.loading[partition]
        self.owned[partition] = epoch
        loaded = []
        for transactional_id, value in values.items():
            if value is None or value.state is TxnState.DEAD:
                continue
            meta = TransactionMetadata(transactional_id, value, coordinator_epoch=epoch)
            self.transactions[transactional_id] = meta
            loaded.append(meta)
        log.info("loaded %d transactional ids of __transaction_state-%d", len(loaded), partition)
        self.on_loaded(loaded)

    def resigned(self, partition: int) -> None:
        self.loading.pop(partition, None)
        if self.owned.pop(partition, None) is None:
            return
        for transactional_id in [t for t in self.transactions if self.partition_of(t) == partition]:
            del self.transactions[transactional_id]
        log.info("stopped coordinating the ids of __transaction_state-%d", partition)

    async def _read_partition(self, partition: int) -> dict[str, TxnValue | None]:
        values: dict[str, TxnValue | None] = {}
        for record in self.log.read_all(partition):
            if record is None:
                await trio.sleep(0)
                continue
            if record.key is None:
                continue
            transactional_id = decode_key(record.key)
            values[transactional_id] = (
                None if record.value is None else TxnValue.from_log(decode_value(record.value))
            )
        return values
