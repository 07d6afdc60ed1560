"""minibroker: a small Kafka-style distributed commit log.

The documented client API is ``from minibroker import Admin, Consumer, Producer``; the
names are imported on first use (see ``minibroker.client``), so importing the package
costs nothing for the broker, the CLI or the Spark job. The layers below it are
``protocol`` -> ``storage`` -> ``zk`` -> ``broker`` / ``controller`` -> ``client`` ->
``analytics`` (docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minibroker import client as _client

if TYPE_CHECKING:
    from minibroker.client import Admin, Consumer, ConsumerRecord, Producer, RecordMetadata

__all__ = ["Admin", "Consumer", "ConsumerRecord", "Producer", "RecordMetadata"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(_client, name)
    raise AttributeError(f"module 'minibroker' has no attribute {name!r}")
