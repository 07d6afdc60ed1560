"""How a message is declared: fields with version ranges, declared as data.

One ``Message`` per API holds its request and response, and that one declaration
serves both wire formats and the handlers' types:

- Kafka's binary protocol (protocol/kafka/compiler.py compiles an encoder and a decoder
  per version from it);
- minibroker's msgpack bodies (protocol/schemas/from_messages.py derives the msgpack
  schema: every field of every version, under its body key);
- the typed bodies handlers read and return (protocol/messages/bodies.py, generated
  from these declarations by ``python -m minibroker.protocol.messages.generate``).

Each ``Field`` carries its Kafka name in snake_case, its type, the Kafka versions that
have it, the versions in which it may be null, its default, and, for tagged fields, its
tag. ``key`` names the body key handlers use when it differs from Kafka's name
(``topic_data`` is ``topics``). Two attributes only concern the msgpack body:
``required`` (a msgpack body must carry the field; the Kafka decoder always fills it),
and ``body_null`` (whether a msgpack body may carry nil, when that differs from "null in
some Kafka version"). A field with no Kafka versions (``""``) exists only in msgpack
bodies (e.g. ``dirty_ratio``, a float Kafka's DescribeLogDirs lacks); a message with no
Kafka versions is served only on the msgpack listener (the controller's requests).

Wire encodings (every integer big-endian):

    int8/int16/int32/int64   fixed size, signed; bool one byte (non-zero = true);
                             float64 an 8-byte IEEE 754 double
    uuid                     16 bytes
    string                   int16 length (-1 = null) + UTF-8; flexible: uvarint
                             length + 1 (0 = null)
    bytes / records          int32 length (-1 = null); flexible: uvarint length + 1
    array                    int32 count (-1 = null); flexible: uvarint count + 1
    struct                   its fields in order; flexible versions end every struct
                             with tagged fields: uvarint count, then per field
                             uvarint tag, uvarint size, value

"Flexible" versions (KIP-482) are a per-message version range; in them the request
header is v2 (v1 + tagged fields) and the response header v1 (correlation id + tagged
fields), except ApiVersions' response which always has header v0 so that a client can
read the broker's answer whatever version it guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``high`` None means open-ended, ``low`` > ``high``
    (see ``NONE``) means no version at all."""

    low: int
    high: int | None

    def __contains__(self, version: object) -> bool:
        return (
            isinstance(version, int)
            and self.low <= version
            and (self.high is None or version <= self.high)
        )


NONE: Final = Versions(1, 0)


def versions(spec: str) -> Versions:
    """``"3+"``, ``"0-2"``, ``"5"`` or ``""`` (none) as a Versions."""
    if not spec:
        return NONE
    if spec.endswith("+"):
        return Versions(int(spec[:-1]), None)
    low, _, high = spec.partition("-")
    return Versions(int(low), int(high or low))


@dataclass(frozen=True, slots=True)
class Primitive:
    """A leaf type: ``name`` is Kafka's type name."""

    name: str


INT8: Final = Primitive("int8")
INT16: Final = Primitive("int16")
INT32: Final = Primitive("int32")
INT64: Final = Primitive("int64")
BOOL: Final = Primitive("bool")
UUID: Final = Primitive("uuid")
STRING: Final = Primitive("string")
BYTES: Final = Primitive("bytes")
RECORDS: Final = Primitive("records")
FLOAT64: Final = Primitive("float64")
"""An IEEE 754 double: Kafka's client quota values; also the msgpack-only floats
(``dirty_ratio``)."""

NO_AUTHORIZED_OPERATIONS: Final = -(2**31)
"""Kafka's authorized-operations sentinel (Metadata, DescribeCluster, DescribeGroups):
not asked for."""


@dataclass(frozen=True, slots=True)
class Array:
    of: KafkaType


@dataclass(frozen=True, slots=True)
class Struct:
    fields: tuple[Field, ...]
    doc: str = ""


KafkaType = Primitive | Array | Struct

_ZERO: Final[dict[str, Any]] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "bool": False,
    "uuid": b"\x00" * 16,
    "string": "",
    "bytes": b"",
    "records": None,
    "float64": 0.0,
}


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a struct. ``default`` (if not given: null when nullable, else the
    type's zero, an empty array) fills the body when a version lacks the field or a
    response body omits it."""

    name: str
    type: KafkaType
    versions: Versions
    nullable: Versions = NONE
    default: Any = None
    tag: int | None = None
    key: str = ""
    required: bool = False
    body_null: bool | None = None

    @property
    def body_key(self) -> str:
        return self.key or self.name

    @property
    def nullable_in_body(self) -> bool:
        """Whether a body may carry None here: ``body_null`` when given, else whether
        some Kafka version has it nullable."""
        return self.nullable != NONE if self.body_null is None else self.body_null

    def default_value(self) -> Any:
        """A fresh default (arrays get a new list each time)."""
        if self.default is not None:
            return self.default
        if self.nullable_in_body:
            return None
        if isinstance(self.type, Array):
            return []
        if isinstance(self.type, Struct):
            return None
        return _ZERO[self.type.name]


def f(
    name: str,
    type_: KafkaType | list[Field],
    v: str = "0+",
    *,
    null: str = "",
    default: Any = None,
    tag: int | None = None,
    key: str = "",
    required: bool = False,
    body_null: bool | None = None,
) -> Field:
    """Shorthand for a Field: a list of fields is an array of that struct."""
    kafka_type: KafkaType = Array(Struct(tuple(type_))) if isinstance(type_, list) else type_
    return Field(
        name, kafka_type, versions(v), versions(null), default, tag, key, required, body_null
    )


def struct(*fields: Field, doc: str = "") -> Struct:
    keys = [field.body_key for field in fields]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate body keys in {keys}")
    return Struct(tuple(fields), doc)


@dataclass(frozen=True, slots=True)
class Message:
    """One API: its key, what it does (``doc``), the Kafka versions this broker decodes
    (``NONE``: served on the msgpack listener only), the flexible versions, and the
    request and response fields. ``history`` says why each Kafka version exists."""

    api_key: int
    name: str
    valid: Versions
    flexible: Versions
    request: Struct
    response: Struct
    history: dict[int, str] = field(default_factory=dict)
    doc: str = ""

    @property
    def on_kafka_wire(self) -> bool:
        return self.valid != NONE

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible
