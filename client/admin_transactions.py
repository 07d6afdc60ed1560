"""Transactions, administered (what Kafka's kafka-transactions.sh does, KIP-664):
list the transactional ids every coordinator knows, describe one, describe a
partition's active producers, and abort a hanging transaction (an open transaction in
a partition that no coordinator will end) by writing its ABORT marker directly.

Each function takes an open ``ClusterClient``; ``client/cli/transactions.py`` prints
their results.
"""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.client.errors import wire_error
from minibroker.client.group_coordinator import CoordinatorLink
from minibroker.client.metadata import ClusterClient
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import MinibrokerError, NetworkError
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.groups import KEY_TYPE_TRANSACTION


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    partitions: list[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


async def list_transactions(cluster: ClusterClient) -> list[ListedTransaction]:
    """Every transactional id of every broker's coordinator (ListTransactions to each)."""
    meta = await cluster.refresh()
    found: list[ListedTransaction] = []
    for node in sorted(meta.brokers):
        body: bodies.ListTransactionsRequestBody = {
            "state_filters": [],
            "producer_id_filters": [],
            "duration_filter": -1,
        }
        try:
            response: bodies.ListTransactionsResponse = await cluster.request(
                node, ApiKey.LIST_TRANSACTIONS, body
            )
        except NetworkError:
            continue  # a broker down coordinates nothing now
        if response.get("error_code"):
            raise wire_error(response["error_code"], f"broker {node}", "listing transactions")
        found += [
            ListedTransaction(t["transactional_id"], t["producer_id"], t["transaction_state"], node)
            for t in response["transaction_states"]
        ]
    return sorted(found, key=lambda t: t.transactional_id)


async def describe_transaction(
    cluster: ClusterClient, transactional_id: str
) -> TransactionDescription:
    link = CoordinatorLink(cluster, transactional_id, key_type=KEY_TYPE_TRANSACTION)
    try:
        coordinator = await link.find()
        body: bodies.DescribeTransactionsRequestBody = {"transactional_ids": [transactional_id]}
        response = await link.request(bodies.DESCRIBE_TRANSACTIONS, body)
    finally:
        await link.aclose()
    state = response["transaction_states"][0]
    if state.get("error_code"):
        raise wire_error(state["error_code"], f"transactional id {transactional_id!r}")
    return TransactionDescription(
        transactional_id,
        coordinator.node_id,
        state["transaction_state"],
        state["producer_id"],
        state["producer_epoch"],
        state["transaction_timeout_ms"],
        state["transaction_start_time_ms"],
        [(t["topic"], p) for t in state["topics"] for p in t["partitions"]],
    )


async def describe_producers(
    cluster: ClusterClient, topic: str, partition: int
) -> list[ActiveProducer]:
    leader = await _leader(cluster, topic, partition)
    body: bodies.DescribeProducersRequestBody = {
        "topics": [{"name": topic, "partition_indexes": [partition]}]
    }
    response: bodies.DescribeProducersResponse = await cluster.request(
        leader, ApiKey.DESCRIBE_PRODUCERS, body
    )
    answer = response["topics"][0]["partitions"][0]
    if answer.get("error_code"):
        raise wire_error(answer["error_code"], f"{topic}-{partition}", answer.get("error_message"))
    return [
        ActiveProducer(
            p["producer_id"],
            p["producer_epoch"],
            p["last_sequence"],
            p["last_timestamp"],
            p["coordinator_epoch"],
            p["current_txn_start_offset"],
        )
        for p in answer["active_producers"]
    ]


async def abort_transaction(
    cluster: ClusterClient, topic: str, partition: int, start_offset: int
) -> ActiveProducer:
    """Abort the open transaction that starts at ``start_offset`` in the partition: its
    producer is found with DescribeProducers, then the leader writes its ABORT marker
    (WriteTxnMarkers with the producer's epoch and its last coordinator epoch)."""
    producers = await describe_producers(cluster, topic, partition)
    matching = [p for p in producers if p.current_txn_start_offset == start_offset]
    if not matching:
        raise MinibrokerError(
            f"{topic}-{partition}: no open transaction starts at offset {start_offset}"
        )
    producer = matching[0]
    leader = await _leader(cluster, topic, partition)
    body: bodies.WriteTxnMarkersRequestBody = {
        "markers": [
            {
                "producer_id": producer.producer_id,
                "producer_epoch": producer.producer_epoch,
                "transaction_result": False,
                "topics": [{"name": topic, "partition_indexes": [partition]}],
                "coordinator_epoch": max(producer.coordinator_epoch, 0),
            }
        ]
    }
    response: bodies.WriteTxnMarkersResponse = await cluster.request(
        leader, ApiKey.WRITE_TXN_MARKERS, body
    )
    code = response["markers"][0]["topics"][0]["partitions"][0]["error_code"]
    if code:
        raise wire_error(code, f"{topic}-{partition}", "writing the ABORT marker")
    return producer


async def _leader(cluster: ClusterClient, topic: str, partition: int) -> int:
    meta = await cluster.refresh({topic})
    info = meta.topics.get(topic)
    if info is None or info.error_code or partition >= len(info.partitions):
        raise wire_error(3, f"{topic}-{partition}", "no such partition")
    leader = meta.leader(topic, partition)
    if leader < 0:
        raise wire_error(5, f"{topic}-{partition}")
    return leader
