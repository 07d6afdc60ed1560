"""Kafka messages of authentication: SaslHandshake and SaslAuthenticate (see
protocol/kafka/schema.py for the declaration form, protocol/schemas/security.py for the
bodies the exchange reads; the field names are the same there).

SaslHandshake v0 is followed by raw SASL tokens, each framed by an int32 size with no
request header (Kafka's original GSSAPI framing); with v1 the tokens travel in
SaslAuthenticate requests. Both are served on the Kafka listener (broker/sasl_gate.py).
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.kafka.schema import (
    BYTES,
    INT16,
    INT64,
    STRING,
    Array,
    Message,
    f,
    struct,
    versions,
)

SASL_HANDSHAKE: Final = Message(
    17,
    "SaslHandshake",
    valid=versions("0-1"),
    flexible=versions(""),
    request=struct(f("mechanism", STRING)),
    response=struct(f("error_code", INT16), f("mechanisms", Array(STRING))),
    history={
        0: "mechanism -> enabled mechanisms; raw SASL tokens follow",
        1: "the tokens follow in SaslAuthenticate requests (KIP-152)",
    },
)

SASL_AUTHENTICATE: Final = Message(
    36,
    "SaslAuthenticate",
    valid=versions("0-2"),
    flexible=versions("2+"),
    request=struct(f("auth_bytes", BYTES)),
    response=struct(
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f("auth_bytes", BYTES),
        f("session_lifetime_ms", INT64, "1+"),
    ),
    history={
        0: "one SASL token each way (KIP-152)",
        1: "session_lifetime_ms (KIP-368 re-authentication)",
        2: "flexible",
    },
)
