"""Kafka messages of the ACL APIs: DescribeAcls, CreateAcls, DeleteAcls (see
protocol/kafka/schema.py for the declaration form, protocol/schemas/acls.py for the
bodies the handlers read; the field names are the same there). Versions 1-3: v0
predates resource pattern types (KIP-290), which every ACL here has."""

from __future__ import annotations

from typing import Final

from minibroker.protocol.kafka.schema import (
    INT8,
    INT16,
    INT32,
    STRING,
    Message,
    f,
    struct,
    versions,
)

_HISTORY: Final = {
    0: "initial (literal resource names only)",
    1: "pattern types: LITERAL, PREFIXED, and MATCH / ANY in filters (KIP-290)",
    2: "flexible",
    3: "adds the User Type principal (KIP-679 / user resources), no field change",
}

_FILTER: Final = (
    f("resource_type_filter", INT8),
    f("resource_name_filter", STRING, null="0+"),
    f("pattern_type_filter", INT8, "1+", default=3),
    f("principal_filter", STRING, null="0+"),
    f("host_filter", STRING, null="0+"),
    f("operation", INT8),
    f("permission_type", INT8),
)

DESCRIBE_ACLS: Final = Message(
    29,
    "DescribeAcls",
    valid=versions("1-3"),
    flexible=versions("2+"),
    request=struct(*_FILTER),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f(
            "resources",
            [
                f("resource_type", INT8),
                f("resource_name", STRING),
                f("pattern_type", INT8, "1+", default=3),
                f(
                    "acls",
                    [
                        f("principal", STRING),
                        f("host", STRING),
                        f("operation", INT8),
                        f("permission_type", INT8),
                    ],
                ),
            ],
        ),
    ),
    history=_HISTORY,
)

CREATE_ACLS: Final = Message(
    30,
    "CreateAcls",
    valid=versions("1-3"),
    flexible=versions("2+"),
    request=struct(
        f(
            "creations",
            [
                f("resource_type", INT8),
                f("resource_name", STRING),
                f("resource_pattern_type", INT8, "1+", default=3),
                f("principal", STRING),
                f("host", STRING),
                f("operation", INT8),
                f("permission_type", INT8),
            ],
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("results", [f("error_code", INT16), f("error_message", STRING, null="0+")]),
    ),
    history=_HISTORY,
)

DELETE_ACLS: Final = Message(
    31,
    "DeleteAcls",
    valid=versions("1-3"),
    flexible=versions("2+"),
    request=struct(f("filters", list(_FILTER))),
    response=struct(
        f("throttle_time_ms", INT32),
        f(
            "filter_results",
            [
                f("error_code", INT16),
                f("error_message", STRING, null="0+"),
                f(
                    "matching_acls",
                    [
                        f("error_code", INT16),
                        f("error_message", STRING, null="0+"),
                        f("resource_type", INT8),
                        f("resource_name", STRING),
                        f("pattern_type", INT8, "1+", default=3),
                        f("principal", STRING),
                        f("host", STRING),
                        f("operation", INT8),
                        f("permission_type", INT8),
                    ],
                ),
            ],
        ),
    ),
    history=_HISTORY,
)
