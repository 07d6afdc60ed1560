"""Authentication: SaslHandshake and SaslAuthenticate, and the brokers' identity proof
(BrokerChallenge, BrokerProof).

One exchange (broker/security/sasl_gate.py) serves both listeners. The msgpack client always
wraps the SASL tokens in SaslAuthenticate (Kafka's handshake v1 behaviour); Kafka's
handshake v0, after which raw tokens follow, exists on the Kafka listener only.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.form import (
    BYTES,
    INT16,
    INT32,
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

BROKER_CHALLENGE: Final = Message(
    1000,
    "BrokerChallenge",
    doc="""The first half of a broker's identity proof on an inter-broker connection
    (minibroker's own, msgpack listener only: protocol/broker_proof.py says the scheme).

    Request: nothing. Response: ``error_code`` (CLUSTER_AUTHORIZATION_FAILED where
    no proof can be taken), ``nonce`` (fresh random bytes, good for one proof on this
    connection) and ``broker_id``, the answering broker's own id, which the proof names.
    """,
    valid=versions(""),
    flexible=versions(""),
    request=struct(),
    response=struct(
        f("error_code", INT16),
        f("error_message", STRING, body_null=True),
        f("nonce", BYTES),
        f("broker_id", INT32, default=-1),
    ),
)

BROKER_PROOF: Final = Message(
    1001,
    "BrokerProof",
    doc="""The second half: the connecting broker's signature of the challenge with the
    identity key whose public half its /brokers/ids/<id> registration publishes.

    Request: ``broker_id`` (who the connection claims to be) and ``signature``
    (Ed25519 over protocol/broker_proof.py's ``payload``). Response: ``error_code``
    (CLUSTER_AUTHORIZATION_FAILED unless the signature checks against that broker's
    registered key); from then on the connection speaks for that broker.
    """,
    valid=versions(""),
    flexible=versions(""),
    request=struct(f("broker_id", INT32, required=True), f("signature", BYTES, required=True)),
    response=struct(f("error_code", INT16), f("error_message", STRING, body_null=True)),
)
