"""Admin for a topic's partitions as a whole: adding partitions (CreatePartitions).
``Admin`` (client/admin.py) inherits these methods.

CreatePartitions goes to the active controller when the metadata names one, else to
any broker (which writes the new assignment to ZooKeeper for the controller).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minibroker.client.errors import raise_if_error
from minibroker.client.metadata import ClusterClient
from minibroker.protocol.api import ApiKey


class PartitionAdmin:
    """The partition half of ``Admin`` (it provides ``cluster``, the request timeout and
    the way to the controller)."""

    cluster: ClusterClient
    request_timeout_ms: int

    async def _to_controller(self, api_key: ApiKey, body: dict[str, Any]) -> Any:
        raise NotImplementedError

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
        body = {
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
        response = await self._to_controller(ApiKey.CREATE_PARTITIONS, body)
        for result in response.get("results", ()):
            raise_if_error(
                result["error_code"], f"topic {result['name']!r}", result.get("error_message")
            )
