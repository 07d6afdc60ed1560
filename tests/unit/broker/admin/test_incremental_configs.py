"""IncrementalAlterConfigs' operations on an override set, and kafka-configs'
--add-config syntax in the CLI."""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.broker.admin.incremental_configs import apply_operations
from minibroker.client.cli.config_args import parse_add_config, parse_delete_config
from minibroker.protocol.errors import InvalidConfigError, InvalidRequestError
from minibroker.protocol.messages.admin import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT


def op(name: str, code: int, value: str | None = None) -> Any:
    return {"name": name, "config_operation": code, "value": value}


def unset(name: str) -> str:
    return {"cleanup.policy": "delete", "retention.ms": "604800000"}[name]


def test_set_and_delete_edit_only_the_named_keys() -> None:
    current = {"retention.ms": "1000", "segment.ms": "2000"}
    ops = [op("retention.ms", OP_SET, "5"), op("segment.ms", OP_DELETE), op("flush.ms", OP_DELETE)]
    assert apply_operations(current, ops, unset) == {"retention.ms": "5"}
    assert current == {"retention.ms": "1000", "segment.ms": "2000"}


def test_append_and_subtract_start_from_the_current_value_of_a_list_key() -> None:
    appended = apply_operations({}, [op("cleanup.policy", OP_APPEND, "compact,delete")], unset)
    assert appended == {"cleanup.policy": "delete,compact"}
    subtracted = apply_operations(appended, [op("cleanup.policy", OP_SUBTRACT, "delete")], unset)
    assert subtracted == {"cleanup.policy": "compact"}


def test_append_to_a_key_that_is_not_a_list_is_invalid_config() -> None:
    with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
        apply_operations({}, [op("retention.ms", OP_APPEND, "5")], unset)


@pytest.mark.parametrize(
    "ops",
    [
        [op("retention.ms", OP_SET, "1"), op("retention.ms", OP_DELETE)],
        [op("retention.ms", 9, "1")],
        [op("retention.ms", OP_SET, None)],
    ],
)
def test_a_key_twice_an_unknown_operation_or_a_null_set_is_invalid_request(ops: Any) -> None:
    with pytest.raises(InvalidRequestError):
        apply_operations({}, ops, unset)


def test_add_config_splits_on_commas_outside_brackets() -> None:
    parsed = parse_add_config(["retention.ms=5,cleanup.policy=[compact,delete]", "a=b=c"])
    assert parsed == {"retention.ms": "5", "cleanup.policy": "compact,delete", "a": "b=c"}
    assert parse_delete_config(["a,b", "c"]) == ["a", "b", "c"]
