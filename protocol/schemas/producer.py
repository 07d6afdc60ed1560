"""Schema of the idempotent producer's API: InitProducerId.

Field names are Kafka's (InitProducerIdRequest/Response JSON) in snake_case, so the
Kafka listener's codec maps its versions onto this one by name. The single msgpack
version carries every field of Kafka's v4: ``producer_id`` and ``producer_epoch`` in the
request are Kafka's v3 addition (KIP-360), with which a producer that already holds an
id asks for an epoch bump instead of a new id.
"""

from __future__ import annotations

from minibroker.protocol.schemas.types import (
    INT16,
    INT32,
    INT64,
    STRING,
    Api,
    Field,
    Nullable,
    struct,
)

INITIAL = "initial version"

INIT_PRODUCER_ID = Api(
    name="InitProducerId",
    doc="""Give a producer an id and epoch for idempotent (sequence-numbered) produces.

    Request: ``transactional_id`` (nil: an idempotent producer; transactions are not
    served), ``transaction_timeout_ms`` (unused without transactions), ``producer_id``
    and ``producer_epoch`` (-1, -1 for a new producer; its current id and epoch to bump
    the epoch, e.g. after OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID).
    Response: ``error_code``, ``producer_id``, ``producer_epoch``. When the epoch would
    pass 32767 a bump answers a fresh id at epoch 0 instead.
    """,
    request=struct(
        Field("transactional_id", Nullable(STRING), None),
        Field("transaction_timeout_ms", INT32, 60_000),
        Field("producer_id", INT64, -1),
        Field("producer_epoch", INT16, -1),
    ),
    response=struct(
        Field("throttle_time_ms", INT32, 0),
        Field("error_code", INT16, 0),
        Field("producer_id", INT64, -1),
        Field("producer_epoch", INT16, -1),
    ),
    history=(INITIAL,),
)
