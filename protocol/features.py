"""The features this broker has finalized (KIP-584), as ApiVersions v3 reports them in
its tagged fields, and which requests mean them.

``transaction.version`` 2 (KIP-890 part 2): every EndTxn (v5+) bumps the producer's
epoch and answers the new one, the partition leader adds a partition to the
transaction at the producer's first Produce there (v12+), and the group coordinator
adds the group's offsets partition at TxnOffsetCommit (v5+): the client sends no
AddPartitionsToTxn or AddOffsetsToTxn. Kafka's Java client (4.x) reads the level from
``finalized_features`` and then uses those versions; every other client keeps KIP-98's
protocol at the older versions, served as before.

Only finalized features are reported, no ``supported_features``: transaction.version
supports level 0, and Kafka leaves a feature whose minimum is 0 out of ApiVersions
below v4 (older clients cannot read it, KAFKA-17492); this broker answers ApiVersions
up to v3. The levels never change, so their epoch is a constant.

The msgpack listener's APIs have one version each: there a request asks for
transaction version 2 with its ``transaction_version`` field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from minibroker.protocol.messages.data import PRODUCE
from minibroker.protocol.messages.transactions import END_TXN, TXN_OFFSET_COMMIT

TRANSACTION_VERSION_FEATURE: Final = "transaction.version"
TRANSACTION_VERSION: Final = 2
"""The finalized level of ``transaction.version``: KIP-890 part 2."""

FINALIZED_FEATURES_EPOCH: Final = 1
"""Clients take finalized features only from an epoch above the last they saw (-1 at
first); the levels never change, so one epoch serves for ever."""

TRANSACTION_V2_SINCE: Final[Mapping[int, int]] = {
    PRODUCE.api_key: 12,
    END_TXN.api_key: 5,
    TXN_OFFSET_COMMIT.api_key: 5,
}
"""The first Kafka version of each API a transaction version 2 client sends."""


def finalized_features() -> dict[str, Any]:
    """ApiVersions' finalized-feature fields (both listeners answer them)."""
    level = TRANSACTION_VERSION
    return {
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": [
            {
                "name": TRANSACTION_VERSION_FEATURE,
                "max_version_level": level,
                "min_version_level": level,
            }
        ],
    }


def transaction_v2(api_key: int, api_version: int, request: Mapping[str, Any]) -> bool:
    """Whether a Produce, EndTxn or TxnOffsetCommit asks for transaction version 2: its
    Kafka version, or a msgpack body's ``transaction_version``."""
    return (
        api_version >= TRANSACTION_V2_SINCE[api_key]
        or request.get("transaction_version", 0) >= TRANSACTION_VERSION
    )
