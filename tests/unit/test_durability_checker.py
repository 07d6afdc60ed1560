"""The fault tests' checker must catch each kind of broken promise (and only those)."""

from __future__ import annotations

import pytest

from tests.support.durability import DurabilityChecker, ReadRecord


def checker_with(
    *acks: tuple[bytes, int, int], retried: tuple[bytes, ...] = ()
) -> DurabilityChecker:
    checker = DurabilityChecker()
    for value, partition, offset in acks:
        checker.attempted(value)
        checker.acknowledged(value, "t", partition, offset)
    for value in retried:
        checker.retried(value)
    return checker


def read(*rows: tuple[int, int, bytes]) -> list[ReadRecord]:
    return [ReadRecord("t", partition, offset, value) for partition, offset, value in rows]


def test_a_log_holding_every_acknowledged_value_passes() -> None:
    checker = checker_with((b"a", 0, 0), (b"b", 0, 1), (b"c", 1, 0))
    report = checker.check(read((0, 0, b"a"), (0, 1, b"b"), (0, 2, b"unacked"), (1, 0, b"c")))
    assert report.ok, report.summary()
    assert (report.acknowledged, report.read) == (3, 4)


def test_a_lost_acknowledged_value_is_reported() -> None:
    report = checker_with((b"a", 0, 0), (b"b", 0, 1)).check(read((0, 0, b"a")))
    assert not report.ok
    assert "b'b'" in report.violations[0] and "lost" in report.violations[0]
    assert report.lost == [b"b"]


def test_a_value_at_another_offset_than_acknowledged_is_lost() -> None:
    report = checker_with((b"a", 0, 5)).check(read((0, 4, b"a")))
    assert len(report.violations) == 1
    assert "found instead" in report.violations[0]
    assert report.lost == [b"a"]


def test_only_lost_values_are_listed_as_lost() -> None:
    report = checker_with((b"a", 0, 0)).check(read((0, 0, b"a"), (0, 1, b"a")))
    assert report.violations and report.lost == []


def test_two_values_at_one_offset_are_reported() -> None:
    report = checker_with().check(read((0, 0, b"a"), (0, 0, b"b")))
    assert any("holds two values" in v for v in report.violations)


def test_offsets_going_backwards_are_reported() -> None:
    report = checker_with().check(read((0, 3, b"a"), (0, 2, b"b")))
    assert any("backwards" in v for v in report.violations)


def test_duplicates_are_allowed_only_for_retried_sends() -> None:
    rows = read((0, 0, b"a"), (0, 1, b"a"))
    assert not checker_with((b"a", 0, 0)).check(rows).ok
    assert checker_with((b"a", 0, 0), retried=(b"a",)).check(rows).ok


def test_values_must_be_unique_per_run() -> None:
    checker = DurabilityChecker()
    checker.attempted(b"a")
    with pytest.raises(ValueError):
        checker.attempted(b"a")


def test_with_idempotent_producers_even_a_retried_value_must_appear_once() -> None:
    checker = DurabilityChecker(idempotent=True)
    checker.attempted(b"a")
    checker.retried(b"a")
    report = checker.check(read((0, 0, b"a"), (0, 1, b"a")))
    assert any("appears 2 times" in v for v in report.violations)


def test_a_producers_values_must_read_back_in_send_order_per_partition() -> None:
    checker = DurabilityChecker(idempotent=True)
    for value in (b"p1", b"p2", b"p3"):
        checker.attempted(value, producer="p")
    checker.attempted(b"q1", producer="q")
    in_order = read((0, 0, b"p1"), (0, 1, b"q1"), (1, 0, b"p2"), (0, 2, b"p3"))
    assert checker.check(in_order).ok
    swapped = read((0, 0, b"p3"), (0, 1, b"p1"))
    [violation] = checker.check(swapped).violations
    assert "b'p1'" in violation and "sent later" in violation


def test_a_value_acknowledged_without_an_offset_only_needs_to_be_there() -> None:
    checker = checker_with((b"a", 0, -1), (b"b", 0, -1))
    report = checker.check(read((0, 7, b"a")))
    [violation] = report.violations
    assert "b'b'" in violation and "lost" in violation
    assert report.lost == [b"b"]
