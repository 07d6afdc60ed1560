"""Admin for a topic's partitions as a whole: adding partitions (CreatePartitions) and
deleting the records below an offset (DeleteRecords). ``Admin`` (client/admin.py)
owns one and delegates these methods to it.

CreatePartitions goes to the active controller when the metadata names one, else to
any broker (which writes the new assignment to ZooKeeper for the controller);
DeleteRecords goes to each partition's leader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from minibroker.client.controller_link import ControllerLink
from minibroker.client.errors import raise_if_error, wire_error
from minibroker.client.metadata import ClusterClient
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaError, LeaderNotAvailableError
from minibroker.protocol.messages import bodies

TopicPartition = tuple[str, int]


class PartitionAdmin:
    """The requests of ``Admin`` about a topic's partitions as a whole, over its
    ``cluster`` client and its link to the controller."""

    def __init__(
        self, cluster: ClusterClient, controller: ControllerLink, request_timeout_ms: int
    ) -> None:
        self.cluster = cluster
        self._controller = controller
        self.request_timeout_ms = request_timeout_ms

    async def create_partitions(
        self,
        topic: str,
        count: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> None:
        """Grow ``topic`` to ``count`` partitions (``assignments``: the replicas of each
        new partition, else the broker places them); returns once every new partition
        has a leader. INVALID_PARTITIONS if the topic has ``count`` or more already."""
        body: bodies.CreatePartitionsRequestBody = {
            "topics": [
                {
                    "name": topic,
                    "count": count,
                    "assignments": None
                    if assignments is None
                    else [{"broker_ids": list(replicas)} for replicas in assignments],
                }
            ],
            "timeout_ms": self.request_timeout_ms,
            "validate_only": validate_only,
        }
        response = await self._controller.request(bodies.CREATE_PARTITIONS, body)
        for result in response.get("results", ()):
            raise_if_error(
                result["error_code"], f"topic {result['name']!r}", result.get("error_message")
            )

    async def delete_records(
        self, before: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | KafkaError]:
        """Delete each partition's records below its offset (-1: below the high
        watermark); per partition the low watermark (its new first offset on every live
        replica) or the error it got."""
        meta = await self.cluster.refresh({topic for topic, _ in before})
        by_leader: dict[int, dict[str, list[bodies.DeleteRecordsRequestBodyTopicPartition]]] = {}
        results: dict[TopicPartition, int | KafkaError] = {}
        for (topic, partition), offset in before.items():
            info = meta.topics.get(topic)
            known = info.partitions if info is not None else ()
            leader = next((p.leader for p in known if p.partition == partition), None)
            if leader is None:
                results[(topic, partition)] = wire_error(3, f"{topic}-{partition}")
            elif leader < 0:
                results[(topic, partition)] = LeaderNotAvailableError(f"{topic}-{partition}")
            else:
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(
                    {"partition_index": partition, "offset": offset}
                )
        for leader, topics in by_leader.items():
            body: bodies.DeleteRecordsRequestBody = {
                "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()],
                "timeout_ms": self.request_timeout_ms,
            }
            response: bodies.DeleteRecordsResponse = await self.cluster.request(
                leader, ApiKey.DELETE_RECORDS, body
            )
            for answered in response.get("topics", ()):
                for answer in answered["partitions"]:
                    tp = (answered["name"], answer["partition_index"])
                    code = answer["error_code"]
                    results[tp] = (
                        wire_error(code, f"{tp[0]}-{tp[1]}") if code else answer["low_watermark"]
                    )
        return results
