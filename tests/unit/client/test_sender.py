"""The sender groups batches per leader and retries, against a fake cluster (no network)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
import trio

from minibroker.client.metadata import BrokerNode, ClusterMetadata, PartitionInfo, TopicInfo
from minibroker.client.producer import Producer
from minibroker.client.sender import RESPONSE_MARGIN_S
from minibroker.protocol.api import ApiKey, PackedBody
from minibroker.protocol.errors import (
    KafkaError,
    MessageTooLargeError,
    NetworkError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from minibroker.protocol.records import decode_batch

Answer = Callable[[int, dict[str, Any]], dict[str, Any]]


def _metadata(leaders: list[int]) -> ClusterMetadata:
    brokers = {n: BrokerNode(n, "127.0.0.1", 9000 + n) for n in (1, 2)}
    parts = tuple(
        PartitionInfo("t", p, leader, 0, (1, 2), (1, 2)) for p, leader in enumerate(leaders)
    )
    return ClusterMetadata(brokers, {"t": TopicInfo("t", parts)}, controller_id=1)


def body_dict(body: dict[str, Any] | PackedBody) -> dict[str, Any]:
    """A request body as the broker reads it (the sender packs one-batch bodies itself)."""
    if isinstance(body, PackedBody):
        unpacked: dict[str, Any] = msgpack.unpackb(b"".join(body.parts))
        return unpacked
    return body


def ok_answer(node: int, body: dict[str, Any]) -> dict[str, Any]:
    """Every partition succeeds with base offset 100 * partition."""
    return {
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {"index": p["index"], "error_code": 0, "base_offset": 100 * p["index"]}
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ]
    }


class FakeCluster:
    """Stands in for ClusterClient: answers Produce with ``answer`` and records requests."""

    def __init__(self, metadata: ClusterMetadata, answer: Answer = ok_answer) -> None:
        self.metadata = metadata
        self.answer = answer
        self.requests: list[tuple[int, dict[str, Any]]] = []
        self.updates = 0
        self.calls_here = 0  # requests sent and awaited by the caller's own task
        self.topics: set[str] = set()
        self._wire: trio.Nursery  # where calls are answered (run()'s nursery)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._wire = nursery
            task_status.started()
            await trio.sleep_forever()

    def request_update(self) -> None:
        self.updates += 1

    async def request(
        self, node: int, api_key: ApiKey, body: dict[str, Any] | PackedBody, **kw: Any
    ) -> Any:
        assert api_key == ApiKey.PRODUCE
        body = body_dict(body)
        self.requests.append((node, body))
        await trio.sleep(0)
        return self.answer(node, body)

    def usable_connection(self, node: int) -> FakeConnection:
        """Every broker counts as connected: ``send`` takes the caller-task path."""
        return FakeConnection(node)

    async def response(self, call: FakeCall, *, bounded: bool = True) -> Any:
        """A call sent from the caller's task, answered as ``request`` answers. Like a
        request on the wire, it is made once however many tasks wait for it."""
        if call.answered is None:
            self.calls_here += 1
            call.answered = trio.Event()
            self._wire.start_soon(call.ask, self)
        await call.answered.wait()
        if isinstance(call.outcome, KafkaError):
            raise call.outcome
        return call.outcome

    async def time_out(self, call: FakeCall) -> None:
        """Like a broken connection: the call fails with NetworkError."""
        if call.answered is not None and not call.answered.is_set():
            call.outcome = NetworkError("no response within the request timeout")
            call.answered.set()


@dataclasses.dataclass(eq=False)
class FakeCall:
    node: int
    api_key: ApiKey
    body: dict[str, Any]
    deadline: float
    answered: trio.Event | None = None
    outcome: Any = None

    async def ask(self, cluster: FakeCluster) -> None:
        try:
            outcome = await cluster.request(self.node, self.api_key, self.body)
        except KafkaError as exc:
            outcome = exc
        assert self.answered is not None
        if not self.answered.is_set():  # not timed out meanwhile
            self.outcome = outcome
            self.answered.set()

    def abandon(self) -> None:
        pass


@dataclasses.dataclass
class FakeConnection:
    node: int

    def call(
        self,
        api_key: ApiKey,
        body: dict[str, Any] | PackedBody,
        *,
        version: int | None = None,
        timeout: float,
    ) -> FakeCall:
        return FakeCall(self.node, api_key, body_dict(body), trio.current_time() + timeout)


def _producer(cluster: FakeCluster, **options: Any) -> Producer:
    options = {"acks": 1, "linger_ms": 1000, "retry_backoff_ms": 1} | options
    producer = Producer("127.0.0.1:9", **options)
    producer.cluster = producer._sender.cluster = cluster  # type: ignore[assignment]
    return producer


def _partitions_by_node(cluster: FakeCluster) -> dict[int, list[int]]:
    return {
        node: sorted(p["index"] for t in body["topics"] for p in t["partitions"])
        for node, body in cluster.requests
    }


@pytest.mark.timeout(10)
async def test_batches_of_partitions_with_one_leader_share_one_request() -> None:
    cluster = FakeCluster(_metadata([1, 2, 1, 2]))
    async with _producer(cluster) as producer:
        deliveries = [producer.send_nowait("t", b"v", partition=p) for p in range(4)]
        await producer.flush()
    assert _partitions_by_node(cluster) == {1: [0, 2], 2: [1, 3]}
    assert len(cluster.requests) == 2
    assert [(await d.result()).offset for d in deliveries] == [0, 100, 200, 300]


@pytest.mark.timeout(10)
async def test_not_leader_is_retried_after_a_metadata_update() -> None:
    calls = 0

    def answer(node: int, body: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            code = NotLeaderOrFollowerError.code
            return {"topics": [{"name": "t", "partitions": [{"index": 0, "error_code": code}]}]}
        return ok_answer(node, body)

    cluster = FakeCluster(_metadata([1]), answer)
    async with _producer(cluster) as producer:
        delivery = producer.send_nowait("t", b"v")
        await producer.flush()
    assert (await delivery.result()).offset == 0
    assert calls == 2 and cluster.updates >= 1


@pytest.mark.timeout(10)
async def test_a_lost_connection_is_retried() -> None:
    failures = [NetworkError("connection reset")]

    async def flaky(
        node: int, api_key: ApiKey, body: dict[str, Any] | PackedBody, **kw: Any
    ) -> Any:
        if failures:
            raise failures.pop()
        return ok_answer(node, body_dict(body))

    cluster = FakeCluster(_metadata([2]))
    cluster.request = flaky  # type: ignore[method-assign]
    async with _producer(cluster) as producer:
        assert (await producer.send("t", b"v")).offset == 0


@pytest.mark.timeout(10)
async def test_non_retriable_error_fails_the_records_naming_the_partition() -> None:
    def answer(node: int, body: dict[str, Any]) -> dict[str, Any]:
        code = MessageTooLargeError.code
        return {"topics": [{"name": "t", "partitions": [{"index": 0, "error_code": code}]}]}

    cluster = FakeCluster(_metadata([1]), answer)
    async with _producer(cluster) as producer:
        with pytest.raises(MessageTooLargeError, match="t-0"):
            await producer.send("t", b"v")
    assert len(cluster.requests) == 1


@pytest.mark.timeout(10)
async def test_records_without_a_leader_fail_at_the_delivery_timeout() -> None:
    cluster = FakeCluster(_metadata([-1]))
    async with _producer(cluster, delivery_timeout_ms=200, linger_ms=0) as producer:
        with pytest.raises(RequestTimedOutError, match="t-0"):
            await producer.send("t", b"v")
    assert cluster.requests == [] and cluster.updates >= 1


@pytest.mark.timeout(10)
async def test_a_full_batch_is_sent_without_waiting_for_linger() -> None:
    cluster = FakeCluster(_metadata([1]))
    async with _producer(cluster, batch_size=200) as producer:
        deliveries = [producer.send_nowait("t", b"x" * 50) for _ in range(4)]
        with trio.fail_after(5):  # linger is 1000 ms: only the size can trigger the send
            await deliveries[0].result()
        await producer.flush()


@pytest.mark.timeout(10)
async def test_a_retried_batch_keeps_its_place_in_the_partition() -> None:
    """The third request fails once; every record still lands in send order."""
    log: list[bytes] = []
    calls = 0
    in_flight: set[int] = set()

    async def write(
        node: int, api_key: ApiKey, body: dict[str, Any] | PackedBody, **kw: Any
    ) -> Any:
        nonlocal calls
        calls += 1
        [partition] = body_dict(body)["topics"][0]["partitions"]
        assert partition["index"] not in in_flight, "two batches of a partition in flight"
        in_flight.add(partition["index"])
        await trio.sleep(0.001 * (calls % 3))  # answers take varying time
        in_flight.discard(partition["index"])
        if calls == 3:
            code = NotLeaderOrFollowerError.code
            return {"topics": [{"name": "t", "partitions": [{"index": 0, "error_code": code}]}]}
        base = len(log)
        log.extend(r.value for r in decode_batch(partition["records"])[1] if r.value)
        return {"topics": [{"name": "t", "partitions": [{"index": 0, "base_offset": base}]}]}

    cluster = FakeCluster(_metadata([1]))
    cluster.request = write  # type: ignore[method-assign]
    async with _producer(cluster, batch_size=100, linger_ms=0, max_in_flight=5) as producer:
        deliveries = []
        for i in range(200):  # batches keep opening while earlier ones are in flight
            deliveries.append(producer.send_nowait("t", b"%04d" % i))
            await trio.sleep(0)
        await producer.flush()
    assert log == [b"%04d" % i for i in range(200)]
    assert [(await d.result()).offset for d in deliveries] == list(range(200))


@pytest.mark.timeout(10)
async def test_closing_on_an_error_fails_records_in_flight_instead_of_hanging() -> None:
    async def never(node: int, api_key: ApiKey, body: dict[str, Any], **kw: Any) -> Any:
        await trio.sleep_forever()

    cluster = FakeCluster(_metadata([1]))
    cluster.request = never  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="application bug"):
        async with _producer(cluster, linger_ms=0) as producer:
            delivery = producer.send_nowait("t", b"v")
            await trio.sleep(0.05)  # the request is in flight now
            raise RuntimeError("application bug")
    with pytest.raises(KafkaError, match="closed while sending"):
        await delivery.result()


@pytest.mark.timeout(10)
async def test_closing_on_an_error_fails_records_still_waiting_for_metadata() -> None:
    cluster = FakeCluster(_metadata([1]))

    async def no_metadata(name: str, *, timeout_s: float) -> Any:
        await trio.sleep_forever()

    cluster.topic = no_metadata  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError):
        async with _producer(cluster) as producer:
            delivery = producer.send_nowait("unknown-yet", b"v")
            raise RuntimeError
    with pytest.raises(KafkaError, match="unknown-yet"):
        await delivery.result()


@pytest.mark.timeout(10)
async def test_a_send_with_no_linger_is_sent_and_awaited_by_the_callers_own_task() -> None:
    cluster = FakeCluster(_metadata([1, 2]))
    async with _producer(cluster, linger_ms=0) as producer:
        first = await producer.send("t", b"a", partition=1)
        second = await producer.send("t", b"b", partition=1)
    assert (first.partition, first.offset) == (second.partition, second.offset) == (1, 100)
    assert cluster.calls_here == 2 and len(cluster.requests) == 2


@pytest.mark.timeout(10)
async def test_a_send_cancelled_while_awaiting_its_answer_still_delivers_the_record() -> None:
    release = trio.Event()
    answered: list[bytes | None] = []

    class GatedCluster(FakeCluster):
        async def request(
            self, node: int, api_key: ApiKey, body: dict[str, Any] | PackedBody, **kw: Any
        ) -> Any:
            body = body_dict(body)
            self.requests.append((node, body))
            await release.wait()
            [partition] = body["topics"][0]["partitions"]
            answered.extend(r.value for r in decode_batch(partition["records"])[1])
            return self.answer(node, body)

    cluster = GatedCluster(_metadata([1]))
    async with _producer(cluster, linger_ms=0) as producer:
        with trio.move_on_after(0.05) as scope:
            await producer.send("t", b"cut short")
        assert scope.cancelled_caught
        release.set()
        await producer.send("t", b"next")
        await producer.flush()
        assert producer._acc.pending_batches == 0  # the cut-short record's batch completed
    assert answered == [b"cut short", b"next"]  # each sent once, in order


@pytest.mark.timeout(10)
async def test_a_send_whose_answer_never_comes_is_timed_out_by_the_drain_loop_and_retried(
    autojump_clock: trio.testing.MockClock,
) -> None:
    attempts: list[float] = []

    class SilentOnceCluster(FakeCluster):
        async def request(
            self, node: int, api_key: ApiKey, body: dict[str, Any] | PackedBody, **kw: Any
        ) -> Any:
            attempts.append(trio.current_time())
            if len(attempts) == 1:
                await trio.sleep_forever()  # this answer is lost
            return self.answer(node, body_dict(body))

    cluster = SilentOnceCluster(_metadata([1]))
    async with _producer(cluster, linger_ms=0, request_timeout_ms=1000) as producer:
        started = trio.current_time()
        metadata = await producer.send("t", b"v")
    assert metadata.offset == 0
    assert len(attempts) == 2  # the first timed out at its deadline, the retry answered
    # request timeout plus the sender's margin, then the retry backoff
    assert attempts[1] - started == pytest.approx(1.0 + RESPONSE_MARGIN_S + 0.001, abs=0.01)


@pytest.mark.timeout(10)
async def test_closing_fails_a_send_another_task_still_awaits_without_counting_it_twice() -> None:
    class SilentCluster(FakeCluster):
        async def request(self, node: int, api_key: ApiKey, body: dict[str, Any], **kw: Any) -> Any:
            await trio.sleep_forever()

    errors: list[KafkaError] = []

    async def send_one(producer: Producer) -> None:
        try:
            await producer.send("t", b"never answered")
        except KafkaError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        with pytest.raises(RuntimeError):
            async with _producer(SilentCluster(_metadata([1])), linger_ms=0) as producer:
                nursery.start_soon(send_one, producer)
                await trio.testing.wait_all_tasks_blocked()
                raise RuntimeError("leave the block without flushing")
    assert len(errors) == 1  # the connection broken at close, or abort_in_flight()
    assert producer._acc.pending_batches == 0
