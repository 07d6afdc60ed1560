"""Authentication: SaslHandshake and SaslAuthenticate.

One exchange (broker/sasl_gate.py) serves both listeners. The msgpack client always
wraps the SASL tokens in SaslAuthenticate (Kafka's handshake v1 behaviour); Kafka's
handshake v0, after which raw tokens follow, exists on the Kafka listener only.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.form import (
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
    doc="""Choose the SASL mechanism of this connection (the first request of a SASL
    listener's connection, after an optional ApiVersions).

    Request: ``mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). Response:
    ``error_code`` (UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE) and ``mechanisms``,
    the ones the listener enables.
    """,
    valid=versions("0-1"),
    flexible=versions(""),
    request=struct(f("mechanism", STRING, required=True)),
    response=struct(f("error_code", INT16), f("mechanisms", Array(STRING))),
    history={
        0: "mechanism -> enabled mechanisms; raw SASL tokens follow",
        1: "the tokens follow in SaslAuthenticate requests (KIP-152)",
    },
)

SASL_AUTHENTICATE: Final = Message(
    36,
    "SaslAuthenticate",
    doc="""One SASL token each way: PLAIN takes one round, SCRAM two (client-first ->
    server-first, client-final -> server-final).

    Request: ``auth_bytes``. Response: ``error_code`` (SASL_AUTHENTICATION_FAILED,
    ILLEGAL_SASL_STATE), ``error_message`` (never says what was wrong),
    ``auth_bytes`` (the server's token), ``session_lifetime_ms`` (0: no re-authentication).
    """,
    valid=versions("0-2"),
    flexible=versions("2+"),
    request=struct(f("auth_bytes", BYTES, required=True)),
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
