"""Where a follower's log must be cut: by leader epoch before it fetches (KIP-101 with
KIP-279's rounds, broker/truncation.py decides each step), and when the leader answers
OFFSET_OUT_OF_RANGE (see broker/replica_fetcher.py's docstring)."""

from __future__ import annotations

import logging
from typing import Any

import trio

from minibroker.broker.fetcher_base import REQUEST_TIMEOUT_S, FetcherBase
from minibroker.broker.partition import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Partition
from minibroker.broker.truncation import decide_truncation
from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import NONE, error_for_code
from minibroker.storage.leader_epoch import UNDEFINED_EPOCH

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


class FetcherTruncation(FetcherBase):
    """A fetcher's truncation: before fetching, and after OFFSET_OUT_OF_RANGE."""

    async def _truncate(self, conn: Connection) -> None:
        now = trio.current_time()
        for tp, state in list(self.states.items()):
            partition = state.partition
            if partition.leader_epoch != state.epoch:
                state.epoch, state.truncating = partition.leader_epoch, True
            if not state.truncating or not state.ready(now):
                continue
            for _ in range(MAX_TRUNCATION_ROUNDS):
                latest = partition.log.leader_epoch_cache.latest_epoch
                if latest == UNDEFINED_EPOCH:
                    # No epoch history at all: the HW is the only bound we have.
                    truncate_follower(
                        partition, min(partition.high_watermark, partition.log_end_offset)
                    )
                    state.truncating = False
                    break
                answer = await self._offset_for_leader_epoch(conn, partition, latest)
                if self.states.get(tp) is not state or partition.leader_epoch != state.epoch:
                    break  # LeaderAndIsr moved on while we asked
                code = answer["error_code"]
                if code != NONE:
                    log.info("%s: OffsetForLeaderEpoch: %s", tp, error_for_code(code).name)
                    self._pause(state, code)
                    break
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
                    break

    async def _offset_for_leader_epoch(
        self, conn: Connection, partition: Partition, epoch: int
    ) -> dict[str, Any]:
        body = {
            "replica_id": self.manager.broker_id,
            "topics": [
                {
                    "topic": partition.tp.topic,
                    "partitions": [
                        {
                            "partition": partition.tp.partition,
                            "current_leader_epoch": partition.leader_epoch,
                            "leader_epoch": epoch,
                        }
                    ],
                }
            ],
        }
        response = await conn.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, body, timeout=REQUEST_TIMEOUT_S
        )
        answer: dict[str, Any] = response["topics"][0]["partitions"][0]
        return answer

    async def _handle_offset_out_of_range(self, conn: Connection, partition: Partition) -> None:
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
