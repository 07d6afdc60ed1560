"""The consumer's buffering and positions, fed fabricated Fetch answers (no network)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from minibroker.client.consumer import Consumer
from minibroker.client.metadata import BrokerNode, ClusterMetadata, PartitionInfo, TopicInfo
from minibroker.protocol.errors import CorruptMessageError, OffsetOutOfRangeError
from minibroker.protocol.records import Record, encode_batch, encode_values


def _batch(base: int, values: list[bytes]) -> bytes:
    return encode_values(values, timestamp=1000, base_offset=base)


def _answer(partitions: dict[int, tuple[int, bytes]]) -> dict[str, Any]:
    """A Fetch response body for topic "t": partition -> (error_code, records)."""
    return {
        "topics": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": p,
                        "error_code": code,
                        "high_watermark": 99,
                        "records": records,
                    }
                    for p, (code, records) in partitions.items()
                ],
            }
        ]
    }


def _consumer(*partitions: int, reset: str = "latest") -> Consumer:
    consumer = Consumer("127.0.0.1:9", auto_offset_reset=reset)
    consumer.assign([("t", p) for p in partitions])
    return consumer


def _feed(consumer: Consumer, partitions: dict[int, tuple[int, bytes]]) -> None:
    generations = {tp: s.generation for tp, s in consumer._states.items()}
    consumer._handle_fetch(_answer(partitions), generations)


async def test_records_before_the_position_in_the_first_batch_are_skipped() -> None:
    consumer = _consumer(0)
    consumer.seek("t", 0, 12)
    _feed(consumer, {0: (0, _batch(10, [b"a", b"b", b"c", b"d"]))})
    records = await consumer.poll(0)
    assert [(r.offset, r.value) for r in records] == [(12, b"c"), (13, b"d")]
    assert consumer.position("t", 0) == 14
    assert consumer.high_watermark("t", 0) == 99


async def test_max_records_splits_a_batch_and_the_next_poll_resumes() -> None:
    consumer = _consumer(0)
    consumer.seek("t", 0, 0)
    _feed(consumer, {0: (0, _batch(0, [b"%d" % i for i in range(5)]))})
    assert [r.offset for r in await consumer.poll(0, max_records=2)] == [0, 1]
    assert consumer.position("t", 0) == 2
    assert [r.offset for r in await consumer.poll(0, max_records=10)] == [2, 3, 4]


async def test_fetch_offset_moves_past_whole_batches_only() -> None:
    consumer = _consumer(0)
    consumer.seek("t", 0, 0)
    whole = _batch(0, [b"x", b"y"])
    torn = _batch(2, [b"z"])[:-3]  # a partial trailing batch (cut by partition_max_bytes)
    _feed(consumer, {0: (0, whole + torn)})
    assert consumer._states[("t", 0)].fetch_offset == 2
    assert [r.offset for r in await consumer.poll(0)] == [0, 1]


async def test_seek_drops_buffered_records_and_ignores_stale_answers() -> None:
    consumer = _consumer(0)
    consumer.seek("t", 0, 0)
    stale = {("t", 0): consumer._states[("t", 0)].generation}
    _feed(consumer, {0: (0, _batch(0, [b"old"]))})
    consumer.seek("t", 0, 50)
    consumer._handle_fetch(_answer({0: (0, _batch(0, [b"older"]))}), stale)
    assert await consumer.poll(0) == []
    _feed(consumer, {0: (0, _batch(50, [b"new"]))})
    assert [r.value for r in await consumer.poll(0)] == [b"new"]


async def test_partitions_take_turns_in_poll() -> None:
    consumer = _consumer(0, 1)
    for p in (0, 1):
        consumer.seek("t", p, 0)
    _feed(consumer, {0: (0, _batch(0, [b"a"])), 1: (0, _batch(0, [b"b"]))})
    _feed(consumer, {0: (0, _batch(1, [b"c"]))})
    seen = [(r.partition, r.value) for r in await consumer.poll(0, max_records=2)]
    assert seen == [(0, b"a"), (1, b"b")]


async def test_out_of_range_resets_the_position_when_reset_is_allowed() -> None:
    consumer = _consumer(0, reset="earliest")
    consumer.seek("t", 0, 500)
    _feed(consumer, {0: (OffsetOutOfRangeError.code, b"")})
    assert consumer.position("t", 0) is None  # the fetch manager looks it up again
    assert await consumer.poll(0) == []


async def test_non_retriable_partition_error_is_raised_with_the_partition() -> None:
    consumer = _consumer(3, reset="none")
    consumer.seek("t", 3, 0)
    _feed(consumer, {3: (OffsetOutOfRangeError.code, b"")})
    with pytest.raises(OffsetOutOfRangeError, match="t-3"):
        await consumer.poll(0)


async def test_corrupt_batch_raises_from_poll_and_is_not_skipped() -> None:
    consumer = _consumer(0)
    consumer.seek("t", 0, 0)
    data = bytearray(encode_batch([Record(b"v", key=b"k")]))
    data[-1] ^= 0xFF  # breaks the CRC
    _feed(consumer, {0: (0, bytes(data))})
    with pytest.raises(CorruptMessageError, match="t-0 at offset 0"):
        await consumer.poll(0)
    assert consumer._states[("t", 0)].fetch_offset == 0  # fetched again, never skipped


async def test_position_counts_records_the_iterator_took_but_has_not_handed_out() -> None:
    consumer = _consumer(0, 1)
    consumer.seek("t", 0, 0)
    consumer.seek("t", 1, 0)
    _feed(consumer, {0: (0, _batch(0, [b"a", b"b", b"c"])), 1: (0, _batch(0, [b"x"]))})
    first = await consumer.__anext__()
    assert (first.partition, first.offset) == (0, 0)
    assert consumer.position("t", 0) == 1  # b and c wait in the iterator: not consumed
    consumer.assign([("t", 0)])  # partition 1 taken away, partition 0 kept
    assert [(await consumer.__anext__()).value for _ in range(2)] == [b"b", b"c"]


async def test_answer_to_a_fetch_from_before_a_partition_was_reassigned_is_ignored() -> None:
    consumer = _consumer(0)
    consumer.seek("t", 0, 0)
    before = {("t", 0): consumer._states[("t", 0)].generation}
    consumer.assign([])
    consumer.assign([("t", 0)])
    consumer.seek("t", 0, 0)
    consumer._handle_fetch(_answer({0: (0, _batch(5, [b"later"]))}), before)
    assert await consumer.poll(0) == []


async def test_records_a_waiting_iterator_receives_after_a_seek_are_handed_out() -> None:
    consumer = _consumer(0, 1)
    consumer.seek("t", 0, 0)
    consumer.seek("t", 1, 0)
    got: list[int] = []

    async def iterate() -> None:
        got.append((await consumer.__anext__()).offset)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(iterate)
            await trio.testing.wait_all_tasks_blocked()
            consumer.seek("t", 1, 5)  # while the iterator waits in poll
            _feed(consumer, {0: (0, _batch(0, [b"a"]))})
    assert got == [0]


async def test_poll_batches_returns_the_bytes_poll_would() -> None:
    fetched = _batch(0, [b"a", b"bb"]) + encode_batch(
        [Record(b"ccc", key=b"k", headers=(("h", b"1"),))], base_offset=2
    )
    by_poll = _consumer(0)
    by_poll.seek("t", 0, 0)
    _feed(by_poll, {0: (0, fetched)})
    by_views = _consumer(0)
    by_views.seek("t", 0, 0)
    _feed(by_views, {0: (0, fetched)})

    records = await by_poll.poll(0)
    views = await by_views.poll_batches(0)

    assert [bytes(v) for view in views for v in view.values()] == [r.value for r in records]
    assert [r for view in views for r in view.records()] == records
    assert [view.headers(0) for view in views][-1] == (("h", b"1"),)
    assert by_views.position("t", 0) == by_poll.position("t", 0) == 3


async def test_poll_batches_hands_out_what_a_partial_poll_left() -> None:
    consumer = _consumer(0)
    consumer.seek("t", 0, 0)
    _feed(consumer, {0: (0, _batch(0, [b"%d" % i for i in range(5)]))})
    assert [r.offset for r in await consumer.poll(0, max_records=2)] == [0, 1]
    (view,) = await consumer.poll_batches(0)
    assert (view.offsets(), [bytes(v) for v in view.values()]) == ([2, 3, 4], [b"2", b"3", b"4"])
    assert consumer.position("t", 0) == 5
    assert await consumer.poll(0) == []


async def test_corrupt_batch_raises_from_poll_batches_and_is_not_skipped() -> None:
    consumer = _consumer(0)
    consumer.seek("t", 0, 0)
    data = bytearray(encode_batch([Record(b"v", key=b"k")]))
    data[-1] ^= 0xFF  # breaks the CRC
    _feed(consumer, {0: (0, bytes(data))})
    with pytest.raises(CorruptMessageError, match=r"t-0 at offset 0.*CRC"):
        await consumer.poll_batches(0)
    assert consumer.position("t", 0) == 0
    assert consumer._states[("t", 0)].fetch_offset == 0  # fetched again, never skipped


async def test_a_seek_made_before_the_planned_reset_runs_is_kept() -> None:
    consumer = _consumer(0)  # no position: the fetch manager plans a reset to "latest"
    consumer.seek("t", 0, 5)  # the application seeks before that reset runs
    asked: list[dict[Any, int]] = []

    async def list_offsets(timestamps: dict[Any, int]) -> dict[Any, tuple[int, int]]:
        asked.append(timestamps)
        return {tp: (60, -1) for tp in timestamps}

    consumer._list_offsets = list_offsets  # type: ignore[method-assign]
    await consumer._reset_positions([("t", 0)])
    assert consumer.position("t", 0) == 5
    assert asked == []


def _led_by_broker_1(consumer: Consumer) -> list[int]:
    """Broker 1 leads t-0; returns the fetch offsets of the Fetches sent to it (the
    first answered with offsets 0-1, later ones never)."""
    leader = PartitionInfo("t", 0, 1, 0, (1,), (1,))
    consumer.cluster.metadata = ClusterMetadata(
        {1: BrokerNode(1, "127.0.0.1", 9)}, {"t": TopicInfo("t", (leader,))}
    )
    asked: list[int] = []

    async def request(node: int, api_key: int, body: dict[str, Any], timeout: float) -> Any:
        asked.append(body["topics"][0]["partitions"][0]["fetch_offset"])
        if len(asked) == 1:
            return _answer({0: (0, _batch(0, [b"a", b"b"]))})
        await trio.sleep_forever()

    consumer.cluster.request = request  # type: ignore[method-assign]
    return asked


async def test_an_answered_fetch_sends_the_next_one_before_poll_decodes_it() -> None:
    consumer = _consumer(0)
    consumer.seek("t", 0, 0)
    asked = _led_by_broker_1(consumer)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer._fetch, 1, [("t", 0)])
            await trio.testing.wait_all_tasks_blocked()
            assert asked == [0, 2]  # nothing polled yet: the next Fetch is already out
            assert [r.offset for r in await consumer.poll(0)] == [0, 1]
            nursery.cancel_scope.cancel()
    assert consumer._in_flight == set()


async def test_an_answer_that_fills_the_buffer_sends_no_next_fetch() -> None:
    consumer = Consumer("127.0.0.1:9", max_partition_fetch_bytes=10)
    consumer.assign([("t", 0)])
    consumer.seek("t", 0, 0)
    asked = _led_by_broker_1(consumer)
    consumer._in_flight.add(1)
    with trio.fail_after(5):
        await consumer._fetch(1, [("t", 0)])
    assert asked == [0]  # the manager asks again once poll has made room
    assert consumer._in_flight == set()
    assert consumer._wakeup.is_set()
    assert [r.offset for r in await consumer.poll(0)] == [0, 1]
