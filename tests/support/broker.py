"""In-process brokers for tests, a bare wire client, and a fake controller.

- ``running_broker(log_dir, **properties)``: a Broker on 127.0.0.1, port 0, started in
  its own nursery and stopped (cleanly) when the block exits.
- ``replica_manager(config)``: a ReplicaManager over a LogManager of the config's log
  dirs - the request-handling layer with no server and no network.
- ``WireClient``: one TCP connection speaking frames directly - what bad-input tests
  need (raw bytes, cut frames) and enough for simple request/response exchanges.
- ``FakeController``: plays the controller for a standalone broker: sends
  LeaderAndIsr / UpdateMetadata / StopReplica with a controller epoch it controls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import trio

from minibroker.broker.broker import Broker
from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.replication.hosted_replicas import (
    CorruptionHook,
    HostedReplicas,
    to_log_config,
)
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.protocol.api import (
    ApiKey,
    RequestHeader,
    decode_response,
    encode_request,
    latest_version,
)
from minibroker.protocol.frames import NEED_DATA, FrameDecoder, encode_frame
from minibroker.protocol.kafka import codec as kafka_codec
from minibroker.protocol.records import Record, decode_records, encode_batch
from minibroker.storage.log_manager import LogManager

DEFAULT_CONTROLLER_ID = 3000


def broker_config(log_dir: Path, broker_id: int = 1, **properties: Any) -> BrokerConfig:
    """A test broker's config: loopback, any free port, one log dir, Kafka-name overrides
    (``log_segment_bytes=1024`` style keyword names, dots as underscores)."""
    values = {
        "broker.id": str(broker_id),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(log_dir),
        # Standalone brokers obey FakeController; ignored with zookeeper.connect.
        "standalone.accept.controller.requests": "true",
    }
    values.update({key.replace("_", "."): str(value) for key, value in properties.items()})
    return BrokerConfig.from_properties(None, values)


@contextmanager
def replica_manager(
    config: BrokerConfig,
    clock: Callable[[], int] = lambda: 0,
    corruption: Callable[[HostedReplicas], CorruptionHook] | None = None,
) -> Iterator[ReplicaManager]:
    """A ReplicaManager over a LogManager of ``config``'s log dirs (no server, no
    network); its logs are closed when the block exits."""
    log_manager = LogManager(config.log_dirs, to_log_config(config.topic_config()), clock=clock)
    try:
        yield ReplicaManager(
            HostedReplicas(
                config,
                log_manager,
                MetadataCache(config.broker_id),
                clock=clock,
                corruption=corruption,
            )
        )
    finally:
        log_manager.close()


@asynccontextmanager
async def running_broker(config: BrokerConfig) -> AsyncIterator[Broker]:
    """Run a Broker for the duration of the block; it stops cleanly on exit."""
    async with trio.open_nursery() as nursery:
        broker: Broker = await nursery.start(Broker(config).run)
        try:
            yield broker
        finally:
            nursery.cancel_scope.cancel()


async def read_frames(stream: trio.abc.ReceiveStream, count: int) -> list[bytes]:
    """The next ``count`` frames ``stream`` carries; fails if it closes first."""
    decoder = FrameDecoder()
    frames: list[bytes] = []
    while len(frames) < count:
        frame = decoder.next_frame()
        if frame is NEED_DATA:
            data = await stream.receive_some(65536)
            assert data, "connection closed before the expected frames"
            decoder.feed(data)
        else:
            assert isinstance(frame, bytes)
            frames.append(frame)
    return frames


CLOSE_WAIT_S = 10.0
"""How long a test waits for the broker to close a connection it must close: far past
any close the tests provoke (idle times and deadlines of at most a few seconds), far
below a test's timeout, so a connection left open fails as that, at once."""


async def assert_closed_by_peer(
    stream: trio.abc.ReceiveStream, within_s: float = CLOSE_WAIT_S
) -> None:
    """Read ``stream`` to its end (EOF or reset), discarding what arrives; raise
    AssertionError if the peer has not closed it within ``within_s`` seconds."""
    with trio.move_on_after(within_s):
        try:
            while await stream.receive_some(1 << 20):
                pass
        except trio.BrokenResourceError:
            pass
        return
    raise AssertionError(f"the peer kept the connection open for {within_s} s")


class WireClient:
    """A frame-level client on one connection (requests answered one at a time)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()
        self.correlation_id = 0

    @classmethod
    async def connect(cls, port: int, host: str = "127.0.0.1") -> WireClient:
        return cls(await trio.open_tcp_stream(host, port))

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> WireClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send_request(
        self,
        api_key: int,
        body: Any,
        *,
        version: int | None = None,
        correlation_id: int | None = None,
    ) -> int:
        """Send one request without waiting; returns its correlation id."""
        if correlation_id is None:
            self.correlation_id += 1
            correlation_id = self.correlation_id
        if version is None:
            version = latest_version(api_key)
        payload = encode_request(api_key, version, correlation_id, "test", body)
        await self.stream.send_all(encode_frame(payload))
        return correlation_id

    async def receive_frame(self) -> bytes | None:
        """The next response frame's payload, or None at EOF."""
        while True:
            frame = self.decoder.next_frame()
            if frame is not NEED_DATA:
                assert isinstance(frame, bytes)
                return frame
            data = await self.stream.receive_some(1 << 20)
            if not data:
                return None
            self.decoder.feed(data)

    async def receive_response(self, api_key: int, version: int | None = None) -> tuple[int, Any]:
        frame = await self.receive_frame()
        assert frame is not None, "connection closed instead of answering"
        if version is None:
            version = latest_version(api_key)
        return decode_response(frame, api_key, version)

    async def request(self, api_key: int, body: Any, *, version: int | None = None) -> Any:
        correlation_id = await self.send_request(api_key, body, version=version)
        received_id, response = await self.receive_response(api_key, version)
        assert received_id == correlation_id
        return response

    async def assert_closed_by_peer(self, within_s: float = CLOSE_WAIT_S) -> None:
        """Return once the broker closes the connection; fail after ``within_s``."""
        await assert_closed_by_peer(self.stream, within_s)


class KafkaWireClient(WireClient):
    """WireClient speaking Kafka's frames (a broker's Kafka listener)."""

    async def kafka_request(self, api_key: int, version: int, body: Any) -> Any:
        self.correlation_id += 1
        header = RequestHeader(api_key, version, self.correlation_id, "test")
        await self.stream.send_all(kafka_codec.encode_request(header, body))
        frame = await self.receive_frame()
        assert frame is not None, "connection closed instead of answering"
        correlation_id, response = kafka_codec.decode_response(frame, api_key, version)
        assert correlation_id == self.correlation_id
        return response


def partition_state(
    topic: str,
    partition: int,
    *,
    leader: int,
    leader_epoch: int,
    replicas: Sequence[int],
    isr: Sequence[int] | None = None,
    controller_epoch: int = 1,
    is_new: bool = True,
) -> dict[str, Any]:
    return {
        "topic_name": topic,
        "partition_index": partition,
        "controller_epoch": controller_epoch,
        "leader": leader,
        "leader_epoch": leader_epoch,
        "isr": list(replicas if isr is None else isr),
        "zk_version": 0,
        "replicas": list(replicas),
        "is_new": is_new,
    }


class FakeController:
    """Sends controller requests to one broker, as the active controller would."""

    def __init__(
        self, broker: Broker, *, controller_id: int = DEFAULT_CONTROLLER_ID, epoch: int = 1
    ) -> None:
        self.broker = broker
        self.controller_id = controller_id
        self.epoch = epoch

    def _header(self, epoch: int | None) -> dict[str, Any]:
        return {
            "controller_id": self.controller_id,
            "controller_epoch": self.epoch if epoch is None else epoch,
            "broker_epoch": -1,
        }

    async def _send(self, api_key: ApiKey, body: dict[str, Any]) -> Any:
        async with await WireClient.connect(self.broker.port) as client:
            return await client.request(api_key, body)

    async def leader_and_isr(
        self, states: Iterable[dict[str, Any]], *, controller_epoch: int | None = None
    ) -> Any:
        host, port = self.broker.address
        body = {
            **self._header(controller_epoch),
            "partition_states": list(states),
            "live_leaders": [{"id": self.broker.config.broker_id, "host": host, "port": port}],
        }
        return await self._send(ApiKey.LEADER_AND_ISR, body)

    async def update_metadata(
        self, states: Iterable[dict[str, Any]], *, controller_epoch: int | None = None
    ) -> Any:
        host, port = self.broker.address
        me: dict[str, Any] = {"id": self.broker.config.broker_id, "host": host, "port": port}
        if self.broker.kafka_address is not None:  # Kafka clients find the broker too
            me["kafka_host"], me["kafka_port"] = self.broker.kafka_address
        body = {
            **self._header(controller_epoch),
            "partition_states": [
                {k: v for k, v in s.items() if k != "is_new"} | {"offline_replicas": []}
                for s in states
            ],
            "live_brokers": [me],
        }
        return await self._send(ApiKey.UPDATE_METADATA, body)

    async def stop_replica(
        self,
        partitions: Iterable[tuple[str, int]],
        *,
        delete: bool,
        controller_epoch: int | None = None,
    ) -> Any:
        body = {
            **self._header(controller_epoch),
            "partition_states": [
                {
                    "topic_name": t,
                    "partition_index": p,
                    "leader_epoch": -1,
                    "delete_partition": delete,
                }
                for t, p in partitions
            ],
        }
        return await self._send(ApiKey.STOP_REPLICA, body)

    async def lead(self, topic: str, partitions: int = 1, *, leader_epoch: int = 0) -> None:
        """Make the broker the only replica and leader of ``topic``'s partitions and
        publish that in its metadata cache; fails the test on any error code."""
        me = self.broker.config.broker_id
        states = [
            partition_state(
                topic,
                p,
                leader=me,
                leader_epoch=leader_epoch,
                replicas=[me],
                controller_epoch=self.epoch,
            )
            for p in range(partitions)
        ]
        response = await self.leader_and_isr(states)
        assert response["error_code"] == 0, response
        assert all(e["error_code"] == 0 for e in response["partition_errors"]), response
        response = await self.update_metadata(states)
        assert response["error_code"] == 0, response


# -- request and response helpers -------------------------------------------------------


def produce_body(topic: str, partition: int, records: bytes, acks: int = 1) -> dict[str, Any]:
    return {
        "acks": acks,
        "timeout_ms": 5000,
        "topics": [{"name": topic, "partitions": [{"index": partition, "records": records}]}],
    }


def fetch_body(
    topic: str,
    offsets: dict[int, int],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 30,
    partition_max_bytes: int = 1 << 20,
    leader_epoch: int = -1,
) -> dict[str, Any]:
    return {
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": p,
                        "fetch_offset": offset,
                        "partition_max_bytes": partition_max_bytes,
                        "current_leader_epoch": leader_epoch,
                    }
                    for p, offset in offsets.items()
                ],
            }
        ],
    }


def batch(*values: bytes, timestamp: int = 1_000) -> bytes:
    return encode_batch([Record(v, timestamp=timestamp + i) for i, v in enumerate(values)])


def produced(response: dict[str, Any]) -> dict[str, Any]:
    partition: dict[str, Any] = response["topics"][0]["partitions"][0]
    return partition


def fetched(response: dict[str, Any], index: int = 0) -> dict[str, Any]:
    partition: dict[str, Any] = response["topics"][0]["partitions"][index]
    return partition


def values_of(partition: dict[str, Any]) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in decode_records(partition["records"])]


async def list_offset(client: WireClient, topic: str, timestamp: int) -> dict[str, Any]:
    body = {
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]
    }
    response = await client.request(ApiKey.LIST_OFFSETS, body)
    partition: dict[str, Any] = response["topics"][0]["partitions"][0]
    return partition
