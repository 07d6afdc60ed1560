"""The bundled Trio-native client: ``from client import Admin, Producer, Consumer``.

The names are imported on first use, so ``import client.cli.main`` (and every command
that only needs a connection) does not pay for the producer and consumer modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from client.accumulator import RecordMetadata
    from client.admin import Admin
    from client.consumer import Consumer, ConsumerRecord
    from client.producer import Producer

_EXPORTS = {
    "Admin": "client.admin",
    "Consumer": "client.consumer",
    "ConsumerRecord": "client.consumer",
    "Producer": "client.producer",
    "RecordMetadata": "client.accumulator",
}

__all__ = ["Admin", "Consumer", "ConsumerRecord", "Producer", "RecordMetadata"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'client' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
