"""Kafka message of the idempotent producer: InitProducerId (see protocol/kafka/schema.py
for the declaration form, protocol/schemas/producer.py for the body the handler reads;
the field names are the same there, so no ``key=`` is needed)."""

from __future__ import annotations

from typing import Final

from minibroker.protocol.kafka.schema import (
    INT16,
    INT32,
    INT64,
    STRING,
    Message,
    f,
    struct,
    versions,
)

INIT_PRODUCER_ID: Final = Message(
    22,
    "InitProducerId",
    valid=versions("0-4"),
    flexible=versions("2+"),
    request=struct(
        f("transactional_id", STRING, null="0+"),
        f("transaction_timeout_ms", INT32),
        f("producer_id", INT64, "3+", default=-1),
        f("producer_epoch", INT16, "3+", default=-1),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("producer_id", INT64, default=-1),
        f("producer_epoch", INT16, default=-1),
    ),
    history={
        0: "transactional_id, transaction_timeout_ms -> producer_id, producer_epoch",
        1: "unchanged (throttled after the response is sent)",
        2: "flexible",
        3: "producer_id, producer_epoch in the request: bump the epoch (KIP-360)",
        4: "PRODUCER_FENCED may be returned (KIP-588)",
    },
)
