"""The authorization rules of the transactional APIs, as Kafka's KafkaApis applies them
(KIP-98): a transactional id is a resource of its own (TransactionalId), WRITE on it to
use it, DESCRIBE to find or describe it.

- InitProducerId with a transactional id: WRITE on the id (without one: the idempotent
  rule, broker/security/authorization_broker_rules.py);
- AddPartitionsToTxn (clients' form): WRITE on the id, then WRITE on every topic; if
  any topic is refused nothing is added: its partitions answer
  TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED. The brokers' form
  (KIP-890 verification, Kafka's v4): CLUSTER_ACTION;
- AddOffsetsToTxn: WRITE on the id, READ on the group; EndTxn: WRITE on the id;
- TxnOffsetCommit: WRITE on the id, READ on the group, READ on each topic;
- Produce with a transactional id: WRITE on the id (else the whole request);
- FindCoordinator for a transactional id (key type 1): DESCRIBE on it;
- DescribeTransactions: DESCRIBE on each id (the others answered
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED); ListTransactions lists only the ids the
  principal may DESCRIBE; DescribeProducers: READ on each topic.

A refused id answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Final

from minibroker.broker.security.authorization_broker_rules import (
    init_producer_id as idempotent_init,
)
from minibroker.broker.security.authorization_broker_rules import produce as produce_topics
from minibroker.broker.security.authorization_group_rules import find_coordinator as group_find
from minibroker.broker.security.authorization_rules import (
    TOPIC,
    Asker,
    Completion,
    narrow,
    per_topic,
    split_items,
)
from minibroker.protocol.acls import Operation, ResourceType
from minibroker.protocol.api import Body
from minibroker.protocol.errors import (
    OperationNotAttemptedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)

TRANSACTIONAL_ID: Final = ResourceType.TRANSACTIONAL_ID
FIND_COORDINATOR_KEY_TRANSACTION: Final = 1


def require_transactional_id(asker: Asker, operation: Operation, transactional_id: str) -> None:
    if not asker.may(operation, TRANSACTIONAL_ID, transactional_id):
        raise TransactionalIdAuthorizationFailedError(
            f"{asker.principal} may not {operation.title} transactional id {transactional_id}"
        )


def init_producer_id(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    if body.get("transactional_id") is None:
        return idempotent_init(asker, body)
    require_transactional_id(asker, Operation.WRITE, body["transactional_id"])
    return body, None


def add_partitions_to_txn(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    if body.get("transactions"):  # the brokers' form: a leader verifying
        asker.require_cluster(Operation.CLUSTER_ACTION)
        return body, None
    require_transactional_id(asker, Operation.WRITE, body["transactional_id"])
    topics = body["topics"]
    verdicts = [asker.may(Operation.WRITE, TOPIC, topic["name"]) for topic in topics]
    if all(verdicts):
        return body, None
    refused = TopicAuthorizationFailedError.code
    untried = OperationNotAttemptedError.code

    def refuse(topic: Body) -> Body:
        code = untried if asker.may(Operation.WRITE, TOPIC, topic["name"]) else refused
        return {
            "name": topic["name"],
            "results": [
                {"partition_index": p, "partition_error_code": code} for p in topic["partitions"]
            ],
        }

    # Nothing is added when a topic is refused: every topic is answered here.
    return narrow(body, "topics", [False] * len(topics), refuse, answer_key="results")


def add_offsets_to_txn(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    require_transactional_id(asker, Operation.WRITE, body["transactional_id"])
    asker.require_group(Operation.READ, body["group_id"])
    return body, None


def end_txn(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    require_transactional_id(asker, Operation.WRITE, body["transactional_id"])
    return body, None


def txn_offset_commit(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    require_transactional_id(asker, Operation.WRITE, body["transactional_id"])
    asker.require_group(Operation.READ, body["group_id"])
    return TXN_OFFSET_COMMIT_TOPICS(asker, body)


TXN_OFFSET_COMMIT_TOPICS: Final = per_topic(Operation.READ)


def produce(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    if body.get("transactional_id") is not None:
        require_transactional_id(asker, Operation.WRITE, body["transactional_id"])
    return produce_topics(asker, body)


def find_coordinator(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    if body.get("key_type") == FIND_COORDINATOR_KEY_TRANSACTION:
        for key in [body.get("key", ""), *body.get("coordinator_keys", ())]:
            if key:
                require_transactional_id(asker, Operation.DESCRIBE, key)
        return body, None
    return group_find(asker, body)


def describe_transactions(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    code = TransactionalIdAuthorizationFailedError.code
    return split_items(
        body,
        "transactional_ids",
        lambda transactional_id: asker.may(Operation.DESCRIBE, TRANSACTIONAL_ID, transactional_id),
        lambda transactional_id: {
            "error_code": code,
            "transactional_id": transactional_id,
            "transaction_state": "",
            "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        },
        answer_key="transaction_states",
    )


def list_transactions(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    def hide(answer: Body) -> Body:
        listed = [
            t
            for t in answer["transaction_states"]
            if asker.may(Operation.DESCRIBE, TRANSACTIONAL_ID, t["transactional_id"])
        ]
        return {**answer, "transaction_states": listed}

    return body, hide


def describe_producers(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    code = TopicAuthorizationFailedError.code
    return split_items(
        body,
        "topics",
        lambda topic: asker.may(Operation.READ, TOPIC, topic["name"]),
        lambda topic: {
            "name": topic["name"],
            "partitions": [
                {"partition_index": p, "error_code": code, "active_producers": []}
                for p in topic["partition_indexes"]
            ],
        },
    )
