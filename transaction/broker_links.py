"""Connections from this broker to the other brokers' inter-broker listeners, one per
broker, opened on first use and dropped when a request fails: what the transaction
coordinator's markers and the leaders' transaction verifications travel on.

Each connection proves this broker's id (docs/architecture.md, "Who may command a
broker"), so the receiver may take it for a broker's request.
"""

from __future__ import annotations

from typing import Any

import trio

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.errors import KafkaError, UnknownTopicOrPartitionError


class BrokerLinks:
    def __init__(
        self,
        metadata_cache: MetadataCache,
        *,
        broker_id: int,
        security: ClientSecurity | None,
        client_id: str,
        request_timeout_s: float,
    ) -> None:
        self.metadata_cache = metadata_cache
        self.broker_id = broker_id
        self.security = security
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self._connections: dict[int, Connection] = {}
        self._connecting: dict[int, trio.Lock] = {}

    async def request(
        self, broker_id: int, api_key: int, body: Any, *, version: int | None = None
    ) -> Any:
        """One request to ``broker_id``; raises the KafkaError (the connection is then
        dropped: the next request opens a new one)."""
        connection = await self._connection(broker_id)
        try:
            return await connection.request(api_key, body, version=version)
        except KafkaError:
            await self._drop(broker_id, connection)
            raise

    async def _connection(self, broker_id: int) -> Connection:
        lock = self._connecting.setdefault(broker_id, trio.Lock())
        async with lock:
            connection = self._connections.get(broker_id)
            if connection is not None and connection.is_usable:
                return connection
            broker = self.metadata_cache.broker(broker_id)
            if broker is None:
                raise UnknownTopicOrPartitionError(f"no address known for broker {broker_id}")
            connection = Connection(
                broker.host,
                broker.port,
                client_id=f"{self.client_id}-{self.broker_id}",
                request_timeout=self.request_timeout_s,
                security=self.security,
            )
            await connection.connect()
            self._connections[broker_id] = connection
            return connection

    async def _drop(self, broker_id: int, connection: Connection) -> None:
        if self._connections.get(broker_id) is connection:
            del self._connections[broker_id]
        with trio.CancelScope(shield=True):
            await connection.aclose()

    async def aclose(self) -> None:
        connections, self._connections = self._connections, {}
        with trio.CancelScope(shield=True):
            for connection in connections.values():
                await connection.aclose()
