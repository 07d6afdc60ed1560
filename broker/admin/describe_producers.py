"""DescribeProducers (KIP-664): the active producers of partitions this broker leads, as
their producer state holds them; what ``transactions describe-producers`` shows and
how a hanging transaction (an open transaction its coordinator forgot) is found."""

from __future__ import annotations

from minibroker.broker.replication.hosted_replicas import HostedReplicas
from minibroker.broker.requests.dispatcher import Answer, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import NONE, KafkaError, NotLeaderOrFollowerError
from minibroker.protocol.messages import bodies
from minibroker.protocol.topic_partition import TopicPartition


class DescribeProducersApi:
    def __init__(self, replicas: HostedReplicas) -> None:
        self.replicas = replicas

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.DESCRIBE_PRODUCERS, self.handle_describe_producers)

    def handle_describe_producers(
        self, header: RequestHeader, request: bodies.DescribeProducersRequest
    ) -> Answer[bodies.DescribeProducersResponse]:
        topics: list[bodies.DescribeProducersResponseTopic] = []
        for topic in request["topics"]:
            partitions: list[bodies.DescribeProducersResponseTopicPartition] = []
            for index in topic["partition_indexes"]:
                partitions.append(self._describe(TopicPartition(topic["name"], index)))
            topics.append({"name": topic["name"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    def _describe(self, tp: TopicPartition) -> bodies.DescribeProducersResponseTopicPartition:
        try:
            partition = self.replicas.partition_or_error(tp)
            if not partition.is_leader:
                raise NotLeaderOrFollowerError(f"this broker does not lead {tp}")
        except KafkaError as exc:
            return {
                "partition_index": tp.partition,
                "error_code": exc.code,
                "error_message": exc.message,
                "active_producers": [],
            }
        producers = partition.log.producer_state.producers
        return {
            "partition_index": tp.partition,
            "error_code": NONE,
            "error_message": None,
            "active_producers": [
                {
                    "producer_id": entry.producer_id,
                    "producer_epoch": entry.epoch,
                    "last_sequence": entry.last_sequence,
                    "last_timestamp": entry.last_timestamp,
                    "coordinator_epoch": entry.coordinator_epoch,
                    "current_txn_start_offset": entry.current_txn_first_offset,
                }
                for entry in sorted(producers.values(), key=lambda e: e.producer_id)
            ],
        }
