"""kill -9 of a broker at each step of a cleaner swap: the log reads back complete.

A real broker process cleans a compacted partition; the cleaner's test hook
(MINIBROKER_CLEANER_STOP_AT) freezes the broker right after the named step of the
swap (storage/segment_swap.py) and says so with a file in the log dir. The test then
kills it with SIGKILL, restarts it without the hook, and reads the partition from the
beginning: every key's latest value is there at its offset, offsets strictly increase,
and no ``.cleaned`` or ``.swap`` file is left.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minibroker.node.cli import CLEANER_STOP_AT_ENV
from minibroker.storage.segment_swap import SWAP_STEPS
from tests.support.cluster import ProcessCluster
from tests.support.compaction import (
    CLEANER,
    COMPACTED,
    TOPIC,
    partition_dir,
    read_all,
    write_rounds,
)

KEYS = 25
ROUNDS = 12


@pytest.mark.timeout(150)
@pytest.mark.parametrize("step", SWAP_STEPS)
async def test_a_broker_killed_at_each_swap_step_reads_back_every_latest_value(
    tmp_path: Path, zk_connect: str, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    monkeypatch.setenv(CLEANER_STOP_AT_ENV, step)
    cluster = ProcessCluster(tmp_path, zk_connect, size=1, properties=CLEANER)
    try:
        await cluster.start_all()
        # Nothing is cleanable before every record is written: the hook freezes the broker.
        await cluster.create_topic(TOPIC, 1, 1, {**COMPACTED, "min.compaction.lag.ms": "6000"})
        latest = await write_rounds(cluster, range(ROUNDS), KEYS)
        marker = cluster.root / "broker-1" / "logs" / f"cleaner-stopped-at-{step}"
        with trio.fail_after(60):
            while not marker.exists():
                await trio.sleep(0.1)
        cluster.kill(1)
        monkeypatch.delenv(CLEANER_STOP_AT_ENV)
        marker.unlink()
        await cluster.start(1)
        records = await read_all(cluster, ROUNDS * KEYS)
        offsets = [r.offset for r in records]
        assert offsets == sorted(set(offsets))
        assert {r.key: (r.offset, r.value) for r in records} == latest
        if step != "cleaned":  # the swap was decided before the kill: it was completed
            assert len(records) < ROUNDS * KEYS
        leftovers = [
            p.name
            for p in partition_dir(cluster).iterdir()
            if p.name.endswith((".cleaned", ".swap"))
        ]
        assert leftovers == []
    finally:
        cluster.close()
