"""The idempotent producer's API: InitProducerId."""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.form import (
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
    doc="""Give a producer an id and epoch for idempotent (sequence-numbered) produces.

    Request: ``transactional_id`` (nil: an idempotent producer; transactions are not
    served), ``transaction_timeout_ms`` (unused without transactions), ``producer_id``
    and ``producer_epoch`` (-1, -1 for a new producer; its current id and epoch to bump
    the epoch, e.g. after OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID).
    Response: ``error_code``, ``producer_id``, ``producer_epoch``. When the epoch would
    pass 32767 a bump answers a fresh id at epoch 0 instead.
    """,
    valid=versions("0-4"),
    flexible=versions("2+"),
    request=struct(
        f("transactional_id", STRING, null="0+"),
        f("transaction_timeout_ms", INT32, default=60000),
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
