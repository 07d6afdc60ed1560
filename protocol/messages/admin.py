"""The admin APIs of configs, SCRAM users and client quotas: IncrementalAlterConfigs,
DescribeUserScramCredentials, AlterUserScramCredentials, DescribeClientQuotas and
AlterClientQuotas.

Codes are Kafka's: a config operation is 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT; a SCRAM
mechanism 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (0 unknown); a quota filter's match type 0
an exact name, 1 the default entity, 2 any entity of that type. Quota entity types are
strings (``user``, ``client-id``); a null entity name is the type's default entity.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.form import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    STRING,
    Message,
    f,
    struct,
    versions,
)

OP_SET: Final = 0
OP_DELETE: Final = 1
OP_APPEND: Final = 2
OP_SUBTRACT: Final = 3
"""IncrementalAlterConfigs' config_operation codes."""

MATCH_EXACT: Final = 0
MATCH_DEFAULT: Final = 1
MATCH_ANY: Final = 2
"""DescribeClientQuotas' match_type codes."""

INCREMENTAL_ALTER_CONFIGS: Final = Message(
    44,
    "IncrementalAlterConfigs",
    doc="""Edit the dynamic configuration of topics or brokers key by key (KIP-339).

    Request: ``resources[]`` of {resource_type (2 topic, 4 broker), resource_name (a
    broker id, or "" for every broker), configs[] of {name, config_operation, value}},
    ``validate_only``. APPEND and SUBTRACT apply to list keys only.
    Response: ``responses[]`` of {error_code, error_message, resource_type, resource_name}.
    """,
    valid=versions("0-1"),
    flexible=versions("1+"),
    request=struct(
        f(
            "resources",
            [
                f("resource_type", INT8, required=True),
                f("resource_name", STRING, required=True),
                f(
                    "configs",
                    [
                        f("name", STRING, required=True),
                        f("config_operation", INT8, required=True),
                        f("value", STRING, null="0+", required=True),
                    ],
                    required=True,
                ),
            ],
            required=True,
        ),
        f("validate_only", BOOL),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f(
            "responses",
            [
                f("error_code", INT16),
                f("error_message", STRING, null="0+"),
                f("resource_type", INT8, required=True),
                f("resource_name", STRING, required=True),
            ],
        ),
    ),
    history={0: "initial (KIP-339)", 1: "flexible"},
)

DESCRIBE_USER_SCRAM_CREDENTIALS: Final = Message(
    50,
    "DescribeUserScramCredentials",
    doc="""Which SCRAM mechanisms (and iterations) each user has; never a secret (KIP-554).

    Request: ``users`` (null or empty: every user) of {name}.
    Response: ``error_code``, ``error_message``, ``results[]`` of {user, error_code
    (RESOURCE_NOT_FOUND for a user without credentials, DUPLICATE_RESOURCE for a name
    asked twice), error_message, credential_infos[] of {mechanism, iterations}}.
    """,
    valid=versions("0"),
    flexible=versions("0+"),
    request=struct(f("users", [f("name", STRING, required=True)], null="0+")),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f(
            "results",
            [
                f("user", STRING, required=True),
                f("error_code", INT16),
                f("error_message", STRING, null="0+"),
                f("credential_infos", [f("mechanism", INT8), f("iterations", INT32)]),
            ],
        ),
    ),
    history={0: "initial (KIP-554)"},
)

ALTER_USER_SCRAM_CREDENTIALS: Final = Message(
    51,
    "AlterUserScramCredentials",
    doc="""Add, replace or remove users' SCRAM credentials (KIP-554). The client salts
    the password itself: the request carries the salt and the salted password
    (Hi(password, salt, iterations)), from which the broker derives the stored and
    server keys it keeps.

    Request: ``deletions[]`` of {name, mechanism}, ``upsertions[]`` of {name,
    mechanism, iterations, salt, salted_password}.
    Response: ``results[]`` of {user, error_code, error_message}, one per user named.
    """,
    valid=versions("0"),
    flexible=versions("0+"),
    request=struct(
        f("deletions", [f("name", STRING, required=True), f("mechanism", INT8, required=True)]),
        f(
            "upsertions",
            [
                f("name", STRING, required=True),
                f("mechanism", INT8, required=True),
                f("iterations", INT32, required=True),
                f("salt", BYTES, required=True),
                f("salted_password", BYTES, required=True),
            ],
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f(
            "results",
            [
                f("user", STRING, required=True),
                f("error_code", INT16),
                f("error_message", STRING, null="0+"),
            ],
        ),
    ),
    history={0: "initial (KIP-554)"},
)

_ENTITY: Final = [f("entity_type", STRING, required=True), f("entity_name", STRING, null="0+")]

DESCRIBE_CLIENT_QUOTAS: Final = Message(
    48,
    "DescribeClientQuotas",
    doc="""The client quotas of the entities a filter matches (KIP-546).

    Request: ``components[]`` of {entity_type (user, client-id), match_type, match},
    ``strict`` (only entities with no other component).
    Response: ``error_code``, ``error_message``, ``entries[]`` of {entity[] of
    {entity_type, entity_name (null: the default)}, values[] of {key, value}}.
    """,
    valid=versions("0-1"),
    flexible=versions("1+"),
    request=struct(
        f(
            "components",
            [
                f("entity_type", STRING, required=True),
                f("match_type", INT8, required=True),
                f("match", STRING, null="0+"),
            ],
            required=True,
        ),
        f("strict", BOOL),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f(
            "entries",
            [f("entity", _ENTITY), f("values", [f("key", STRING), f("value", FLOAT64)])],
            null="0+",
        ),
    ),
    history={0: "initial (KIP-546)", 1: "flexible"},
)

ALTER_CLIENT_QUOTAS: Final = Message(
    49,
    "AlterClientQuotas",
    doc="""Set or remove client quotas of entities (KIP-546).

    Request: ``entries[]`` of {entity[] of {entity_type, entity_name}, ops[] of {key
    (producer_byte_rate, consumer_byte_rate, request_percentage), value, remove}},
    ``validate_only``.
    Response: ``entries[]`` of {error_code, error_message, entity[]}.
    """,
    valid=versions("0-1"),
    flexible=versions("1+"),
    request=struct(
        f(
            "entries",
            [
                f("entity", _ENTITY, required=True),
                f(
                    "ops",
                    [
                        f("key", STRING, required=True),
                        f("value", FLOAT64),
                        f("remove", BOOL),
                    ],
                    required=True,
                ),
            ],
            required=True,
        ),
        f("validate_only", BOOL),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f(
            "entries",
            [
                f("error_code", INT16),
                f("error_message", STRING, null="0+"),
                f("entity", _ENTITY),
            ],
        ),
    ),
    history={0: "initial (KIP-546)", 1: "flexible"},
)
