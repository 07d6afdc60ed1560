"""The messages the Kafka listener speaks: every declaration (protocol/messages/) with
Kafka versions. Versions below a message's ``valid`` range are not decoded;
protocol/kafka/codec.py says which versions are advertised."""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages import ALL_MESSAGES
from minibroker.protocol.messages.form import Message

MESSAGES: Final[dict[int, Message]] = {
    key: message for key, message in ALL_MESSAGES.items() if message.on_kafka_wire
}
"""Every message on the Kafka wire, by API key."""
