"""The msgpack schema of a message, derived from its one declaration.

protocol/messages/ declares every API once (protocol/messages/form.py). A msgpack body
has one version per API and carries every field any Kafka version has, under its body
key, plus the fields that exist only in msgpack bodies: so a Kafka request normalised
to the newest version (protocol/kafka/reshape.py) and a msgpack request have the same
shape, and handlers read one form. Fields a msgpack body may omit take the declared
default; ``required`` ones must be present.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages import form
from minibroker.protocol.schemas.types import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    REQUIRED,
    STRING,
    UUID,
    Api,
    Nullable,
    SchemaArray,
    SchemaField,
    SchemaPrimitive,
    SchemaStruct,
    Type,
    struct,
)

INITIAL: Final = "initial version"

_PRIMITIVES: Final[dict[str, SchemaPrimitive]] = {
    p.name: p for p in (INT8, INT16, INT32, INT64, BOOL, UUID, STRING, BYTES, RECORDS, FLOAT64)
}


def body_api(message: form.Message) -> Api:
    """The msgpack schema of ``message``'s request and response bodies."""
    return Api(
        name=message.name,
        request=body_struct(message.request),
        response=body_struct(message.response),
        history=(INITIAL,),
        doc=message.doc,
    )


def body_struct(declared: form.Struct) -> SchemaStruct:
    return struct(*(_body_field(field) for field in declared.fields), doc=declared.doc)


def _body_field(field: form.Field) -> SchemaField:
    type_ = _body_type(field.type)
    if field.nullable_in_body:
        type_ = Nullable(type_)
    return SchemaField(field.body_key, type_, REQUIRED if field.required else field.default_value())


def _body_type(type_: form.KafkaType) -> Type:
    if isinstance(type_, form.Primitive):
        return _PRIMITIVES[type_.name]
    if isinstance(type_, form.Array):
        return SchemaArray(_body_type(type_.of))
    return body_struct(type_)
