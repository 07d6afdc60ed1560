"""Leader-epoch truncation under crashes at chosen points (KIP-101, KIP-279).

Brokers run in-process over real log dirs; a crash leaves the files as kill -9 would
(no flush, no HW checkpoint, no clean-shutdown marker) and a restart reopens them. The
test plays the controller, so every leader change happens exactly where the scenario
puts it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minibroker.broker.replication import fetcher_truncation, replica_fetcher
from minibroker.broker.replication.partition import Partition
from minibroker.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT
from tests.fault.inprocess import InProcessCluster, records_of
from tests.support.broker import batch

pytestmark = pytest.mark.timeout(60)

NO_HW_CHECKPOINTS = {"replica_high_watermark_checkpoint_interval_ms": 3_600_000}


async def test_acknowledged_record_survives_follower_restart_then_leader_death(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # KIP-101 scenario 1. A follower restarts before it learns the HW that covers an
    # acknowledged record; then the leader dies and the follower leads. Truncating to
    # its HW on restart would drop the record; truncating by epoch keeps it.
    cuts: list[int] = []
    real_truncate = fetcher_truncation.truncate_follower

    def recording_truncate(partition: Partition, offset: int) -> None:
        cuts.append(offset)
        real_truncate(partition, offset)

    # Both modules that cut a follower's log: truncation by epoch, and a fetched batch
    # that straddles our end.
    monkeypatch.setattr(fetcher_truncation, "truncate_follower", recording_truncate)
    monkeypatch.setattr(replica_fetcher, "truncate_follower", recording_truncate)
    async with trio.open_nursery() as nursery:
        # A long follower poll: nothing tells the follower the new HW after the ack.
        properties = {**NO_HW_CHECKPOINTS, "replica_fetch_wait_max_ms": 30_000}
        cluster = InProcessCluster(nursery, tmp_path, properties)
        await cluster.start(1)
        await cluster.start(2)
        await cluster.elect("t", leader=1, replicas=[1, 2])
        ack = await cluster.produce(1, "t", batch(b"acked"), acks=-1)
        assert (ack["error_code"], ack["base_offset"]) == (0, 0)
        assert cluster.partition(1, "t").high_watermark == 1
        assert cluster.partition(2, "t").high_watermark == 0  # not learned yet

        await cluster.crash(2)
        cuts.clear()
        await cluster.start(2)
        await cluster.elect("t", leader=1, replicas=[1, 2])  # it follows again...
        assert cluster.partition(2, "t").high_watermark == 0  # nothing checkpointed it
        await cluster.wait_until(lambda: cuts, "the restarted follower's truncation")
        await cluster.crash(1)  # ...and the leader dies
        assert min(cuts) >= 1  # never cut below the acknowledged record
        await cluster.elect("t", leader=2, replicas=[1, 2], isr=[2])
        assert [r[:2] for r in records_of(cluster.partition(2, "t"))] == [(0, b"acked")]

        later = await cluster.produce(2, "t", batch(b"later"), acks=1)
        assert (later["error_code"], later["base_offset"]) == (0, 1)
        await cluster.start(1)
        await cluster.elect("t", leader=2, replicas=[1, 2], isr=[2])
        await cluster.wait_until(
            lambda: cluster.partition(1, "t").log_end_offset == 2, "the old leader to catch up"
        )
        assert records_of(cluster.partition(1, "t")) == records_of(cluster.partition(2, "t"))
        assert [r[1] for r in records_of(cluster.partition(1, "t"))] == [b"acked", b"later"]
        nursery.cancel_scope.cancel()


async def test_replicas_that_crashed_together_end_identical_when_the_shorter_leads_first(
    tmp_path: Path,
) -> None:
    # KIP-101 scenario 2. The leader takes a record the follower never got, and its HW
    # (checkpointed) covers it; both crash. The replica without that record restarts
    # first, leads, and takes a different record at that offset. When the old leader
    # comes back, its HW says "keep offset 1"; its epochs say "offset 1 is not the new
    # leader's history": it must drop it, so both logs end identical.
    async with trio.open_nursery() as nursery:
        cluster = InProcessCluster(
            nursery, tmp_path, {"replica_high_watermark_checkpoint_interval_ms": 20}
        )
        await cluster.start(1)
        await cluster.start(2)
        await cluster.elect("t", leader=1, replicas=[1, 2])
        assert (await cluster.produce(1, "t", batch(b"m0"), acks=-1))["error_code"] == 0
        await cluster.crash(2)
        await cluster.elect("t", leader=1, replicas=[1, 2], isr=[1])
        only_on_leader = await cluster.produce(1, "t", batch(b"m1-not-on-2"), acks=-1)
        assert only_on_leader["base_offset"] == 1
        checkpoint = cluster.members[1].log_dir / REPLICATION_OFFSET_CHECKPOINT
        await cluster.wait_until(
            lambda: checkpoint.exists() and "t 0 2" in checkpoint.read_text(),
            "the old leader's HW checkpoint to cover offset 1",
        )
        await cluster.crash(1)

        await cluster.start(2)
        await cluster.elect("t", leader=2, replicas=[1, 2], isr=[2])
        new_leader = cluster.partition(2, "t")
        m2 = await cluster.produce(2, "t", batch(b"m2"), acks=-1)
        assert (m2["error_code"], m2["base_offset"]) == (0, 1)
        hw_seen = [new_leader.high_watermark]
        await cluster.start(1)
        assert cluster.members[1].broker is not None
        await cluster.elect("t", leader=2, replicas=[1, 2], isr=[2])

        def identical() -> bool:
            hw_seen.append(new_leader.high_watermark)
            return records_of(cluster.partition(1, "t")) == records_of(new_leader)

        await cluster.wait_until(identical, "identical logs")
        assert [(o, v) for o, v, _ in records_of(new_leader)] == [(0, b"m0"), (1, b"m2")]
        await cluster.wait_until(lambda: 1 in new_leader.isr, "the old leader to rejoin the ISR")
        hw_seen.append(new_leader.high_watermark)
        assert hw_seen == sorted(hw_seen) and hw_seen[-1] == 2  # offsets never went back
        nursery.cancel_scope.cancel()


async def test_kip279_follower_of_several_fast_leader_changes_truncates_where_logs_part(
    tmp_path: Path,
) -> None:
    # Leadership flips 1 -> 2 -> 1 with each leader writing while the other is down.
    # Broker 2 comes back holding offset 1 from its short epoch 1, which broker 1 (now
    # in epoch 3) never had. Asked about epoch 1, the leader answers for epoch 0 (the
    # largest it knows below it), ending at 2; broker 2's own epoch 0 ends at 1, so it
    # cuts at 1 - cutting at 2, as the leader's answer alone says, would keep m2.
    async with trio.open_nursery() as nursery:
        cluster = InProcessCluster(nursery, tmp_path, NO_HW_CHECKPOINTS)
        await cluster.start(1)
        await cluster.start(2)
        await cluster.elect("t", leader=1, replicas=[1, 2])
        assert (await cluster.produce(1, "t", batch(b"m0"), acks=-1))["error_code"] == 0
        await cluster.crash(2)
        assert (await cluster.produce(1, "t", batch(b"m1"), acks=1))["base_offset"] == 1
        await cluster.crash(1)

        await cluster.start(2)
        await cluster.elect("t", leader=2, replicas=[1, 2], isr=[2])  # epoch 1
        assert (await cluster.produce(2, "t", batch(b"m2"), acks=1))["base_offset"] == 1
        await cluster.crash(2)

        await cluster.start(1)
        await cluster.elect("t", leader=1, replicas=[1, 2], isr=[1])  # epoch 2
        assert (await cluster.produce(1, "t", batch(b"m3"), acks=1))["base_offset"] == 2
        await cluster.start(2)
        await cluster.elect("t", leader=1, replicas=[1, 2], isr=[1])  # epoch 3
        leader = cluster.partition(1, "t")
        await cluster.wait_until(
            lambda: records_of(cluster.partition(2, "t")) == records_of(leader), "identical logs"
        )
        assert [(o, v, e) for o, v, e in records_of(leader)] == [
            (0, b"m0", 0),
            (1, b"m1", 0),
            (2, b"m3", 2),
        ]
        nursery.cancel_scope.cancel()


async def test_follower_behind_the_leaders_log_start_restarts_its_log_there(
    tmp_path: Path,
) -> None:
    # OFFSET_OUT_OF_RANGE below the leader's log start: while the follower was down the
    # leader's retention removed offsets the follower never fetched. The follower can
    # only empty its log and start over at the leader's log start.
    async with trio.open_nursery() as nursery:
        cluster = InProcessCluster(nursery, tmp_path, NO_HW_CHECKPOINTS)
        await cluster.start(1)
        await cluster.start(2)
        await cluster.elect("t", leader=1, replicas=[1, 2])
        assert (await cluster.produce(1, "t", batch(b"a", b"b", b"c"), acks=-1))["error_code"] == 0
        await cluster.crash(2)
        for value in (b"d", b"e", b"f", b"g", b"h"):
            assert (await cluster.produce(1, "t", batch(value), acks=1))["error_code"] == 0
        leader = cluster.partition(1, "t")
        leader.log.maybe_increment_log_start_offset(6)  # retention, as far as readers see

        await cluster.start(2)
        await cluster.elect("t", leader=1, replicas=[1, 2])
        follower = cluster.partition(2, "t")
        await cluster.wait_until(
            lambda: follower.log_end_offset == 8, "the follower to fetch from the log start"
        )
        assert follower.log_start_offset == 6
        assert [(o, v) for o, v, _ in records_of(follower)] == [(6, b"g"), (7, b"h")]
        nursery.cancel_scope.cancel()
