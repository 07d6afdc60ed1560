"""The schema language: versioned fields, defaults, and what each primitive accepts."""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.protocol.api import SCHEMAS
from minibroker.protocol.describe_schemas import describe_struct
from minibroker.protocol.describe_schemas import main as describe_main
from minibroker.protocol.schemas.types import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    Nullable,
    SchemaArray,
    SchemaError,
    SchemaField,
    compile_validator,
    struct,
)

EVOLVING = struct(
    SchemaField("old", INT32, until=2),
    SchemaField("always", STRING),
    SchemaField("added_in_1", INT64, -1, since=1),
    SchemaField("list_added_in_1", SchemaArray(INT32), [], since=1),
)


def test_a_field_exists_only_in_its_versions() -> None:
    v0, v1, v2 = (compile_validator(EVOLVING, v) for v in range(3))
    body: dict[str, Any] = {"old": 1, "always": "x"}
    v0(body)
    assert body == {"old": 1, "always": "x"}  # nothing of v1 filled in
    v1(body)
    assert body == {"old": 1, "always": "x", "added_in_1": -1, "list_added_in_1": []}
    v2({"always": "x"})  # "old" no longer required
    with pytest.raises(SchemaError, match="old: required"):
        v1({"always": "x"})


def test_list_defaults_are_fresh_lists_per_body() -> None:
    validate = compile_validator(EVOLVING, 1)
    first: dict[str, Any] = {"old": 1, "always": ""}
    second: dict[str, Any] = {"old": 1, "always": ""}
    validate(first)
    validate(second)
    first["list_added_in_1"].append(5)
    assert second["list_added_in_1"] == []


@pytest.mark.parametrize(
    ("type_", "good", "bad"),
    [
        (INT8, [-128, 0, 127], [128, -129, True, 1.0, "1", None]),
        (INT16, [-32768, 32767], [32768, False]),
        (INT32, [-(2**31), 2**31 - 1], [2**31, None]),
        (INT64, [-(2**63), 2**63 - 1], [2**63, 1.5]),
        (BOOL, [True, False], [0, 1, None]),
        (STRING, ["", "é"], [b"bytes", None, 1]),
        (RECORDS, [b"", b"\x00"], ["text", None, bytearray(b"x")]),
        (Nullable(INT32), [None, 3], ["3"]),
        (SchemaArray(INT16), [[], [1, 2]], [[1, "2"], (1, 2), None, [40000]]),
        (Nullable(SchemaArray(STRING)), [None, ["a"]], [[None]]),
    ],
)
def test_each_type_accepts_exactly_its_values(type_: Any, good: list[Any], bad: list[Any]) -> None:
    validate = compile_validator(struct(SchemaField("v", type_)), 0)
    for value in good:
        validate({"v": value})
    for value in bad:
        with pytest.raises(SchemaError, match=r"^v(\[\])?: expected"):
            validate({"v": value})


def test_unknown_keys_are_left_alone_for_forward_compatibility() -> None:
    body = {"v": 1, "from_a_newer_writer": [1, 2]}
    compile_validator(struct(SchemaField("v", INT32)), 0)(body)
    assert body == {"v": 1, "from_a_newer_writer": [1, 2]}


def test_struct_rejects_duplicate_names_and_mutable_defaults() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        struct(SchemaField("a", INT32), SchemaField("a", INT32))
    with pytest.raises(ValueError, match="default"):
        struct(SchemaField("a", SchemaArray(INT32), [1]))


@pytest.mark.parametrize("api", SCHEMAS.values(), ids=lambda api: api.name)
def test_every_api_documents_its_bodies_and_versions(api: Any) -> None:
    assert api.doc.strip() and "Request" in api.doc and "Response" in api.doc
    assert len(api.history) == api.max_version + 1 and all(api.history)


def test_describe_lists_every_field_with_its_versions_and_defaults() -> None:
    lines = list(describe_struct(EVOLVING))
    assert lines == [
        "  old: int32  (v0-v1)",
        "  always: string",
        "  added_in_1: int64 = -1  (v1+)",
        "  list_added_in_1: [int32] = []  (v1+)",
    ]


def test_describe_covers_every_api(capsys: pytest.CaptureFixture[str]) -> None:
    assert describe_main([]) == 0
    text = capsys.readouterr().out
    for key, api in SCHEMAS.items():
        assert f"{api.name} (key {int(key)}," in text
        for f in (*api.request.fields, *api.response.fields):
            assert f"  {f.name}: " in text
