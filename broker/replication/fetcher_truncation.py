"""Where a follower's log must be cut: by leader epoch before it fetches (KIP-101 with
KIP-279's rounds, broker/replication/truncation.py decides each step), and when the leader answers
OFFSET_OUT_OF_RANGE (see broker/replication/replica_fetcher.py's docstring)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio

from minibroker.broker.replication.fetch_state import REQUEST_TIMEOUT_S, FetcherHost, FetchState
from minibroker.broker.replication.partition import Partition
from minibroker.broker.replication.truncation import decide_truncation
from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import NONE, error_for_code
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.leader_epoch import UNDEFINED_EPOCH
from minibroker.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

log = logging.getLogger(__name__)

MAX_TRUNCATION_ROUNDS = 16
"""KIP-279 rounds per attempt; each lowers our latest epoch, so real logs need few."""


def truncate_follower(partition: Partition, offset: int) -> None:
    """Cut the follower's log (and its epoch cache: an epoch may start at the LEO with
    no data yet) to ``offset``, keeping HW <= LEO."""
    log_ = partition.log
    if offset < log_.log_end_offset:
        log.info("%s: truncating from %d to %d", partition.tp, log_.log_end_offset, offset)
        log_.truncate_to(offset)
    log_.leader_epoch_cache.truncate_from_end(log_.log_end_offset)
    partition.high_watermark = min(partition.high_watermark, log_.log_end_offset)


class FetcherTruncation:
    """A fetcher's truncation: before fetching, and after OFFSET_OUT_OF_RANGE. It works
    on the fetcher's partition states (``states``, shared) and pauses a partition the
    leader refuses through the fetcher (``pause``)."""

    def __init__(
        self,
        manager: FetcherHost,
        source_id: int,
        states: dict[TopicPartition, FetchState],
        pause: Callable[[FetchState, int], None],
    ) -> None:
        self.manager = manager
        self.source_id = source_id
        self.states = states
        self._pause = pause

    async def truncate(self, conn: Connection) -> None:
        """Truncate every partition that needs it and is not paused, all of them
        together: one OffsetForLeaderEpoch per round (each round lowers a partition's
        latest epoch, KIP-279) for every partition still deciding, where one request
        per partition after a leadership change left thousands of partitions unfetched
        long enough to fall out of their ISRs."""
        now = trio.current_time()
        pending: dict[TopicPartition, FetchState] = {}
        for tp, state in list(self.states.items()):
            if state.partition.leader_epoch != state.epoch:
                state.epoch, state.truncating = state.partition.leader_epoch, True
            if state.truncating and state.ready(now):
                pending[tp] = state
        for _ in range(MAX_TRUNCATION_ROUNDS):
            asks: dict[TopicPartition, tuple[FetchState, int]] = {}
            for tp, state in pending.items():
                partition = state.partition
                latest = partition.log.leader_epoch_cache.latest_epoch
                if latest == UNDEFINED_EPOCH:
                    # No epoch history at all: the HW is the only bound we have.
                    truncate_follower(
                        partition, min(partition.high_watermark, partition.log_end_offset)
                    )
                    state.truncating = False
                else:
                    asks[tp] = (state, latest)
            if not asks:
                return
            answers = await self._offsets_for_leader_epochs(conn, asks)
            pending = {}
            refused: dict[str, list[TopicPartition]] = {}
            for tp, (state, _) in asks.items():
                partition = state.partition
                answer = answers.get(tp)
                if self.states.get(tp) is not state or partition.leader_epoch != state.epoch:
                    continue  # LeaderAndIsr moved on while we asked
                if answer is None or answer["error_code"] != NONE:
                    code = NONE if answer is None else answer["error_code"]
                    refused.setdefault(error_for_code(code).name, []).append(tp)
                    self._pause(state, code)
                    continue
                state.leader_behind = 0
                step = decide_truncation(
                    answer["leader_epoch"],
                    answer["end_offset"],
                    follower_cache=partition.log.leader_epoch_cache,
                    follower_log_end_offset=partition.log_end_offset,
                    follower_high_watermark=partition.high_watermark,
                )
                truncate_follower(partition, step.offset)
                if step.complete:
                    state.truncating = False
                else:
                    pending[tp] = state
            for name, tps in refused.items():
                log.info(
                    "OffsetForLeaderEpoch from %d: %s for %d partitions (%s)",
                    self.source_id,
                    name,
                    len(tps),
                    ", ".join(map(str, tps[:5])),
                )
            if not pending:
                return

    async def _offsets_for_leader_epochs(
        self, conn: Connection, asks: Mapping[TopicPartition, tuple[FetchState, int]]
    ) -> dict[TopicPartition, dict[str, Any]]:
        """The leader's answer for each (partition, epoch) asked about, in requests of
        at most request.max.partitions partitions (the leader refuses more)."""
        cap = self.manager.config.request_max_partitions
        items = list(asks.items())
        answers: dict[TopicPartition, dict[str, Any]] = {}
        for start in range(0, len(items), cap):
            topics: dict[str, list[dict[str, Any]]] = {}
            for tp, (state, epoch) in items[start : start + cap]:
                topics.setdefault(tp.topic, []).append(
                    {
                        "partition": tp.partition,
                        "current_leader_epoch": state.partition.leader_epoch,
                        "leader_epoch": epoch,
                    }
                )
            body = {
                "replica_id": self.manager.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            }
            response = await conn.request(
                ApiKey.OFFSET_FOR_LEADER_EPOCH, body, timeout=REQUEST_TIMEOUT_S
            )
            for topic in response["topics"]:
                for answer in topic["partitions"]:
                    answers[TopicPartition(topic["topic"], answer["partition"])] = answer
        return answers

    async def handle_offset_out_of_range(self, conn: Connection, partition: Partition) -> None:
        """Our LEO is outside the leader's [log start, LEO]: see the module docstring."""
        epoch = partition.leader_epoch
        leader_end = await self._list_offset(conn, partition, LATEST_TIMESTAMP)
        if partition.leader_epoch != epoch or partition.is_leader:
            return
        leo = partition.log_end_offset
        if 0 <= leader_end < leo:
            log.warning(
                "%s: leader %d ends at %d, below our %d (unclean election?): truncating",
                partition.tp,
                self.source_id,
                leader_end,
                leo,
            )
            truncate_follower(partition, leader_end)
            return
        leader_start = await self._list_offset(conn, partition, EARLIEST_TIMESTAMP)
        if partition.leader_epoch != epoch or partition.is_leader:
            return
        if leader_start > partition.log_end_offset:
            log.warning(
                "%s: leader %d starts at %d, past our end %d: restarting our log there",
                partition.tp,
                self.source_id,
                leader_start,
                partition.log_end_offset,
            )
            partition.log.truncate_fully_and_start_at(leader_start)
            partition.high_watermark = leader_start

    async def _list_offset(self, conn: Connection, partition: Partition, timestamp: int) -> int:
        body = {
            "replica_id": self.manager.broker_id,
            "topics": [
                {
                    "name": partition.tp.topic,
                    "partitions": [
                        {
                            "partition_index": partition.tp.partition,
                            "current_leader_epoch": partition.leader_epoch,
                            "timestamp": timestamp,
                        }
                    ],
                }
            ],
        }
        response = await conn.request(ApiKey.LIST_OFFSETS, body, timeout=REQUEST_TIMEOUT_S)
        answer = response["topics"][0]["partitions"][0]
        if answer["error_code"] != NONE:
            raise error_for_code(answer["error_code"])(f"ListOffsets for {partition.tp}")
        offset: int = answer["offset"]
        return offset
