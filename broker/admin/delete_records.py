"""DeleteRecords, answered by each partition's leader: the log start offset moves up.

How this works (Kafka's ReplicaManager.deleteRecords and DelayedDeleteRecords):

1. per partition, on its leader: the topic must allow deletion (``cleanup.policy``
   with ``delete``; compact only is POLICY_VIOLATION), the offset (-1: the high
   watermark) must lie at or below the high watermark (else OFFSET_OUT_OF_RANGE); the
   log start offset moves there (never back). Readers below it get
   OFFSET_OUT_OF_RANGE, ListOffsets earliest answers it;
2. the leader deletes the whole segments now below it and writes
   ``log-start-offset-checkpoint`` before answering, so a restart - kill -9 included -
   starts the log there;
3. followers learn the new start from the leader's Fetch answers (``log_start_offset``,
   broker/replication/replica_fetcher.py), move theirs, and report it in their next Fetch; their
   segments go at the next retention pass and their checkpoint at the next periodic
   one, as in Kafka;
4. the answer waits, up to ``timeout_ms``, until the partition's low watermark - the
   smallest log start offset of the leader and of every follower whose broker is
   alive - reaches the offset asked for (REQUEST_TIMED_OUT otherwise), and carries it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.replication.hosted_replicas import HostedReplicas
from minibroker.broker.replication.partition import Partition
from minibroker.broker.requests.dispatcher import Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RequestTimedOutError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

HIGH_WATERMARK = -1
"""The offset that means "everything below the high watermark" (Kafka's
DeleteRecordsRequest.HIGH_WATERMARK)."""

RECHECK_S = 0.25
"""A waiting answer re-checks this often besides on followers' reports: a lost
leadership or a follower's broker leaving the cluster changes the outcome without one."""


def low_watermark(partition: Partition, alive: Callable[[int], bool]) -> int:
    """The smallest log start offset of the leader and its live followers (-1 while a
    live follower has not reported one yet)."""
    low = partition.log.log_start_offset
    for replica in partition.remote_replicas.values():
        if replica.log_start_offset < low and alive(replica.broker_id):
            low = replica.log_start_offset
    return low


class DeleteRecords:
    def __init__(self, replicas: HostedReplicas, metadata_cache: MetadataCache) -> None:
        self._replicas = replicas
        self._metadata = metadata_cache

    def install(self, dispatcher: RequestDispatcher) -> None:
        def delete(
            header: RequestHeader, request: bodies.DeleteRecordsRequest
        ) -> Deferred[bodies.DeleteRecordsResponse]:
            return Deferred(lambda: self.delete_records(request))

        dispatcher.register(bodies.DELETE_RECORDS, delete)

    async def delete_records(
        self, request: bodies.DeleteRecordsRequest
    ) -> bodies.DeleteRecordsResponse:
        answers: dict[TopicPartition, bodies.DeleteRecordsResponseTopicPartition] = {}
        required: dict[TopicPartition, int] = {}
        moved: list[Partition] = []
        for topic in request["topics"]:
            for asked in topic["partitions"]:
                tp = TopicPartition(topic["name"], asked["partition_index"])
                answer: bodies.DeleteRecordsResponseTopicPartition = {
                    "partition_index": tp.partition,
                    "low_watermark": -1,
                    "error_code": NONE,
                }
                answers[tp] = answer
                try:
                    partition = self._leader(tp)
                    before = partition.log.log_start_offset
                    required[tp] = self._move_log_start(partition, asked["offset"])
                except KafkaError as exc:
                    answer["error_code"] = exc.code
                    continue
                if partition.log.log_start_offset > before:
                    moved.append(partition)
        if moved:
            await self._delete_and_checkpoint(moved, answers)
        await self._wait(required, answers, request["timeout_ms"])
        by_topic: dict[str, list[bodies.DeleteRecordsResponseTopicPartition]] = {}
        for tp, answer in answers.items():
            by_topic.setdefault(tp.topic, []).append(answer)
        return {"topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}

    def _leader(self, tp: TopicPartition) -> Partition:
        partition = self._replicas.partition_or_error(tp)
        if not partition.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self._replicas.broker_id} does not lead {tp}")
        return partition

    @staticmethod
    def _move_log_start(partition: Partition, offset: int) -> int:
        """Kafka's Partition.deleteRecordsOnLeader: the offset the low watermark must
        reach."""
        if not partition.log.config.delete:
            raise PolicyViolationError(
                f"Records of partition {partition.tp} can not be deleted while the"
                " partition's cleanup policy is compact"
            )
        high_watermark = partition.high_watermark
        target = high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0 or target > high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset of {partition.tp} to {target}: it"
                f" is outside [0, {high_watermark}] (the high watermark)"
            )
        partition.log.maybe_increment_log_start_offset(target)
        return target

    async def _delete_and_checkpoint(
        self,
        moved: list[Partition],
        answers: dict[TopicPartition, bodies.DeleteRecordsResponseTopicPartition],
    ) -> None:
        """Drop the segments wholly below the new starts; write the checkpoint."""
        manager = self._replicas
        async with manager.log_manager_lock:
            try:
                for partition in moved:
                    partition.log.delete_old_segments()
                await trio.to_thread.run_sync(manager.log_manager.checkpoint_log_start_offsets)
            except OSError as exc:
                log.error("DeleteRecords: cannot delete segments or checkpoint: %s", exc)
                for partition in moved:
                    answers[partition.tp]["error_code"] = KafkaStorageError.code

    async def _wait(
        self,
        required: dict[TopicPartition, int],
        answers: dict[TopicPartition, bodies.DeleteRecordsResponseTopicPartition],
        timeout_ms: int,
    ) -> None:
        """Fill each partition's low watermark once it reaches the offset asked for;
        REQUEST_TIMED_OUT for those that did not within ``timeout_ms``."""
        pending = {tp: offset for tp, offset in required.items() if not answers[tp]["error_code"]}
        deadline = trio.current_time() + max(timeout_ms, 0) / 1000
        alive = self._metadata.brokers.__contains__
        while True:
            with self._replicas.delete_records_waiters.watch(pending) as waiter:
                for tp, offset in list(pending.items()):
                    try:
                        low = low_watermark(self._leader(tp), alive)
                    except KafkaError as exc:
                        answers[tp]["error_code"] = exc.code
                        del pending[tp]
                        continue
                    answers[tp]["low_watermark"] = low
                    if low >= offset:
                        del pending[tp]
                now = trio.current_time()
                if not pending or now >= deadline:
                    break
                await waiter.wait_until(min(deadline, now + RECHECK_S))
        for tp in pending:
            answers[tp]["error_code"] = RequestTimedOutError.code
