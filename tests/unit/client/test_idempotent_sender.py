"""The idempotent producer against a fake leader whose partition is a real Log.

The fake answers Produce the way a leader does (producer state and all), and can lose
answers after writing, reorder requests, forget the producer, or fence it, so these
tests pin what the client does in each case: every record once, in send order.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker.client.producer import Producer
from minibroker.protocol.api import ApiKey, PackedBody
from minibroker.protocol.errors import (
    ConfigError,
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    KafkaError,
    NetworkError,
    UnsupportedVersionError,
)
from minibroker.protocol.records import decode_records, iter_headers
from minibroker.storage.log import Log
from tests.unit.client.test_sender import FakeCluster, _metadata, body_dict
from tests.unit.storage.batches import SMALL, read_all


class FakeLeader(FakeCluster):
    """One partition ``t-0`` on a real Log; hooks decide each request's fate."""

    def __init__(self, directory: Path) -> None:
        super().__init__(_metadata([1]))
        self.log = Log(directory, SMALL, clock=lambda: 1_000)
        self.lose_answer_every = 0  # lose the answer of every Nth produce, after writing
        self.slow_every = 0  # every Nth produce waits ``slow_s`` before the append, so
        self.slow_s = 0.005  # the requests behind it overtake it
        self.produces = 0
        self.epochs_seen: set[int] = set()
        self.next_producer_id = 4000
        self.answers: Counter[str] = Counter()  # error names, and "duplicate"

    async def request_any(self, api_key: ApiKey, body: dict[str, Any], **kw: Any) -> Any:
        assert api_key == ApiKey.INIT_PRODUCER_ID
        self.next_producer_id += 1
        return {"error_code": 0, "producer_id": self.next_producer_id, "producer_epoch": 0}

    async def request(
        self, node: int, api_key: ApiKey, body: dict[str, Any] | PackedBody, **kw: Any
    ) -> Any:
        assert api_key == ApiKey.PRODUCE
        body = body_dict(body)
        self.produces += 1
        number = self.produces
        if self.slow_every and number % self.slow_every == 1:
            await trio.sleep(self.slow_s)
        [partition] = body["topics"][0]["partitions"]
        index = partition["index"]  # every partition shares the one log: tests use one
        for _, header in iter_headers(partition["records"]):
            self.epochs_seen.add(header.producer_epoch)
        try:
            info = self.log.append(bytearray(partition["records"]), leader_epoch=0)
        except KafkaError as exc:
            self.answers[exc.name] += 1
            answer = {"index": index, "error_code": exc.code, "error_message": exc.message}
        else:
            self.answers["duplicate"] += info.duplicate
            answer = {"index": index, "error_code": 0, "base_offset": info.first_offset}
        if self.lose_answer_every and number % self.lose_answer_every == 0:
            raise NetworkError("the answer was lost on the way back")
        return {"topics": [{"name": "t", "partitions": [answer]}]}

    def values(self) -> list[bytes | None]:
        return [value for _, value in read_all(self.log)]


def producer_for(leader: FakeLeader, **options: Any) -> Producer:
    options = {"acks": "all", "linger_ms": 0, "batch_size": 120, "retry_backoff_ms": 1} | options
    producer = Producer("127.0.0.1:9", **options)
    producer.cluster = producer._sender.cluster = leader  # type: ignore[assignment]
    return producer


async def send_all(producer: Producer, count: int) -> list[int]:
    deliveries = []
    for i in range(count):
        deliveries.append(producer.send_nowait("t", b"%05d" % i))
        if i % 7 == 0:
            await trio.sleep(0)  # let batches leave while others fill
    await producer.flush()
    return [(await d.result()).offset for d in deliveries]


def test_idempotence_is_on_by_default_with_acks_all_only() -> None:
    assert Producer("h:1").enable_idempotence
    assert not Producer("h:1", acks=1).enable_idempotence
    assert not Producer("h:1", acks="all", enable_idempotence=False).enable_idempotence
    with pytest.raises(ConfigError):
        Producer("h:1", acks=1, enable_idempotence=True)


@pytest.mark.timeout(20)
async def test_answers_lost_after_the_write_never_duplicate_a_record(tmp_path: Path) -> None:
    leader = FakeLeader(tmp_path / "t-0")
    leader.lose_answer_every = 3
    async with producer_for(leader) as producer:
        offsets = await send_all(producer, 300)
    expected = [b"%05d" % i for i in range(300)]
    assert leader.values() == expected
    assert offsets == list(range(300))  # duplicates answered with the original offsets
    assert leader.answers["duplicate"] > 0


@pytest.mark.timeout(20)
async def test_requests_that_overtake_each_other_still_land_in_send_order(tmp_path: Path) -> None:
    leader = FakeLeader(tmp_path / "t-0")
    leader.slow_every = 4
    leader.lose_answer_every = 11
    async with producer_for(leader) as producer:
        offsets = await send_all(producer, 400)
    assert leader.values() == [b"%05d" % i for i in range(400)], leader.answers
    assert offsets == list(range(400))
    # They did overtake: refused as a gap, or (before the first batch) as unknown.
    refused = leader.answers["OUT_OF_ORDER_SEQUENCE_NUMBER"] + leader.answers["UNKNOWN_PRODUCER_ID"]
    assert refused > 0, leader.answers


@pytest.mark.timeout(20)
async def test_a_leader_that_forgot_the_producer_gets_a_new_epoch_from_zero(
    tmp_path: Path,
) -> None:
    leader = FakeLeader(tmp_path / "t-0")
    async with producer_for(leader) as producer:
        await send_all(producer, 50)
        leader.log.producer_state.clear(leader.log.log_end_offset)  # e.g. expired
        first = await producer.send("t", b"after")
    assert first.offset == 50
    assert leader.epochs_seen == {0, 1}
    assert leader.values()[-1] == b"after"


@pytest.mark.timeout(20)
async def test_a_fenced_producer_fails_every_pending_delivery(tmp_path: Path) -> None:
    leader = FakeLeader(tmp_path / "t-0")
    async with producer_for(leader, linger_ms=50) as producer:
        await producer.send("t", b"first")
        state = leader.log.producer_state.producers
        [entry] = state.values()
        entry.epoch = 9  # another producer with our id and a newer epoch wrote here
        deliveries = [producer.send_nowait("t", b"%d" % i) for i in range(30)]
        await producer.flush()  # returns once every record has its outcome
    for delivery in deliveries:
        with pytest.raises(InvalidProducerEpochError):
            await delivery.result()
    assert [r.value for r in decode_records(leader.log.read(0, 1 << 20).records)] == [b"first"]


@pytest.mark.timeout(20)
async def test_records_waiting_for_metadata_are_not_overtaken_by_later_ones(
    tmp_path: Path,
) -> None:
    leader = FakeLeader(tmp_path / "t-0")
    known = leader.metadata
    answered = trio.Event()

    async def slow_topic(name: str, *, timeout_s: float) -> Any:
        await answered.wait()
        return known.topics[name]

    leader.topic = slow_topic  # type: ignore[attr-defined]
    async with producer_for(leader) as producer:
        leader.metadata = dataclasses.replace(known, topics={})  # a broker that forgot it
        first = producer.send_nowait("t", b"first")
        leader.metadata = known  # a later refresh knows it again
        second = producer.send_nowait("t", b"second")
        answered.set()
        await producer.flush()
        assert [(await d.result()).offset for d in (first, second)] == [0, 1]
    assert leader.values() == [b"first", b"second"]


@pytest.mark.timeout(20)
async def test_a_partition_missing_from_partial_metadata_waits_for_it(tmp_path: Path) -> None:
    leader = FakeLeader(tmp_path / "t-0")
    full = _metadata([1, 1, 1])
    partial = _metadata([1, 1])  # a broker that just restarted lists only some
    leader.metadata = partial
    refreshes = 0

    async def topic(name: str, *, timeout_s: float) -> Any:
        nonlocal refreshes
        refreshes += 1
        if refreshes == 3:
            leader.metadata = full
        return leader.metadata.topics[name]

    leader.topic = topic  # type: ignore[attr-defined]
    async with producer_for(leader) as producer:
        delivery = producer.send_nowait("t", b"late", partition=2)
        await producer.flush()
        assert (await delivery.result()).partition == 2
    assert refreshes == 3


@pytest.mark.timeout(20)
async def test_duplicate_sequence_number_is_a_success_with_an_unknown_offset(
    tmp_path: Path,
) -> None:
    leader = FakeLeader(tmp_path / "t-0")

    async def already_written(node: int, api_key: ApiKey, body: dict[str, Any], **kw: Any) -> Any:
        code = DuplicateSequenceNumberError.code
        return {"topics": [{"name": "t", "partitions": [{"index": 0, "error_code": code}]}]}

    leader.request = already_written  # type: ignore[method-assign]
    async with producer_for(leader) as producer:
        metadata = await producer.send("t", b"v")
    assert metadata.offset == -1


@pytest.mark.timeout(20)
async def test_without_init_producer_id_a_default_idempotence_turns_itself_off(
    tmp_path: Path,
) -> None:
    leader = FakeLeader(tmp_path / "t-0")

    async def unsupported(api_key: ApiKey, body: dict[str, Any], **kw: Any) -> Any:
        raise UnsupportedVersionError("INIT_PRODUCER_ID: UNSUPPORTED_VERSION")

    leader.request_any = unsupported  # type: ignore[method-assign]
    async with producer_for(leader) as producer:
        assert (await producer.send("t", b"v")).offset == 0
        assert not producer.enable_idempotence
    async with producer_for(leader, enable_idempotence=True) as producer:
        with pytest.raises(UnsupportedVersionError):
            await producer.send("t", b"w")
