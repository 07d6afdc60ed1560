"""The ACL APIs: DescribeAcls, CreateAcls, DeleteAcls.

Numbers are Kafka's codes (protocol/acls.py): resource type 1 any, 2 topic, 3 group,
4 cluster; pattern type 1 any, 2 match, 3 literal, 4 prefixed; operation 1 any, 2 all,
3 read, 4 write, 5 create, 6 delete, 7 alter, 8 describe, 9 cluster action, 10
describe configs, 11 alter configs, 12 idempotent write; permission 1 any, 2 deny,
3 allow. A None name, principal or host in a filter matches any.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.form import (
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
    f("resource_type_filter", INT8, required=True),
    f("resource_name_filter", STRING, null="0+"),
    f("pattern_type_filter", INT8, "1+", default=3),
    f("principal_filter", STRING, null="0+"),
    f("host_filter", STRING, null="0+"),
    f("operation", INT8, required=True),
    f("permission_type", INT8, required=True),
)
"""A binding filter: None names, principals and hosts match any."""

DESCRIBE_ACLS: Final = Message(
    29,
    "DescribeAcls",
    doc="""The ACL bindings one filter matches (needs Describe on the cluster).

    Request: the filter's fields. Response: ``error_code``, ``resources[]`` of
    {resource_type, resource_name, pattern_type, acls[] of {principal, host,
    operation, permission_type}}.
    """,
    valid=versions("1-3"),
    flexible=versions("2+"),
    request=struct(
        *_FILTER,
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f(
            "resources",
            [
                f("resource_type", INT8, required=True),
                f("resource_name", STRING, required=True),
                f("pattern_type", INT8, "1+", default=3),
                f(
                    "acls",
                    [
                        f("principal", STRING, required=True),
                        f("host", STRING, required=True),
                        f("operation", INT8, required=True),
                        f("permission_type", INT8, required=True),
                    ],
                    required=True,
                ),
            ],
        ),
    ),
    history=_HISTORY,
)

CREATE_ACLS: Final = Message(
    30,
    "CreateAcls",
    doc="""Store ACL bindings (needs Alter on the cluster).

    Request: ``creations[]`` of {resource_type, resource_name, resource_pattern_type,
    principal, host, operation, permission_type}. Response: ``results[]`` of
    {error_code, error_message}, one per creation in order.
    """,
    valid=versions("1-3"),
    flexible=versions("2+"),
    request=struct(
        f(
            "creations",
            [
                f("resource_type", INT8, required=True),
                f("resource_name", STRING, required=True),
                f("resource_pattern_type", INT8, "1+", default=3),
                f("principal", STRING, required=True),
                f("host", STRING, required=True),
                f("operation", INT8, required=True),
                f("permission_type", INT8, required=True),
            ],
            required=True,
        )
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
    doc="""Remove the ACL bindings each filter matches (needs Alter on the cluster).

    Request: ``filters[]`` of the DescribeAcls filter fields. Response:
    ``filter_results[]``, one per filter in order, of {error_code, error_message,
    matching_acls[] of {error_code, error_message, resource_type, resource_name,
    pattern_type, principal, host, operation, permission_type}}: the bindings removed.
    """,
    valid=versions("1-3"),
    flexible=versions("2+"),
    request=struct(
        f(
            "filters",
            list(_FILTER),
            required=True,
        )
    ),
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
                        f("resource_type", INT8, required=True),
                        f("resource_name", STRING, required=True),
                        f("pattern_type", INT8, "1+", default=3),
                        f("principal", STRING, required=True),
                        f("host", STRING, required=True),
                        f("operation", INT8, required=True),
                        f("permission_type", INT8, required=True),
                    ],
                ),
            ],
        ),
    ),
    history=_HISTORY,
)
