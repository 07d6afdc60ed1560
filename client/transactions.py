"""The transactional producer's side of KIP-98 (Kafka's TransactionManager).

How this works. ``init_transactions`` finds the transaction coordinator of the
producer's ``transactional_id`` (FindCoordinator key type 1) and asks it for the
producer id and epoch (InitProducerId), which fences any earlier producer with the same
id and makes the coordinator abort what it left open. Between ``begin_transaction`` and
``commit_transaction`` / ``abort_transaction``:

- a batch for a partition not yet in the transaction waits in the accumulator
  (``partition_gate``) while a task adds the partitions asked for meanwhile in one
  AddPartitionsToTxn; then the sender sends them as usual (idempotent, sequenced);
- ``send_offsets_to_transaction`` adds the group's offsets partition (AddOffsetsToTxn)
  and sends the offsets to the group's coordinator (TxnOffsetCommit, with the member's
  generation and ids: KIP-447 fences a consumer that lost its partitions);
- commit flushes every record (a record that failed makes the commit fail: abort then)
  and sends EndTxn; abort waits for what is on the wire and sends EndTxn(abort).

CONCURRENT_TRANSACTIONS (the previous transaction is still completing) and coordinator
moves are retried; PRODUCER_FENCED / INVALID_PRODUCER_EPOCH are fatal: the producer can
only be closed.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from minibroker.client.errors import wire_error
from minibroker.client.group_coordinator import CoordinatorLink
from minibroker.client.idempotence import IdempotenceState
from minibroker.client.metadata import ClusterClient
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    KafkaError,
    MinibrokerError,
    NetworkError,
    NotCoordinatorError,
    OperationNotAttemptedError,
    ProducerFencedError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.messages.groups import KEY_TYPE_TRANSACTION

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.02
"""First wait before a retried transactional request; doubles up to the maximum (the
previous transaction's markers usually take milliseconds)."""
RETRY_BACKOFF_MAX_S = 0.5
RETRIED = frozenset(
    {
        ConcurrentTransactionsError.code,
        CoordinatorLoadInProgressError.code,
        OperationNotAttemptedError.code,  # beside a retried partition's error
        CoordinatorNotAvailableError.code,
        NotCoordinatorError.code,
        RequestTimedOutError.code,
        UnknownTopicOrPartitionError.code,
    }
)
FATAL = (ProducerFencedError, InvalidProducerEpochError)


class TransactionState(enum.Enum):
    UNINITIALIZED = "Uninitialized"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMPLETING = "Completing"
    FATAL = "Fatal"


class TransactionError(MinibrokerError):
    """A transactional call made in the wrong state (e.g. commit with no transaction)."""


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """What a consumer tells the coordinator of its membership (KIP-447):
    ``Consumer.group_metadata()``."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class TransactionManager:
    def __init__(
        self,
        cluster: ClusterClient,
        idempotence: IdempotenceState,
        transactional_id: str,
        *,
        timeout_ms: int,
        flush: Callable[[], Awaitable[None]],
        wake_sender: Callable[[], None],
        spawn: Callable[[Callable[[], Awaitable[None]]], None],
    ) -> None:
        self.cluster = cluster
        self.idempotence = idempotence
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self._flush = flush
        self._wake_sender = wake_sender
        self._spawn = spawn
        self.link = CoordinatorLink(cluster, transactional_id, key_type=KEY_TYPE_TRANSACTION)
        self.state = TransactionState.UNINITIALIZED
        self.added: set[tuple[str, int]] = set()
        self._wanted: set[tuple[str, int]] = set()
        self._adding = False
        self.error: KafkaError | None = None
        idempotence.partition_gate = self._gate

    # -- the calls -----------------------------------------------------------------------------

    async def init_transactions(self) -> None:
        if self.state is not TransactionState.UNINITIALIZED:
            raise TransactionError(f"init_transactions in state {self.state.value}")
        response = await self._request(
            ApiKey.INIT_PRODUCER_ID,
            {
                "transactional_id": self.transactional_id,
                "transaction_timeout_ms": self.timeout_ms,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        idempotence = self.idempotence
        idempotence.producer_id = response["producer_id"]
        idempotence.epoch = response["producer_epoch"]
        idempotence.partitions.clear()
        self.state = TransactionState.READY
        self._wake_sender()

    def begin_transaction(self) -> None:
        self._require(TransactionState.READY, "begin_transaction")
        self.added.clear()
        self.idempotence.first_failure = None
        self.state = TransactionState.IN_TRANSACTION

    async def send_offsets_to_transaction(
        self, offsets: Mapping[tuple[str, int], int], group: GroupMetadata | str
    ) -> None:
        """Commit ``offsets`` (the next offset to consume, per partition) for the group
        when the transaction commits."""
        self._require(TransactionState.IN_TRANSACTION, "send_offsets_to_transaction")
        if isinstance(group, str):
            group = GroupMetadata(group)
        await self._request(
            ApiKey.ADD_OFFSETS_TO_TXN,
            {**self._producer_fields(), "group_id": group.group_id},
        )
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        body = {
            **self._producer_fields(),
            "group_id": group.group_id,
            "generation_id": group.generation_id,
            "member_id": group.member_id,
            "group_instance_id": group.group_instance_id,
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
        }
        group_link = CoordinatorLink(self.cluster, group.group_id)
        try:
            await self._retried(group_link, ApiKey.TXN_OFFSET_COMMIT, body, _partition_codes)
        finally:
            await group_link.aclose()

    async def commit_transaction(self) -> None:
        self._require(TransactionState.IN_TRANSACTION, "commit_transaction")
        await self._flush()
        failed = self.idempotence.first_failure or self.idempotence.fatal
        if failed is not None:
            raise TransactionError(
                f"a record of the transaction failed ({failed}): abort it"
            ) from failed
        await self._end(committed=True)

    async def abort_transaction(self) -> None:
        self._require(TransactionState.IN_TRANSACTION, "abort_transaction")
        if self.idempotence.fatal is not None:
            self.state = TransactionState.FATAL
            raise self.idempotence.fatal
        with contextlib.suppress(KafkaError):  # records that failed are aborted anyway
            await self._flush()
        await self._end(committed=False)

    async def _end(self, *, committed: bool) -> None:
        self.state = TransactionState.COMPLETING
        if self.added or self._wanted:
            await self._request(ApiKey.END_TXN, {**self._producer_fields(), "committed": committed})
        self.added.clear()
        self._wanted.clear()
        self.state = TransactionState.READY

    # -- partitions ----------------------------------------------------------------------------

    def _gate(self, key: tuple[str, int]) -> bool:
        """May a batch of ``key`` be sent? Asks for the partition to be added if not."""
        if key in self.added:
            return True
        if self.state is not TransactionState.IN_TRANSACTION:
            return False
        self._wanted.add(key)
        if not self._adding:
            self._adding = True
            self._spawn(self._add_partitions)
        return False

    async def _add_partitions(self) -> None:
        try:
            while self._wanted - self.added:
                wanted = sorted(self._wanted - self.added)
                by_topic: dict[str, list[int]] = {}
                for topic, partition in wanted:
                    by_topic.setdefault(topic, []).append(partition)
                try:
                    await self._request(
                        ApiKey.ADD_PARTITIONS_TO_TXN,
                        {
                            **self._producer_fields(),
                            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
                        },
                        codes=_add_partitions_codes,
                    )
                except KafkaError as exc:
                    log.warning("adding partitions to the transaction failed: %s", exc)
                    if self.idempotence.fatal is None:
                        self.idempotence.fatal = exc  # its batches fail: abort
                    return
                self.added.update(wanted)
        finally:
            self._adding = False
            self._wake_sender()

    # -- requests ------------------------------------------------------------------------------

    def _producer_fields(self) -> dict[str, Any]:
        return {
            "transactional_id": self.transactional_id,
            "producer_id": self.idempotence.producer_id,
            "producer_epoch": self.idempotence.epoch,
        }

    def _require(self, state: TransactionState, call: str) -> None:
        if self.idempotence.fatal is not None and isinstance(self.idempotence.fatal, FATAL):
            self.state = TransactionState.FATAL
            raise self.idempotence.fatal
        if self.state is not state:
            raise TransactionError(f"{call} in state {self.state.value}")

    async def _request(
        self,
        api_key: ApiKey,
        body: dict[str, Any],
        *,
        codes: Callable[[dict[str, Any]], list[int]] | None = None,
    ) -> dict[str, Any]:
        return await self._retried(self.link, api_key, body, codes or _top_code)

    async def _retried(
        self,
        link: CoordinatorLink,
        api_key: ApiKey,
        body: dict[str, Any],
        codes: Callable[[dict[str, Any]], list[int]],
    ) -> dict[str, Any]:
        backoff = RETRY_BACKOFF_S
        with trio.fail_after(self.cluster.request_timeout_s * 2):
            while True:
                try:
                    response = await link.request(api_key, body)
                except (NetworkError, RequestTimedOutError):
                    await trio.sleep(backoff)
                    backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
                    continue
                found = [c for c in codes(response) if c]
                if not found:
                    return response
                if all(c in RETRIED for c in found):
                    for code in found:
                        link.moved(code)
                    await trio.sleep(backoff)
                    backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
                    continue
                code = next(c for c in found if c not in RETRIED)
                error = wire_error(code, f"transactional id {self.transactional_id!r}", None)
                if isinstance(error, FATAL):
                    self.idempotence.fatal = error
                    self.state = TransactionState.FATAL
                raise error

    async def aclose(self) -> None:
        await self.link.aclose()


def _top_code(response: dict[str, Any]) -> list[int]:
    return [response.get("error_code", 0)]


def _add_partitions_codes(response: dict[str, Any]) -> list[int]:
    return [p["partition_error_code"] for topic in response["results"] for p in topic["results"]]


def _partition_codes(response: dict[str, Any]) -> list[int]:
    return [p["error_code"] for topic in response["topics"] for p in topic["partitions"]]
