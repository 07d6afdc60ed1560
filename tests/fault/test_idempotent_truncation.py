"""Producer state follows the log through an unclean leader change and truncation.

In-process brokers with the test as the controller (tests/fault/inprocess.py), so the
history is exact: a batch that only the old leader had is cut from it when it comes
back as a follower, and its producer state must forget that batch too - otherwise a
retry of it would be answered as a "duplicate" pointing at someone else's record.
"""

from __future__ import annotations

from pathlib import Path

import trio

from minibroker.protocol.records import Record, encode_batch
from tests.fault.inprocess import InProcessCluster, records_of

NO_HW_CHECKPOINTS = {"replica_high_watermark_checkpoint_interval_ms": 3_600_000}
P, Q = 7, 8  # two producers' ids


def produced_by(producer_id: int, sequence: int, value: bytes) -> bytes:
    record = [Record(value, timestamp=1_000)]
    return encode_batch(record, producer_id=producer_id, producer_epoch=0, base_sequence=sequence)


async def test_a_batch_cut_by_truncation_is_new_again_not_a_duplicate(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        cluster = InProcessCluster(nursery, tmp_path, NO_HW_CHECKPOINTS)
        await cluster.start(1)
        await cluster.start(2)
        await cluster.elect("t", leader=1, replicas=[1, 2])
        assert (await cluster.produce(1, "t", produced_by(P, 0, b"a")))["base_offset"] == 0
        await cluster.crash(2)
        only_on_1 = produced_by(P, 1, b"b")
        assert (await cluster.produce(1, "t", only_on_1, acks=1))["base_offset"] == 1
        await cluster.crash(1)

        await cluster.start(2)
        await cluster.elect("t", leader=2, replicas=[1, 2], isr=[2])  # unclean
        other = await cluster.produce(2, "t", produced_by(Q, 0, b"x"), acks=1)
        assert other["base_offset"] == 1

        await cluster.start(1)  # follows 2: cuts "b" and fetches "x"
        await cluster.elect("t", leader=2, replicas=[1, 2], isr=[2])
        leader = cluster.partition(2, "t")
        await cluster.wait_until(
            lambda: records_of(cluster.partition(1, "t")) == records_of(leader), "identical logs"
        )
        await cluster.crash(2)
        await cluster.elect("t", leader=1, replicas=[1, 2], isr=[1])

        retried = await cluster.produce(1, "t", only_on_1, acks=1)
        assert (retried["error_code"], retried["base_offset"]) == (0, 2)
        again = await cluster.produce(1, "t", only_on_1, acks=1)  # now it is a duplicate
        assert (again["error_code"], again["base_offset"]) == (0, 2)
        values = [value for _, value, _ in records_of(cluster.partition(1, "t"))]
        assert values == [b"a", b"x", b"b"]
        nursery.cancel_scope.cancel()
