"""Print every API's request and response bodies as readable text.

    python3 -m minibroker.protocol.describe_schemas [API-NAME ...]

One line per field: its name, type, default (``= ...``) and the versions that have it
when not all do. Generated from the schemas themselves, so it cannot go stale.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

from minibroker.protocol.api import SCHEMAS
from minibroker.protocol.schemas.types import (
    REQUIRED,
    Api,
    Nullable,
    SchemaArray,
    SchemaPrimitive,
    SchemaStruct,
    Type,
)


def _type_text(t: Type) -> str:
    if isinstance(t, SchemaPrimitive):
        return t.name
    if isinstance(t, Nullable):
        return f"{_type_text(t.of)}?"
    if isinstance(t, SchemaArray):
        return f"[{_type_text(t.of)}]"
    return "{...}"


def _struct_of(t: Type) -> SchemaStruct | None:
    while isinstance(t, Nullable | SchemaArray):
        t = t.of
    return t if isinstance(t, SchemaStruct) else None


def describe_struct(s: SchemaStruct, indent: str = "  ") -> Iterator[str]:
    """The lines describing ``s``, nested structs indented below their field."""
    for f in s.fields:
        default = "" if f.default is REQUIRED else f" = {f.default!r}"
        versions = ""
        if f.since or f.until is not None:
            versions = f"  (v{f.since}+)" if f.until is None else f"  (v{f.since}-v{f.until - 1})"
        yield f"{indent}{f.name}: {_type_text(f.type)}{default}{versions}"
        inner = _struct_of(f.type)
        if inner is not None:
            yield from describe_struct(inner, indent + "    ")


def describe_api(key: int, api: Api) -> Iterator[str]:
    yield f"{api.name} (key {key}, versions 0..{api.max_version})"
    for version, why in enumerate(api.history):
        yield f"  v{version}: {why}"
    yield " request:"
    yield from describe_struct(api.request)
    yield " response:"
    yield from describe_struct(api.response)


def main(argv: list[str]) -> int:
    wanted = {name.lower() for name in argv}
    for key, api in SCHEMAS.items():
        if not wanted or api.name.lower() in wanted:
            print("\n".join(describe_api(int(key), api)), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
