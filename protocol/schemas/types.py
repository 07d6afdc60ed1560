"""The schema language: message bodies declared as data, compiled into fast validators.

A body is a msgpack map with snake_case keys. Its shape is declared once with
``SchemaStruct`` / ``SchemaField`` / ``SchemaArray`` / ``Nullable`` and the primitive
types below (the ``Schema`` prefix tells them from ``protocol/messages/form.py``'s Kafka
declarations, from which ``from_messages.py`` derives them); each
field names the first version that has it (``since``) and, if it was dropped, the
first version that no longer has it (``until``), so one declaration carries the whole
version history of a message, as Kafka's message JSON files do.

SchemaPrimitive types and what they accept after ``msgpack.unpackb(raw=False)``:

    INT8 / INT16 / INT32 / INT64   int (not bool) within the signed range
    BOOL                           bool
    FLOAT64                        float
    STRING                         str
    BYTES                          bytes (msgpack ``bin``)
    RECORDS                        bytes: RecordBatch v2 data, possibly several batches
    UUID                           bytes of length 16

How validation works: ``compile_validator(struct, version)`` generates the Python
source of one function that checks the whole body with inline ``type(x) is int``
tests and nested ``for`` loops, then ``exec``s it once. There is no interpreter walking
the schema per message, which matters on the produce and fetch hot paths (see
bench/wire_bench.py). Missing optional fields are filled with their default in place
(a fresh ``[]`` for list defaults); unknown keys are left alone, so an older reader
accepts a newer writer's extra fields. A failure raises ``SchemaError`` naming the
field path (``topics[].partitions[].index``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final


class SchemaError(ValueError):
    """A body does not match its schema; ``path`` names the offending field."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class SchemaPrimitive:
    """A leaf type; ``check`` is a Python expression over ``{v}`` that is true when valid."""

    name: str
    check: str


INT8: Final = SchemaPrimitive("int8", "type({v}) is int and -128 <= {v} <= 127")
INT16: Final = SchemaPrimitive("int16", "type({v}) is int and -32768 <= {v} <= 32767")
INT32: Final = SchemaPrimitive("int32", "type({v}) is int and -2147483648 <= {v} <= 2147483647")
INT64: Final = SchemaPrimitive(
    "int64", "type({v}) is int and -9223372036854775808 <= {v} <= 9223372036854775807"
)
BOOL: Final = SchemaPrimitive("bool", "type({v}) is bool")
FLOAT64: Final = SchemaPrimitive("float64", "type({v}) is float")
STRING: Final = SchemaPrimitive("string", "type({v}) is str")
BYTES: Final = SchemaPrimitive("bytes", "type({v}) is bytes")
RECORDS: Final = SchemaPrimitive("records", "type({v}) is bytes")
UUID: Final = SchemaPrimitive("uuid", "type({v}) is bytes and len({v}) == 16")


@dataclass(frozen=True, slots=True)
class SchemaArray:
    """A msgpack array whose every element is ``of``."""

    of: Type


@dataclass(frozen=True, slots=True)
class Nullable:
    """``of`` or nil."""

    of: Type


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = _Required()
"""Default marker of a field that must be present."""


@dataclass(frozen=True, slots=True)
class SchemaField:
    """One key of a struct: present in versions ``since <= v < until``."""

    name: str
    type: Type
    default: Any = REQUIRED
    since: int = 0
    until: int | None = None
    doc: str = ""

    def in_version(self, version: int) -> bool:
        return self.since <= version and (self.until is None or version < self.until)


@dataclass(frozen=True, slots=True)
class SchemaStruct:
    """A msgpack map with the given fields."""

    fields: tuple[SchemaField, ...]
    doc: str = ""


Type = SchemaPrimitive | SchemaArray | Nullable | SchemaStruct


def struct(*fields: SchemaField, doc: str = "") -> SchemaStruct:
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate field names in {names}")
    for f in fields:
        _check_default(f)
    return SchemaStruct(tuple(fields), doc)


def _check_default(f: SchemaField) -> None:
    d = f.default
    if d is REQUIRED or d is None or type(d) in (int, bool, float, str, bytes):
        return
    if isinstance(d, list) and not d:  # the one mutable default: filled as a fresh []
        return
    raise ValueError(f"field {f.name}: default {d!r} must be a scalar, None or []")


Validator = Callable[[Any], None]
"""A compiled validator: returns None for a valid body (defaults filled), else raises."""


def compile_validator(root: SchemaStruct, version: int, name: str = "body") -> Validator:
    """Compile ``root`` at ``version`` into one function; see the module docstring."""
    gen = _Generator(version)
    gen.emit_value("body", root, "", 1)
    source = "def validate(body):\n" + "\n".join(gen.lines) + "\n    return None\n"
    namespace: dict[str, Any] = {"_fail": _fail, "_MISSING": _MISSING}
    namespace.update(gen.constants)
    code = compile(source, f"<schema {name} v{version}>", "exec")
    exec(code, namespace)
    validator: Validator = namespace["validate"]
    validator.__doc__ = source  # the generated code, for the curious and for debugging
    return validator


_MISSING: Final = object()


def _fail(path: str, expected: str, value: object) -> None:
    if value is _MISSING:
        raise SchemaError(path or "body", "required field missing")
    raise SchemaError(path or "body", f"expected {expected}, got {type(value).__name__}")


def _type_name(t: Type) -> str:
    if isinstance(t, SchemaPrimitive):
        return t.name
    if isinstance(t, SchemaArray):
        return f"array of {_type_name(t.of)}"
    if isinstance(t, Nullable):
        return f"nullable {_type_name(t.of)}"
    return "map"


class _Generator:
    """Emits the lines of one validator function (indentation = nesting)."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.lines: list[str] = []
        self.constants: dict[str, object] = {}
        self._n = 0

    def var(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def fail(self, depth: int, path: str, t: Type, v: str) -> None:
        self.line(depth, f"_fail({path!r}, {_type_name(t)!r}, {v})")

    def emit_value(self, v: str, t: Type, path: str, depth: int) -> None:
        """Emit a check that the value in variable ``v`` is of type ``t``."""
        if isinstance(t, SchemaPrimitive):
            self.line(depth, f"if not ({t.check.format(v=v)}):")
            self.fail(depth + 1, path, t, v)
        elif isinstance(t, Nullable):
            self.line(depth, f"if {v} is not None:")
            self.emit_value(v, t.of, path, depth + 1)
        elif isinstance(t, SchemaArray):
            self.line(depth, f"if type({v}) is not list:")
            self.fail(depth + 1, path, t, v)
            if isinstance(t.of, SchemaPrimitive):
                # One generator pass over the elements; the path is only used on failure.
                e = self.var("e")
                cond = t.of.check.format(v=e)
                self.line(depth, f"for {e} in {v}:")
                self.line(depth + 1, f"if not ({cond}):")
                self.fail(depth + 2, path + "[]", t.of, e)
            else:
                e = self.var("e")
                self.line(depth, f"for {e} in {v}:")
                self.emit_value(e, t.of, path + "[]", depth + 1)
        else:
            self.emit_struct(v, t, path, depth)

    def emit_struct(self, v: str, t: SchemaStruct, path: str, depth: int) -> None:
        self.line(depth, f"if type({v}) is not dict:")
        self.fail(depth + 1, path, t, v)
        get = self.var("get")
        self.line(depth, f"{get} = {v}.get")
        for f in t.fields:
            if not f.in_version(self.version):
                continue
            x = self.var("x")
            fpath = f"{path}.{f.name}" if path else f.name
            self.line(depth, f"{x} = {get}({f.name!r}, _MISSING)")
            self.line(depth, f"if {x} is _MISSING:")
            if f.default is REQUIRED:
                self.line(depth + 1, f"_fail({fpath!r}, '', _MISSING)")
            elif isinstance(f.default, list):
                self.line(depth + 1, f"{v}[{f.name!r}] = []")
            else:
                const = self.var("DEFAULT")
                self.constants[const] = f.default
                self.line(depth + 1, f"{v}[{f.name!r}] = {const}")
            self.line(depth, "else:")
            before = len(self.lines)
            self.emit_value(x, f.type, fpath, depth + 1)
            if len(self.lines) == before:
                self.line(depth + 1, "pass")


@dataclass(frozen=True, slots=True)
class Api:
    """One API: its request and response bodies and why each version exists.

    ``history[v]`` says what version ``v`` changed, so versions run from 0 to
    ``len(history) - 1``; a field's ``since``/``until`` place it in that history.
    """

    name: str
    request: SchemaStruct
    response: SchemaStruct
    history: tuple[str, ...]
    doc: str

    @property
    def max_version(self) -> int:
        return len(self.history) - 1


def per_topic(
    *partition_fields: SchemaField,
    field: str = "topics",
    topic: str = "name",
    partitions: str = "partitions",
    default: Any = REQUIRED,
) -> SchemaField:
    """Kafka's usual nesting, ``field: [{topic: string, partitions: [{partition_fields}]}]``."""
    entry = struct(
        SchemaField(topic, STRING), SchemaField(partitions, SchemaArray(struct(*partition_fields)))
    )
    return SchemaField(field, SchemaArray(entry), default)
