"""A Fetch of many partitions read in turns answers exactly what one pass would: the
byte budget and the one oversized first batch (KIP-74) carry over from turn to turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.broker.replication.fetch_reader import FetchParams, FetchPartition
from minibroker.broker.replication.partition import LeaderAndIsrPartition
from minibroker.protocol.records import Record, encode_batch
from minibroker.protocol.topic_partition import TopicPartition
from tests.support.broker import broker_config, replica_manager

pytestmark = pytest.mark.timeout(30)

PARTITIONS = [TopicPartition("t", p) for p in range(10)]


@pytest.mark.parametrize("max_bytes", [1, 250, 700, 1 << 20])
async def test_a_fetch_read_in_turns_answers_what_one_pass_answers(
    tmp_path: Path, max_bytes: int
) -> None:
    state = LeaderAndIsrPartition(
        controller_epoch=1, leader=1, leader_epoch=0, isr=(1,), zk_version=0, replicas=(1,),
        is_new=True,
    )  # fmt: skip
    with replica_manager(broker_config(tmp_path)) as manager:
        await manager.leadership.become_leader_or_follower(1, dict.fromkeys(PARTITIONS, state))
        manager.append_records(
            1,
            [
                (tp, encode_batch([Record(b"v" * (20 * (tp.partition + 1)), timestamp=1)]))
                for tp in PARTITIONS
            ],
        )
        asked = [FetchPartition(tp, 0, 1 << 20) for tp in PARTITIONS]
        fetch = FetchParams(-1, max_bytes, 0, 0, asked)
        one_pass = manager.fetch_messages(fetch)
        in_turns = await manager.fetch_messages_in_turns(fetch, 3)
        assert isinstance(one_pass, list) and isinstance(in_turns, list)
        assert [(r.tp, r.size) for r in in_turns] == [(r.tp, r.size) for r in one_pass]
        assert sum(r.size for r in in_turns) > 0  # the first batch goes out, whatever fits
