"""The question a partition leader asks before a producer's first transactional write
(KIP-890 part 1, broker/replication/txn_verification.py): is this partition in the producer's
ongoing transaction? Answered by the id's coordinator, the leader of its
``__transaction_state`` partition: this broker's own TransactionCoordinator directly, or
another broker through AddPartitionsToTxn's brokers' form, ``transactions[]`` with
``verify_only`` (Kafka's v4; on the inter-broker listener, transaction/broker_links.py,
the msgpack body carries those fields). With ``add`` (KIP-890 part 2: a Produce v12, a
TxnOffsetCommit v5) the partitions are added to the transaction instead, the same
request without ``verify_only``.
"""

from __future__ import annotations

from collections.abc import Sequence

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    NONE,
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    KafkaError,
    NetworkError,
    error_for_code,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.protocol.transaction_log import TRANSACTION_STATE_TOPIC
from minibroker.transaction.broker_links import BrokerLinks
from minibroker.transaction.coordinator import TransactionCoordinator


class TransactionVerifier:
    def __init__(
        self,
        coordinator: TransactionCoordinator,
        metadata_cache: MetadataCache,
        links: BrokerLinks,
        *,
        broker_id: int,
    ) -> None:
        self.coordinator = coordinator
        self.metadata_cache = metadata_cache
        self.links = links
        self.broker_id = broker_id

    def now(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        add: bool = False,
    ) -> dict[TopicPartition, KafkaError | None] | None:
        """The verdicts at once when this broker coordinates the id (and, with ``add``,
        every partition is in the transaction already), else None."""
        if self._coordinator_of(transactional_id) != self.broker_id:
            return None
        ids = transactional_id, producer_id, producer_epoch
        if not add:
            return self.coordinator.verify_partitions(*ids, partitions)
        # Adding writes the transaction's state, and waits for the last transaction's
        # markers first: both are awaited in __call__.
        if self.coordinator.completing(transactional_id):
            return None
        try:
            verdicts = self.coordinator.verify_partitions(*ids, partitions)
        except ConcurrentTransactionsError:
            return None
        return None if any(v is not None for v in verdicts.values()) else verdicts

    def _coordinator_of(self, transactional_id: str) -> int:
        """The broker leading the id's ``__transaction_state`` partition (-1: none)."""
        state_partition = self.coordinator.state.partition_of(transactional_id)
        info = self.metadata_cache.partition(
            TopicPartition(TRANSACTION_STATE_TOPIC, state_partition)
        )
        return -1 if info is None else info.leader

    async def __call__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        add: bool = False,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Each partition's verdict (None: in the transaction, added to it with
        ``add``); raises the KafkaError of the whole question (no coordinator known,
        the request failed)."""
        state_partition = self.coordinator.state.partition_of(transactional_id)
        info = self.metadata_cache.partition(
            TopicPartition(TRANSACTION_STATE_TOPIC, state_partition)
        )
        if info is None or info.leader < 0:
            raise CoordinatorNotAvailableError(
                f"{TRANSACTION_STATE_TOPIC}-{state_partition} has no leader"
            )
        if info.leader == self.broker_id:
            if add:
                await self.coordinator.add_partitions(
                    transactional_id, producer_id, producer_epoch, partitions
                )
                return dict.fromkeys(partitions)
            return self.coordinator.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions
            )
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request: bodies.AddPartitionsToTxnRequest = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "verify_only": not add,
                    "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
                }
            ]
        }  # type: ignore[typeddict-item]
        try:
            answer: bodies.AddPartitionsToTxnResponse = await self.links.request(
                info.leader, ApiKey.ADD_PARTITIONS_TO_TXN, request
            )
        except KafkaError as exc:
            raise NetworkError(f"verifying with broker {info.leader}: {exc.message}") from exc
        if answer.get("error_code", NONE) != NONE:
            raise error_for_code(answer["error_code"])("verification refused")
        verdicts: dict[TopicPartition, KafkaError | None] = {}
        for txn in answer.get("results_by_transaction", ()):
            for topic in txn["topic_results"]:
                for p in topic["results_by_partition"]:
                    code = p.get("partition_error_code", NONE)
                    verdicts[TopicPartition(topic["name"], p["partition_index"])] = (
                        None if code == NONE else error_for_code(code)("not verified")
                    )
        missing = CoordinatorNotAvailableError("the coordinator did not answer for it")
        return {tp: verdicts.get(tp, missing) for tp in partitions}
