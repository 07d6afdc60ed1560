"""Topic ids (KIP-516): a topic's 16-byte UUID, made once when the topic is created.

The string form is Kafka's ``Uuid.toString``: URL-safe base64 without padding, 22
characters. It is what ``/brokers/topics/<name>`` (``"topic_id"``) and each partition
directory's ``partition.metadata`` hold; the wire carries the 16 bytes. The all-zero id
means "none" (a topic created before ids, or a request that names topics by name), and
Kafka never makes an id whose string starts with ``-`` (it would read as a command-line
flag) nor the all-zero one nor its reserved metadata-topic id (all zero but the last
bit).
"""

from __future__ import annotations

import base64
import random
import uuid
from typing import Final

ZERO_TOPIC_ID: Final = b"\x00" * 16
"""No topic id (Kafka's Uuid.ZERO_UUID)."""

_RESERVED: Final = frozenset({ZERO_TOPIC_ID, b"\x00" * 15 + b"\x01"})


def new_topic_id(rng: random.Random | None = None) -> bytes:
    """A fresh random (version 4) id that is neither reserved nor "-"-led as a string."""
    while True:
        value = uuid.UUID(int=rng.getrandbits(128), version=4) if rng else uuid.uuid4()
        candidate = value.bytes
        if candidate not in _RESERVED and not topic_id_str(candidate).startswith("-"):
            return candidate


def topic_id_str(topic_id: bytes) -> str:
    """Kafka's string form of an id: URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(topic_id).rstrip(b"=").decode("ascii")


def parse_topic_id(text: str) -> bytes:
    """The 16 bytes of an id's string form; ValueError if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a topic id: {text!r}") from exc
    if len(raw) != 16:
        raise ValueError(f"not a topic id: {text!r} ({len(raw)} bytes, not 16)")
    return raw
