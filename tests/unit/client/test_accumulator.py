"""The accumulator batches per partition, seals at batch_size and completes deliveries."""

from __future__ import annotations

import pytest
import trio

from minibroker.client.accumulator import RecordAccumulator, new_delivery
from minibroker.protocol.errors import NotLeaderOrFollowerError
from minibroker.protocol.records import Compression, decode_batch


def _accumulator(
    batch_size: int = 1000, linger_s: float = 0.005
) -> tuple[RecordAccumulator, list[tuple[str, int]]]:
    closed: list[tuple[str, int]] = []
    acc = RecordAccumulator(
        batch_size=batch_size,
        linger_s=linger_s,
        delivery_timeout_s=120.0,
        on_batch_closed=lambda t, p: closed.append((t, p)),
        wall_clock_ms=lambda: 1_700_000_000_000,
    )
    return acc, closed


async def test_records_of_one_partition_share_a_batch_until_it_is_full() -> None:
    acc, closed = _accumulator(batch_size=61 + 3 * 22)
    first, i0 = acc.append("t", 0, b"x" * 10, None, None, None)
    same, i1 = acc.append("t", 0, b"y" * 10, None, None, None)
    assert same is first and (i0, i1) == (0, 1)
    assert not first.sealed
    acc.append("t", 0, b"z" * 10, None, None, None)
    assert first.sealed and closed == [("t", 0)]
    nxt, index = acc.append("t", 0, b"w", None, None, None)
    assert nxt is not first and index == 0


async def test_partitions_get_separate_batches() -> None:
    acc, _ = _accumulator()
    a, _ = acc.append("t", 0, b"a", None, None, None)
    b, _ = acc.append("t", 1, b"b", None, None, None)
    c, _ = acc.append("u", 0, b"c", None, None, None)
    assert len({id(a), id(b), id(c)}) == 3
    assert acc.pending_batches == 3


async def test_values_only_batch_uses_fast_path_and_decodes_back() -> None:
    acc, _ = _accumulator()
    batch, _ = acc.append("t", 0, b"one", None, None, None)
    acc.append("t", 0, b"two", None, None, None)
    assert batch.keys is None and batch.headers is None and batch.timestamps is None
    _, records = decode_batch(batch.encode(Compression.NONE))
    assert [r.value for r in records] == [b"one", b"two"]
    assert all(r.timestamp == 1_700_000_000_000 and r.key is None for r in records)


async def test_a_null_value_in_a_values_only_batch_stays_null() -> None:
    acc, _ = _accumulator()
    batch, _ = acc.append("t", 0, b"v0", None, None, None)
    acc.append("t", 0, None, None, None, None)  # a tombstone
    assert batch.simple
    _, records = decode_batch(batch.encode(Compression.NONE))
    assert [r.value for r in records] == [b"v0", None]


async def test_mixed_batch_keeps_keys_headers_and_timestamps_per_record() -> None:
    acc, _ = _accumulator()
    batch, _ = acc.append("t", 0, b"v0", None, None, None)
    acc.append("t", 0, b"v1", b"k1", (("h", b"1"),), 42)
    acc.append("t", 0, None, b"k2", None, None)
    _, records = decode_batch(batch.encode(Compression.GZIP))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in records] == [
        (None, b"v0", (), 1_700_000_000_000),
        (b"k1", b"v1", (("h", b"1"),), 42),
        (b"k2", None, (), 1_700_000_000_000),
    ]


async def test_delivery_reports_base_offset_plus_index_once_the_batch_completes() -> None:
    acc, _ = _accumulator()
    batch, _ = acc.append("t", 3, b"a", None, None, None)
    _, index = acc.append("t", 3, b"b", None, None, None)
    delivery = new_delivery(batch, index)
    assert not delivery.done()
    acc.finish(batch, base_offset=100)
    meta = await delivery.result()
    assert (meta.topic, meta.partition, meta.offset) == ("t", 3, 101)
    assert acc.pending_batches == 0


async def test_failed_batch_raises_its_error_from_every_delivery() -> None:
    acc, _ = _accumulator()
    batch, _ = acc.append("t", 0, b"a", None, None, None)
    acc.finish(batch, NotLeaderOrFollowerError("t-0: gone"))
    with pytest.raises(NotLeaderOrFollowerError, match="t-0"):
        await new_delivery(batch, 0).result()


async def test_open_batch_is_ready_after_linger_and_sealed_one_at_once() -> None:
    acc, _ = _accumulator(batch_size=100, linger_s=0.5)
    batch, _ = acc.append("t", 0, b"a", None, None, None)
    assert acc.head_ready_at(batch) == pytest.approx(batch.created + 0.5)
    acc.append("t", 0, b"b" * 100, None, None, None)
    assert acc.head_ready_at(batch) == 0.0


async def test_retried_batch_goes_back_to_the_head_of_its_partition() -> None:
    acc, _ = _accumulator(batch_size=70)
    first, _ = acc.append("t", 0, b"a" * 10, None, None, None)
    second, _ = acc.append("t", 0, b"b", None, None, None)
    [(_, _, queue)] = list(acc.partitions_with_batches())
    assert queue.popleft() is first
    first.attempts = 1
    acc.reenqueue(first, trio.current_time() + 1.0)
    assert list(queue) == [first, second]
    assert acc.head_ready_at(first) == first.retry_at


async def test_flush_waits_until_every_batch_finished() -> None:
    acc, _ = _accumulator()
    batch, _ = acc.append("t", 0, b"a", None, None, None)
    finished = False

    async def finish_later() -> None:
        nonlocal finished
        await trio.sleep(0.01)
        finished = True
        acc.finish(batch, base_offset=0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(finish_later)
        with trio.fail_after(5):
            await acc.wait_idle()
    assert finished


async def test_expire_removes_batches_past_their_delivery_deadline() -> None:
    acc, _ = _accumulator()
    batch, _ = acc.append("t", 0, b"a", None, None, None)
    assert acc.expire(batch.deadline - 1) == []
    assert acc.expire(batch.deadline) == [batch]


async def test_a_record_that_would_overflow_the_batch_opens_the_next_one() -> None:
    acc, closed = _accumulator(batch_size=61 + 2 * 22)  # room for two 10-byte values
    first, _ = acc.append("t", 0, b"x" * 10, None, None, None)
    acc.append("t", 0, b"y" * 10, None, None, None)
    third, index = acc.append("t", 0, b"z" * 30, None, None, None)
    assert third is not first and index == 0
    assert len(first) == 2 and first.size <= acc.batch_size
    assert closed == [("t", 0)]


async def test_an_oversized_record_travels_alone_in_its_own_batch() -> None:
    acc, _ = _accumulator(batch_size=100)
    big, _ = acc.append("t", 0, b"x" * 500, None, None, None)
    assert big.sealed and len(big) == 1
    after, _ = acc.append("t", 0, b"y", None, None, None)
    assert after is not big
