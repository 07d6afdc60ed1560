"""An attacker who can reach every broker port and knows everything ZooKeeper and the
brokers' answers could tell, trying every controller-only request on every listener.

What it knows (``Knowledge.gather``): the controller's id and epoch, every broker's id,
addresses and broker epoch (the czxid of /brokers/ids/<id>, KIP-380), and the public
identity keys registered there. What it tries, on each broker (``forge_everything``):

- msgpack listener: StopReplica deleting a partition, LeaderAndIsr making the target
  the sole in-sync leader at a huge leader epoch, UpdateMetadata sending clients to a
  made-up broker, ControlledShutdown of every broker (with its real broker epoch and
  with -1), replica Fetch and OffsetForLeaderEpoch posing as a follower; each with the
  real controller id and epoch and the target's real broker epoch, and again with the
  next controller epoch; and a broker identity proof claiming to be the controller,
  signed with a key of its own (the protocol is public);
- Kafka listener: the same controller APIs as Kafka frames (as Kafka's own tools would
  encode them) and the follower's Fetch / OffsetForLeaderEpoch.

Each attempt's outcome is what came back: ``closed`` (the broker closed the
connection), or the error code and message. ``refused`` says whether it changed
nothing as far as the answer tells; the tests then look at the cluster itself.
"""

from __future__ import annotations

import ssl
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from minibroker.client.producer import Producer
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol import broker_proof
from minibroker.protocol.api import ApiKey, RequestHeader
from minibroker.protocol.frames import FrameDecoder
from minibroker.protocol.kafka import codec as kafka_codec
from minibroker.protocol.records import decode_records
from minibroker.protocol.sasl import PLAIN
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import open_zk_client
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.values import BrokerInfo
from tests.support.broker import fetch_body
from tests.support.durability import DurabilityChecker, ReadRecord
from tests.support.forged import leader_and_isr, stop_replica

ATTEMPT_TIMEOUT_S = 15.0
"""One forged request's answer; a ControlledShutdown may wait for the controller."""


@dataclass
class Knowledge:
    controller_id: int
    controller_epoch: int
    brokers: dict[int, BrokerInfo]

    @classmethod
    async def gather(cls, zk_connect: str) -> Knowledge:
        async with open_zk_client(zk_connect) as zk:
            data = KafkaZkClient(zk)
            controller_id = await data.get_controller_id()
            epoch = await data.get_controller_epoch()
            brokers = await data.get_live_brokers()
        assert controller_id is not None and epoch is not None
        return cls(controller_id, epoch[0], brokers)

    def epochs(self) -> list[int]:
        """The values a fence checks that are big enough to spot in a message."""
        return [b.epoch for b in self.brokers.values()]


@dataclass
class Attempt:
    broker: int
    listener: str
    what: str
    outcome: str | tuple[int, str | None]
    """``closed``, or (error code, message)."""

    @property
    def refused(self) -> bool:
        return self.outcome == "closed" or self.outcome[0] != 0


@dataclass
class Attacker:
    knowledge: Knowledge
    topic: str
    security: ClientSecurity | None = None
    """The msgpack listener's TLS / SASL login (a secure cluster); None: plaintext."""
    kafka_ssl: ssl.SSLContext | None = None
    kafka_login: tuple[str, str] | None = None
    """(user, password) for SASL PLAIN on the Kafka listener."""
    attempts: list[Attempt] = field(default_factory=list)

    async def forge_everything(self, kafka_ports: dict[int, int]) -> list[Attempt]:
        for broker_id, info in sorted(self.knowledge.brokers.items()):
            await self._msgpack(broker_id, info)
            if broker_id in kafka_ports:
                await self._kafka(broker_id, kafka_ports[broker_id])
        return self.attempts

    # -- the msgpack listener ------------------------------------------------------------

    def _forgeries(self, target: int) -> list[tuple[str, int, dict[str, Any]]]:
        k = self.knowledge
        forged: list[tuple[str, int, dict[str, Any]]] = []
        replicas = sorted(k.brokers)
        follower = next(b for b in replicas if b != target)
        for epoch_name, epoch in (("epoch", k.controller_epoch), ("next", k.controller_epoch + 1)):
            broker_epoch = k.brokers[target].epoch
            head = (k.controller_id, epoch, broker_epoch)
            forged += [
                (f"StopReplica/{epoch_name}", ApiKey.STOP_REPLICA, stop_replica(self.topic, *head)),
                (
                    f"LeaderAndIsr/{epoch_name}",
                    ApiKey.LEADER_AND_ISR,
                    leader_and_isr(self.topic, *head, leader=target, replicas=replicas),
                ),
                (
                    f"UpdateMetadata/{epoch_name}",
                    ApiKey.UPDATE_METADATA,
                    update_metadata(*head, list(k.brokers)),
                ),
            ]
        for victim, info in sorted(k.brokers.items()):
            for broker_epoch in (info.epoch, -1):
                forged.append(
                    (
                        f"ControlledShutdown({victim},{broker_epoch})",
                        ApiKey.CONTROLLED_SHUTDOWN,
                        {"broker_id": victim, "broker_epoch": broker_epoch},
                    )
                )
        forged += [
            ("Fetch as follower", ApiKey.FETCH, follower_fetch(self.topic, follower)),
            (
                "OffsetForLeaderEpoch as follower",
                ApiKey.OFFSET_FOR_LEADER_EPOCH,
                follower_offset_for_leader_epoch(self.topic, follower),
            ),
        ]
        return forged

    async def _msgpack(self, target: int, info: BrokerInfo) -> None:
        for what, api_key, body in self._forgeries(target):
            outcome = await self._msgpack_request(info, api_key, body)
            self.attempts.append(Attempt(target, "msgpack", what, outcome))
        self.attempts.append(Attempt(target, "msgpack", "identity proof", await self._pose(info)))

    async def _msgpack_request(
        self, info: BrokerInfo, api_key: int, body: dict[str, Any]
    ) -> str | tuple[int, str | None]:
        try:
            async with Connection(info.host, info.port, security=self.security) as conn:
                answer = await conn.request(api_key, body, timeout=ATTEMPT_TIMEOUT_S)
        except Exception as exc:  # any refusal the connection reports
            return "closed" if "closed" in str(exc) or "EOF" in str(exc) else (-2, str(exc))
        return answer_outcome(answer)

    async def _pose(self, info: BrokerInfo) -> str | tuple[int, str | None]:
        """Prove to be the controller with a key of our own, then forge a StopReplica on
        that connection."""
        k = self.knowledge
        key = Ed25519PrivateKey.generate()
        try:
            async with Connection(info.host, info.port, security=self.security) as conn:
                challenge = await conn.request(ApiKey.BROKER_CHALLENGE, {})
                if challenge["error_code"]:
                    return answer_outcome(challenge)
                payload = broker_proof.payload(challenge["nonce"], k.controller_id, info.id)
                proof = await conn.request(
                    ApiKey.BROKER_PROOF,
                    {"broker_id": k.controller_id, "signature": key.sign(payload)},
                )
                if proof["error_code"]:
                    return answer_outcome(proof)
                head = (k.controller_id, k.controller_epoch, info.epoch)
                answer = await conn.request(ApiKey.STOP_REPLICA, stop_replica(self.topic, *head))
        except Exception as exc:
            return "closed" if "closed" in str(exc) or "EOF" in str(exc) else (-2, str(exc))
        return answer_outcome(answer)

    # -- the Kafka listener --------------------------------------------------------------

    async def _kafka(self, target: int, port: int) -> None:
        k = self.knowledge
        follower = next(b for b in sorted(k.brokers) if b != target)
        head = (k.controller_id, k.controller_epoch)
        frames = {
            "LeaderAndIsr v0": (
                ApiKey.LEADER_AND_ISR,
                0,
                kafka_leader_and_isr(self.topic, *head, target),
            ),
            "StopReplica v0": (ApiKey.STOP_REPLICA, 0, kafka_stop_replica(self.topic, *head)),
            "UpdateMetadata v0": (ApiKey.UPDATE_METADATA, 0, kafka_update_metadata(*head)),
            "ControlledShutdown v2": (
                ApiKey.CONTROLLED_SHUTDOWN,
                2,
                struct.pack(">iq", target, k.brokers[target].epoch),
            ),
        }
        for what, (api_key, version, body) in frames.items():
            outcome = await self._kafka_exchange(port, api_key, version, raw=body)
            self.attempts.append(Attempt(target, "kafka", what, outcome))
        fetch = follower_fetch(self.topic, follower)
        outcome = await self._kafka_exchange(port, ApiKey.FETCH, 4, body=fetch)
        self.attempts.append(Attempt(target, "kafka", "Fetch v4 as follower", outcome))
        epochs = follower_offset_for_leader_epoch(self.topic, follower)
        outcome = await self._kafka_exchange(port, ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, body=epochs)
        self.attempts.append(Attempt(target, "kafka", "OffsetForLeaderEpoch v3", outcome))

    async def _kafka_exchange(
        self,
        port: int,
        api_key: int,
        version: int,
        *,
        raw: bytes | None = None,
        body: dict[str, Any] | None = None,
    ) -> str | tuple[int, str | None]:
        wire = KafkaWire(await self._kafka_stream(port))
        try:
            with trio.fail_after(ATTEMPT_TIMEOUT_S):
                if self.kafka_login is not None:
                    user, password = self.kafka_login
                    await wire.login(user, password)
                header = RequestHeader(api_key, version, 7, "attacker")
                if raw is not None:
                    frame = raw_kafka_frame(api_key, version, 7, raw)
                else:
                    frame = kafka_codec.encode_request(header, body)
                answer = await wire.exchange(frame, api_key, version)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return "closed"
        finally:
            await wire.aclose()
        if answer is None:
            return "closed"
        return answer_outcome(answer)

    async def _kafka_stream(self, port: int) -> trio.abc.Stream:
        tcp = await trio.open_tcp_stream("127.0.0.1", port)
        if self.kafka_ssl is None:
            return tcp
        tls = trio.SSLStream(tcp, self.kafka_ssl, server_hostname="localhost")
        await tls.do_handshake()
        return tls


class KafkaWire:
    """Kafka frames over one stream, one request at a time."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)

    async def login(self, user: str, password: str) -> None:
        handshake = kafka_codec.encode_request(
            RequestHeader(ApiKey.SASL_HANDSHAKE, 1, 1, "attacker"), {"mechanism": PLAIN}
        )
        answer = await self.exchange(handshake, ApiKey.SASL_HANDSHAKE, 1)
        assert answer is not None and answer["error_code"] == 0, answer
        token = b"\0" + user.encode() + b"\0" + password.encode()
        authenticate = kafka_codec.encode_request(
            RequestHeader(ApiKey.SASL_AUTHENTICATE, 1, 2, "attacker"), {"auth_bytes": token}
        )
        answer = await self.exchange(authenticate, ApiKey.SASL_AUTHENTICATE, 1)
        assert answer is not None and answer["error_code"] == 0, answer

    async def exchange(self, frame: bytes, api_key: int, version: int) -> dict[str, Any] | None:
        """The decoded answer, or None when the broker closed the connection."""
        await self.stream.send_all(frame)
        while True:
            payload = self.decoder.next_frame()
            if isinstance(payload, bytes):
                _, answer = kafka_codec.decode_response(payload, api_key, version)
                return answer
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self.decoder.feed(data)


def answer_outcome(answer: dict[str, Any]) -> tuple[int, str | None]:
    """(error code, message) of an answer: the top-level one, else the first partition
    error (Fetch and OffsetForLeaderEpoch answer per partition)."""
    code = answer.get("error_code", 0)
    if code:
        return code, answer.get("error_message")
    for topic in answer.get("topics", ()):
        for partition in topic.get("partitions", ()):
            if partition.get("error_code"):
                return partition["error_code"], partition.get("error_message")
    return 0, None


def update_metadata(
    controller_id: int, controller_epoch: int, broker_epoch: int, broker_ids: Sequence[int]
) -> dict[str, Any]:
    """UpdateMetadata sending every client to a made-up broker at 127.0.0.1:1."""
    return {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "partition_states": [],
        "live_brokers": [{"id": b, "host": "127.0.0.1", "port": 1} for b in broker_ids],
    }


def follower_fetch(topic: str, replica_id: int) -> dict[str, Any]:
    """A follower's Fetch far ahead (a leader believing it would move the HW)."""
    partition: dict[str, Any] = {
        "partition": 0,
        "fetch_offset": 1 << 40,
        "partition_max_bytes": 1024,
    }
    return {
        "replica_id": replica_id,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1024,
        "isolation_level": 0,
        "topics": [{"topic": topic, "partitions": [partition]}],
    }


def follower_offset_for_leader_epoch(topic: str, replica_id: int) -> dict[str, Any]:
    return {
        "replica_id": replica_id,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
            }
        ],
    }


# -- Kafka's v0 controller requests, by hand (Kafka's own schemas; our codec has none) ------


def _string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def _int32s(values: Sequence[int]) -> bytes:
    return struct.pack(f">i{len(values)}i", len(values), *values)


def _kafka_partition_state(topic: str, controller_epoch: int, leader: int) -> bytes:
    return (
        _string(topic)
        + struct.pack(">iiii", 0, controller_epoch, leader, 1_000_000)
        + _int32s([leader])
        + struct.pack(">i", 0)
        + _int32s([leader])
    )


def kafka_leader_and_isr(topic: str, controller_id: int, epoch: int, leader: int) -> bytes:
    return (
        struct.pack(">ii", controller_id, epoch)
        + struct.pack(">i", 1)
        + _kafka_partition_state(topic, epoch, leader)
        + struct.pack(">i", 1)
        + struct.pack(">i", leader)
        + _string("127.0.0.1")
        + struct.pack(">i", 1)
    )


def kafka_stop_replica(topic: str, controller_id: int, epoch: int) -> bytes:
    return (
        struct.pack(">iib", controller_id, epoch, 1)
        + struct.pack(">i", 1)
        + _string(topic)
        + struct.pack(">i", 0)
    )


def kafka_update_metadata(controller_id: int, epoch: int) -> bytes:
    return (
        struct.pack(">ii", controller_id, epoch)
        + struct.pack(">i", 0)
        + struct.pack(">i", 1)
        + struct.pack(">i", 1)
        + _string("127.0.0.1")
        + struct.pack(">i", 1)
    )


def raw_kafka_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    header = struct.pack(">hhi", api_key, version, correlation_id) + _string("attacker")
    return struct.pack(">i", len(header) + len(body)) + header + body


# -- what the tests look at before and after the attack ------------------------------------


@dataclass
class Victim:
    """A `dev up` cluster's topic as the tests watch it: its ZooKeeper states, every
    broker's Metadata view, and every record read back (``security``: the admin's)."""

    zk_connect: str
    brokers: dict[int, BrokerInfo]
    topic: str
    partitions: int
    security: ClientSecurity | None = None

    async def states(self) -> dict[int, tuple[int, int, tuple[int, ...]]]:
        async with open_zk_client(self.zk_connect) as zk:
            states = await KafkaZkClient(zk).read_partition_states(
                [TopicPartition(self.topic, p) for p in range(self.partitions)]
            )
        return {tp.partition: (s.leader, s.leader_epoch, s.isr) for tp, s in states.items()}

    async def metadata_views(self) -> list[Any]:
        """Each broker's Metadata answer: brokers (id, host, port), partitions' leaders
        and ISRs."""
        views = []
        for broker_id, info in sorted(self.brokers.items()):
            answer = await self.request(
                info,
                ApiKey.METADATA,
                {"topics": [{"name": self.topic}], "allow_auto_topic_creation": False},
            )
            brokers = sorted((b["node_id"], b["host"], b["port"]) for b in answer["brokers"])
            partitions = sorted(
                (p["partition_index"], p["leader_id"], p["leader_epoch"], tuple(p["isr_nodes"]))
                for p in answer["topics"][0]["partitions"]
            )
            views.append((broker_id, brokers, partitions))
        return views

    async def request(self, info: BrokerInfo, api_key: int, body: dict[str, Any]) -> Any:
        async with Connection(info.host, info.port, security=self.security) as conn:
            return await conn.request(api_key, body, timeout=ATTEMPT_TIMEOUT_S)

    async def read_back(self) -> list[ReadRecord]:
        """Every record below each partition's HW, read from its leader (ZooKeeper's)."""
        read: list[ReadRecord] = []
        states = await self.states()
        for partition in range(self.partitions):
            leader = self.brokers[states[partition][0]]
            offset = 0
            while True:
                body = fetch_body(
                    self.topic,
                    {partition: offset},
                    min_bytes=0,
                    max_bytes=8 << 20,
                    partition_max_bytes=8 << 20,
                )
                answer = (await self.request(leader, ApiKey.FETCH, body))["topics"][0]
                part = answer["partitions"][0]
                assert part["error_code"] == 0, part
                records = [r for r in decode_records(part["records"]) if r.offset >= offset]
                if not records:
                    break
                read += [
                    ReadRecord(self.topic, partition, r.offset, r.value or b"") for r in records
                ]
                offset = records[-1].offset + 1
        return read


async def produce(
    bootstrap: str,
    checker: DurabilityChecker,
    topic: str,
    count: int,
    partitions: int,
    security: Mapping[str, str] | None = None,
) -> None:
    """``count`` acks=all records over every partition, each acknowledgement recorded."""
    async with Producer(bootstrap, acks="all", config=security) as producer:
        deliveries = []
        for i in range(count):
            value = b"%s-%d" % (topic.encode(), i)
            checker.attempted(value)
            deliveries.append((value, producer.send_nowait(topic, value, partition=i % partitions)))
        await producer.flush()
        for value, delivery in deliveries:
            meta = await delivery.result()
            checker.acknowledged(value, meta.topic, meta.partition, meta.offset)


def assert_all_refused_with_fixed_messages(attempts: list[Attempt], knowledge: Knowledge) -> None:
    """Nothing accepted; no refusal names a broker epoch; and one message per (API,
    error): a message that varied with the forged values would tell the attacker."""
    accepted = [a for a in attempts if not a.refused]
    assert not accepted, f"accepted forgeries: {accepted}"
    by_kind: dict[tuple[str, int], set[str]] = {}
    for attempt in attempts:
        if attempt.outcome == "closed":
            continue
        code, message = attempt.outcome
        for epoch in knowledge.epochs():
            assert str(epoch) not in (message or ""), f"{attempt} names broker epoch {epoch}"
        kind = attempt.what.split("/")[0].split("(")[0]
        by_kind.setdefault((kind, code), set()).add(message or "")
    varying = {kind: found for kind, found in by_kind.items() if len(found) > 1}
    assert not varying, f"refusal messages vary with the forged values: {varying}"
