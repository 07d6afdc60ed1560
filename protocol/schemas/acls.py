"""Schemas of the ACL APIs: DescribeAcls, CreateAcls, DeleteAcls.

Field names are Kafka's (DescribeAclsRequest/Response JSON ...) in snake_case; the
single msgpack version carries Kafka's v1 fields (the resource pattern type, KIP-290).
Numbers are Kafka's codes (protocol/acls.py): resource type 1 any, 2 topic, 3 group,
4 cluster; pattern type 1 any, 2 match, 3 literal, 4 prefixed; operation 1 any, 2 all,
3 read, 4 write, 5 create, 6 delete, 7 alter, 8 describe, 9 cluster action, 10
describe configs, 11 alter configs, 12 idempotent write; permission 1 any, 2 deny,
3 allow. A nil name, principal or host in a filter matches any.
"""

from __future__ import annotations

from minibroker.protocol.schemas.types import (
    INT8,
    INT16,
    INT32,
    STRING,
    Api,
    Array,
    Field,
    Nullable,
    struct,
)

INITIAL = "initial version"

_THROTTLE = Field("throttle_time_ms", INT32, 0)
_ERROR = Field("error_code", INT16, 0)
_ERROR_MESSAGE = Field("error_message", Nullable(STRING), None)

_FILTER = (
    Field("resource_type_filter", INT8),
    Field("resource_name_filter", Nullable(STRING), None),
    Field("pattern_type_filter", INT8, 3),
    Field("principal_filter", Nullable(STRING), None),
    Field("host_filter", Nullable(STRING), None),
    Field("operation", INT8),
    Field("permission_type", INT8),
)

DESCRIBE_ACLS = Api(
    name="DescribeAcls",
    doc="""The ACL bindings one filter matches (needs Describe on the cluster).

    Request: the filter's fields. Response: ``error_code``, ``resources[]`` of
    {resource_type, resource_name, pattern_type, acls[] of {principal, host,
    operation, permission_type}}.
    """,
    request=struct(*_FILTER),
    response=struct(
        _THROTTLE,
        _ERROR,
        _ERROR_MESSAGE,
        Field(
            "resources",
            Array(
                struct(
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
                    Field("pattern_type", INT8, 3),
                    Field(
                        "acls",
                        Array(
                            struct(
                                Field("principal", STRING),
                                Field("host", STRING),
                                Field("operation", INT8),
                                Field("permission_type", INT8),
                            )
                        ),
                    ),
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)

CREATE_ACLS = Api(
    name="CreateAcls",
    doc="""Store ACL bindings (needs Alter on the cluster).

    Request: ``creations[]`` of {resource_type, resource_name, resource_pattern_type,
    principal, host, operation, permission_type}. Response: ``results[]`` of
    {error_code, error_message}, one per creation in order.
    """,
    request=struct(
        Field(
            "creations",
            Array(
                struct(
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
                    Field("resource_pattern_type", INT8, 3),
                    Field("principal", STRING),
                    Field("host", STRING),
                    Field("operation", INT8),
                    Field("permission_type", INT8),
                )
            ),
        )
    ),
    response=struct(
        _THROTTLE,
        Field("results", Array(struct(_ERROR, _ERROR_MESSAGE)), []),
    ),
    history=(INITIAL,),
)

DELETE_ACLS = Api(
    name="DeleteAcls",
    doc="""Remove the ACL bindings each filter matches (needs Alter on the cluster).

    Request: ``filters[]`` of the DescribeAcls filter fields. Response:
    ``filter_results[]``, one per filter in order, of {error_code, error_message,
    matching_acls[] of {error_code, error_message, resource_type, resource_name,
    pattern_type, principal, host, operation, permission_type}}: the bindings removed.
    """,
    request=struct(Field("filters", Array(struct(*_FILTER)))),
    response=struct(
        _THROTTLE,
        Field(
            "filter_results",
            Array(
                struct(
                    _ERROR,
                    _ERROR_MESSAGE,
                    Field(
                        "matching_acls",
                        Array(
                            struct(
                                _ERROR,
                                _ERROR_MESSAGE,
                                Field("resource_type", INT8),
                                Field("resource_name", STRING),
                                Field("pattern_type", INT8, 3),
                                Field("principal", STRING),
                                Field("host", STRING),
                                Field("operation", INT8),
                                Field("permission_type", INT8),
                            )
                        ),
                        [],
                    ),
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)
