"""A GroupCoordinator over an in-memory offsets log, for the unit tests: one offsets
partition (so every group lands on it), Trio's mock clock for the timers, a wall clock
the test moves by hand."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, TypeVar

import trio

from minibroker.coordinator.coordinator import GroupCoordinator, JoinRequest
from minibroker.coordinator.group import Answer
from minibroker.coordinator.group_metadata_manager import GroupMetadataManager, OffsetsConfig
from minibroker.coordinator.offsets_log import Acknowledgement, LoggedRecord, TxnProducer
from minibroker.coordinator.rebalance import GroupConfig
from minibroker.protocol.errors import KafkaError
from minibroker.protocol.records.types import DecodedRecord, Record

GROUP = "g"
SESSION_MS = 10_000
REBALANCE_MS = 30_000


class MemoryOffsetsLog:
    """One offsets partition's records in a list; ``fail_with`` makes appends fail."""

    def __init__(self) -> None:
        self.records: list[DecodedRecord] = []
        self.epoch: int | None = 0
        self.fail_with: KafkaError | None = None
        self.append_gate: trio.Event | None = None
        """When set to an unset Event, appends wait for it (a slow acks=all)."""
        self.held_acks: list[trio.Event] | None = None
        """When a list, each append's acknowledgement waits for an Event it adds there
        (the test completes them in any order)."""
        self.high_watermarks: dict[tuple[str, int], int] = {}
        self.producers: dict[int, int] = {}  # offset -> transactional producer id (-1: none)
        self.markers: dict[int, tuple[int, bool]] = {}  # offset -> (producer id, committed)

    def leader_epoch(self, partition: int) -> int | None:
        return self.epoch

    def append(
        self, partition: int, records: Sequence[Record], *, producer: TxnProducer | None = None
    ) -> Acknowledgement:
        failure = self.fail_with
        if failure is None:
            for r in records:
                offset = len(self.records)
                self.records.append(DecodedRecord(offset, r.timestamp or 0, r.key, r.value))
                self.producers[offset] = -1 if producer is None else producer.producer_id
        gate = self.append_gate
        if self.held_acks is not None:
            gate = trio.Event()
            self.held_acks.append(gate)

        async def acknowledged() -> KafkaError | None:
            if gate is not None:
                await gate.wait()
            return failure

        return acknowledged

    def write_marker(self, producer_id: int, committed: bool) -> None:
        """A transaction's marker, as the partition leader would append it."""
        self.markers[len(self.records)] = (producer_id, committed)
        self.records.append(DecodedRecord(len(self.records), 0, None, None))

    def read_logged(self, partition: int) -> Iterator[LoggedRecord | None]:
        for record in list(self.records):
            if record.offset in self.markers:
                producer_id, committed = self.markers[record.offset]
                yield LoggedRecord(record, producer_id, True, committed)
                continue
            producer_id = self.producers.get(record.offset, -1)
            yield LoggedRecord(record, producer_id, producer_id >= 0)
        yield None

    def high_watermark(self, topic: str, partition: int) -> int | None:
        return self.high_watermarks.get((topic, partition))


class WallClock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


def make_coordinator(
    log: MemoryOffsetsLog | None = None,
    *,
    initial_delay_ms: int = 0,
    zero_delay_round_s: float = 0.0,
    retention_ms: int = 60_000,
    wall: WallClock | None = None,
) -> GroupCoordinator:
    wall = wall or WallClock()
    manager = GroupMetadataManager(
        log or MemoryOffsetsLog(),
        OffsetsConfig(num_partitions=1, retention_ms=retention_ms, metadata_max_bytes=100),
        clock=wall,
    )
    return GroupCoordinator(
        manager,
        GroupConfig(
            min_session_timeout_ms=1000,
            max_session_timeout_ms=60_000,
            initial_rebalance_delay_ms=initial_delay_ms,
            zero_delay_round_s=zero_delay_round_s,
        ),
        clock=wall,
    )


@contextlib.asynccontextmanager
async def running(coordinator: GroupCoordinator, *, owned: bool = True) -> AsyncIterator[None]:
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        if owned:
            await coordinator.membership.partition_led(0, 0)
        yield
        nursery.cancel_scope.cancel()


def join_request(
    member_id: str = "",
    *,
    instance_id: str | None = None,
    protocols: list[tuple[str, bytes]] | None = None,
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
    protocol_type: str = "consumer",
) -> JoinRequest:
    return JoinRequest(
        group_id=GROUP,
        member_id=member_id,
        group_instance_id=instance_id,
        client_id="client",
        client_host="",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=protocol_type,
        protocols=protocols if protocols is not None else [("range", b"meta")],
    )


async def settle() -> None:
    """Let every runnable task run (the mock clock does not move)."""
    await trio.testing.wait_all_tasks_blocked()


async def member_id_for(coordinator: GroupCoordinator, **kwargs: Any) -> str:
    """The MEMBER_ID_REQUIRED round trip: the id a new member must join with."""
    answer = coordinator.join_group(join_request(**kwargs))
    body = answer.get()
    assert body is not None and body["error_code"] == 79, body
    member_id: str = body["member_id"]
    return member_id


T = TypeVar("T")


def answered(answer: Answer[T]) -> T:
    body = answer.get()
    assert body is not None, "the request is still parked"
    return body
