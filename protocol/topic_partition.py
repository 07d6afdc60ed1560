"""The name of one partition of one topic, shared by every layer."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """``TopicPartition("orders", 3)``; prints as Kafka writes it, ``orders-3``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
