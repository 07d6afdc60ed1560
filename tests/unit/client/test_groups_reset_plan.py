"""`groups reset-offsets`: the new offsets Kafka's rules give, and its flag checks."""

from __future__ import annotations

from datetime import datetime

import pytest

from minibroker.client.cli.groups_reset import Target, parse_datetime, parse_topic_spec, plan
from minibroker.command.main import main
from minibroker.protocol.errors import MinibrokerError

TPS = [("t", 0), ("t", 1)]
STARTS = {("t", 0): 10, ("t", 1): 0}
ENDS = {("t", 0): 100, ("t", 1): 5}


def new_offsets(target: Target, committed=None, at_time=None):  # type: ignore[no-untyped-def]
    return plan(TPS, target, committed=committed or {}, starts=STARTS, ends=ENDS, at_time=at_time)


def test_to_earliest_and_latest_are_the_log_start_and_end() -> None:
    assert new_offsets(Target("earliest")) == STARTS
    assert new_offsets(Target("latest")) == ENDS


def test_to_offset_is_clamped_into_the_log() -> None:
    assert new_offsets(Target("offset", 7)) == {("t", 0): 10, ("t", 1): 5}


def test_shift_by_moves_from_the_committed_offset_within_the_log() -> None:
    committed = {("t", 0): 50, ("t", 1): 4}
    assert new_offsets(Target("shift", -45), committed) == {("t", 0): 10, ("t", 1): 0}
    assert new_offsets(Target("shift", 3), committed) == {("t", 0): 53, ("t", 1): 5}


def test_shift_by_without_a_committed_offset_is_an_error() -> None:
    with pytest.raises(MinibrokerError, match="t-1: cannot shift"):
        new_offsets(Target("shift", 1), {("t", 0): 50})


def test_to_datetime_goes_to_the_found_offset_or_the_log_end() -> None:
    found = {("t", 0): 42, ("t", 1): -1}
    assert new_offsets(Target("datetime", 0), at_time=found) == {("t", 0): 42, ("t", 1): 5}


def test_datetime_with_and_without_zone() -> None:
    assert parse_datetime("2024-05-01T12:00:00.000Z") == 1714564800000
    assert parse_datetime("2024-05-01T14:00:00.000+02:00") == 1714564800000
    local = datetime(2024, 5, 1, 12).astimezone()
    assert parse_datetime("2024-05-01T12:00:00") == int(local.timestamp() * 1000)


def test_topic_spec_names_a_topic_or_some_partitions() -> None:
    assert parse_topic_spec("t") == ("t", None)
    assert parse_topic_spec("t:0,2") == ("t", [0, 2])


@pytest.mark.parametrize(
    "argv",
    [
        ["groups", "reset-offsets", "--group", "g", "--all-topics"],  # no target
        ["groups", "reset-offsets", "--group", "g", "--to-earliest"],  # no scope
        ["groups", "reset-offsets", "--all-topics", "--to-earliest"],  # no group
        ["groups", "reset-offsets", "-g"],
        ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "soon"],
        ["groups", "describe"],
        ["groups", "delete"],
        ["consume", "t", "--group", "g", "--partition", "0"],
    ],
)
def test_flag_mistakes_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        raise SystemExit(main(argv))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
