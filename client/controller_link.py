"""ControllerLink: the admin client's way to the active controller.

Requests that change cluster state (CreateTopics, DeleteTopics, ElectLeaders, config
and partition changes) go to the controller the metadata names; when it names none or
that broker cannot answer, to any broker, which forwards the decision through
ZooKeeper. ``Admin`` owns one link and hands it to the collaborators that need it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from minibroker.client.metadata import ClusterClient
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaError
from minibroker.protocol.messages.bodies import ResponseT, Route


class ControllerLink:
    """``await link.request(bodies.CREATE_TOPICS, body)``: ``body`` built as the
    route's send-side ``<Api>RequestBody``, the answer typed as the route declares it
    (protocol/messages/bodies.py)."""

    def __init__(self, cluster: ClusterClient) -> None:
        self.cluster = cluster

    async def request(self, route: Route[Any, ResponseT], body: Mapping[str, Any]) -> ResponseT:
        """``body`` to the controller (any broker if it cannot be reached)."""
        api_key = ApiKey(route.api_key)
        meta = await self.cluster.refresh()
        if meta.controller_id in meta.brokers:
            with contextlib.suppress(KafkaError):
                answer: ResponseT = await self.cluster.request(meta.controller_id, api_key, body)
                return answer
        any_answer: ResponseT = await self.cluster.request_any(api_key, body)
        return any_answer
