"""Schemas of authentication: SaslHandshake and SaslAuthenticate.

Field names are Kafka's (SaslHandshakeRequest/Response, SaslAuthenticateRequest/Response
JSON) in snake_case, so the Kafka listener's declarations (protocol/kafka/security.py)
decode into the same bodies and one exchange (broker/sasl_gate.py) serves both
listeners. The msgpack listener has one version of each: its client always wraps the
SASL tokens in SaslAuthenticate (Kafka's handshake v1 behaviour); Kafka's handshake v0,
after which raw tokens follow, exists on the Kafka listener only.
"""

from __future__ import annotations

from minibroker.protocol.schemas.types import (
    BYTES,
    INT16,
    INT64,
    STRING,
    Api,
    Array,
    Field,
    Nullable,
    struct,
)

INITIAL = "initial version"

SASL_HANDSHAKE = Api(
    name="SaslHandshake",
    doc="""Choose the SASL mechanism of this connection (the first request of a SASL
    listener's connection, after an optional ApiVersions).

    Request: ``mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). Response:
    ``error_code`` (UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE) and ``mechanisms``,
    the ones the listener enables.
    """,
    request=struct(Field("mechanism", STRING)),
    response=struct(
        Field("error_code", INT16, 0),
        Field("mechanisms", Array(STRING), []),
    ),
    history=(INITIAL,),
)

SASL_AUTHENTICATE = Api(
    name="SaslAuthenticate",
    doc="""One SASL token each way: PLAIN takes one round, SCRAM two (client-first ->
    server-first, client-final -> server-final).

    Request: ``auth_bytes``. Response: ``error_code`` (SASL_AUTHENTICATION_FAILED,
    ILLEGAL_SASL_STATE), ``error_message`` (never says what was wrong),
    ``auth_bytes`` (the server's token), ``session_lifetime_ms`` (0: no re-authentication).
    """,
    request=struct(Field("auth_bytes", BYTES)),
    response=struct(
        Field("error_code", INT16, 0),
        Field("error_message", Nullable(STRING), None),
        Field("auth_bytes", BYTES, b""),
        Field("session_lifetime_ms", INT64, 0),
    ),
    history=(INITIAL,),
)
