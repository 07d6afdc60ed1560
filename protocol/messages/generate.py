"""Write protocol/messages/bodies.py: the typed bodies of every declared message.

    python -m minibroker.protocol.messages.generate [--check]

Handlers read requests and build responses as plain dicts (what both codecs decode to
and encode from, with no per-request object to build); these ``TypedDict`` classes give
those dicts their types, so mypy checks every key a handler reads or writes against the
declaration. A request body always carries every field (the decoders fill defaults),
so request classes are total; a response body may leave out any field that has a
default (the encoders fill it), so response classes are not, except for ``required``
fields. The sending side (the admin client, the controller's request batch) builds a
request as ``<Api>RequestBody`` (nested structs ``<Api>RequestBody<Field>``): any field
may be left out where the encoders fill a default, as in a response.
``--check`` fails when the file is not what the declarations give (the unit
tests run it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

from minibroker.protocol.messages import ALL_MESSAGES
from minibroker.protocol.messages.form import Array, Field, KafkaType, Message, Primitive, Struct

TARGET: Final = Path(__file__).with_name("bodies.py")

_PYTHON_TYPES: Final = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "bool": "bool",
    "float64": "float",
    "string": "str",
    "bytes": "bytes",
    "uuid": "bytes",
    "records": "Records",
}

_HEADER: Final = '''"""Typed bodies of every message: generated from protocol/messages/ by
``python -m minibroker.protocol.messages.generate``; do not edit by hand.

``<Api>Request`` / ``<Api>Response`` are the bodies a handler reads and returns;
``<Api>RequestBody`` is a request as a sender builds it (fields with a default may be
left out: the encoders fill them); nested structs are named after their parent and
field. ``ROUTES`` ties each API key to its
pair, for broker/requests/dispatcher.py's typed registration.
"""

from __future__ import annotations

from typing import Final, Generic, Required, TypeAlias, TypedDict, TypeVar

Records: TypeAlias = bytes | bytearray | memoryview
"""RecordBatch v2 bytes: bytes from msgpack, a view of the frame or of a segment file."""

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")


class Route(Generic[RequestT, ResponseT]):
    """An API key with the body types of its request and response."""

    __slots__ = ("api_key",)

    def __init__(self, api_key: int) -> None:
        self.api_key = api_key
'''


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _singular(name: str) -> str:
    if name.endswith("ies"):
        return name[:-3] + "y"
    if name.endswith("sses") or name.endswith("xes"):
        return name[:-2]
    if name.endswith("s") and not name.endswith("ss"):
        return name[:-1]
    return name


class _Writer:
    def __init__(self) -> None:
        self.classes: list[str] = []

    def struct(self, name: str, struct: Struct, *, total: bool) -> str:
        lines = []
        for field in struct.fields:
            annotation = self.annotation(name, field, total)
            if not total and field.required:
                annotation = f"Required[{annotation}]"
            lines.append(f"    {field.body_key}: {annotation}")
        totality = "" if total else ", total=False"
        body = "\n".join(lines) if lines else "    pass"
        self.classes.append(f"class {name}(TypedDict{totality}):\n{body}\n")
        return name

    def annotation(self, parent: str, field: Field, total: bool) -> str:
        text = self.type_text(parent, field.body_key, field.type, total)
        absent_struct = isinstance(field.type, Struct) and field.default_value() is None
        return f"{text} | None" if field.nullable_in_body or absent_struct else text

    def type_text(self, parent: str, key: str, type_: KafkaType, total: bool) -> str:
        """Nested structs are total exactly when their message side is."""
        if isinstance(type_, Primitive):
            return _PYTHON_TYPES[type_.name]
        if isinstance(type_, Array):
            if isinstance(type_.of, Struct):
                name = parent + _camel(_singular(key))
                return f"list[{self.struct(name, type_.of, total=total)}]"
            return f"list[{self.type_text(parent, key, type_.of, total)}]"
        return self.struct(parent + _camel(key), type_, total=total)


def _message(writer: _Writer, message: Message) -> None:
    writer.struct(f"{message.name}Request", message.request, total=True)
    writer.struct(f"{message.name}RequestBody", message.request, total=False)
    writer.struct(f"{message.name}Response", message.response, total=False)


def source() -> str:
    writer = _Writer()
    for key in sorted(ALL_MESSAGES):
        _message(writer, ALL_MESSAGES[key])
    routes = []
    for key in sorted(ALL_MESSAGES):
        message = ALL_MESSAGES[key]
        constant = _constant(message.name)
        routes.append(
            f"{constant}: Final[Route[{message.name}Request, {message.name}Response]]"
            f" = Route({key})"
        )
    return _HEADER + "\n\n" + "\n\n".join(writer.classes) + "\n\n" + "\n".join(routes) + "\n"


def _constant(name: str) -> str:
    out = ""
    for i, char in enumerate(name):
        if char.isupper() and i and not name[i - 1].isupper():
            out += "_"
        out += char.upper()
    return out


def main(argv: list[str]) -> int:
    import subprocess

    text = source()
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if argv[:1] == ["--check"]:
        if TARGET.read_text() != formatted:
            print(f"{TARGET} is stale: run python -m minibroker.protocol.messages.generate")
            return 1
        return 0
    TARGET.write_text(formatted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
