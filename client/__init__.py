"""The bundled Trio-native client: ``from minibroker.client import Admin, Producer, Consumer``
(re-exported as ``from minibroker import ...``).

The names are imported on first use, so ``import minibroker.command.main`` (and every command
that only needs a connection) does not pay for the producer and consumer modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minibroker.client.accumulator import RecordMetadata
    from minibroker.client.admin import Admin
    from minibroker.client.consumer import Consumer, ConsumerRecord
    from minibroker.client.producer import Producer

_EXPORTS = {
    "Admin": "minibroker.client.admin",
    "Consumer": "minibroker.client.consumer",
    "ConsumerRecord": "minibroker.client.consumer",
    "Producer": "minibroker.client.producer",
    "RecordMetadata": "minibroker.client.accumulator",
}

__all__ = ["Admin", "Consumer", "ConsumerRecord", "Producer", "RecordMetadata"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'minibroker.client' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
