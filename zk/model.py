"""Kafka's ZooKeeper layout: znode paths and the JSON stored in them
(docs/architecture.md, "ZooKeeper").

Sans-IO: paths and JSON codecs only; ``zk.data`` does the I/O. The values they read and
write (``BrokerInfo``, ``TopicAssignment``, ``LeaderAndIsr``, ...) are in ``zk.values``.
The JSON is byte-compatible with what ZooKeeper-era Kafka (2.x) writes, so ``zkCli.sh``
and Kafka's own tools read our znodes and we read theirs.

    /controller                     ephemeral {"version":1,"brokerid":1,"timestamp":"<ms>"}
    /controller_epoch               "<epoch>" (decimal text; bumped with a conditional set)
    /brokers/ids/<id>               ephemeral, version 5:
        {"version":5,"host":"h","port":9092,"jmx_port":-1,"timestamp":"<ms>",
         "endpoints":["PLAINTEXT://h:9092"],
         "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
         "features":{}[,"rack":"r1"],"identity_key":"<base64 Ed25519 public key>"}
    /brokers/topics/<t>             {"version":3,"topic_id":"<22-char base64 UUID>",
                                     "partitions":{"0":[1,2,3]},
                                     "adding_replicas":{},"removing_replicas":{}}
                                    (version 2 without "topic_id": a topic from before
                                     topic ids, KIP-516)
    /brokers/topics/<t>/partitions/<p>/state
        {"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}
        (the znode's data version is the partition's zkVersion)
    /config/topics/<t>              {"version":1,"config":{"retention.ms":"1000"}}
    /config/changes/config_change_<seq>   {"version":2,"entity_path":"topics/<t>"}
    /admin/delete_topics/<t>        empty: a topic marked for deletion
    /admin/reassign_partitions      {"version":1,"partitions":[{"topic":"t","partition":0,
                                                                "replicas":[2,3]}]}
    /admin/preferred_replica_election   {"version":1,"partitions":[{"topic":"t","partition":0}]}
    /isr_change_notification/isr_change_<seq>
                                    {"version":1,"partitions":[{"topic":"t","partition":0}]}
    /log_dir_event_notification/log_dir_event_<seq>
                                    {"version":1,"broker":1,"event":1}
                                    (a broker's log dir failed; event 1 = LogDirFailure)
    /latest_producer_id_block       {"version":1,"broker":1,"block_start":"0","block_end":"999"}
                                    (the last block of producer ids handed to a broker;
                                     taken with a conditional set on the znode version)

Decoders accept the older versions Kafka still reads (a broker znode without endpoints,
a topic znode without adding/removing replicas) and raise ``ZkDataError`` on anything
that is not Kafka's JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from minibroker.protocol import broker_proof
from minibroker.protocol.topic_ids import parse_topic_id, topic_id_str
from minibroker.protocol.topic_partition import TopicPartition

# The values these codecs read and write (zk.values), importable from here as well.
from minibroker.zk.values import (
    DEFAULT_SECURITY_PROTOCOL,
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    ProducerIdBlock,
    TopicAssignment,
    ZkDataError,
)

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
CONFIG_PATH = "/config"
CONFIG_TOPICS_PATH = "/config/topics"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1
"""The only log dir event Kafka defines (LogDirEventNotificationHandler.LogDirFailureEvent)."""

# Created at start-up by every broker (Kafka's ZkData.PersistentZkPaths, the parts we use).
PERSISTENT_PATHS = (
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
)

BROKER_ZNODE_VERSION = 5
TOPIC_ZNODE_VERSION = 2
TOPIC_ZNODE_VERSION_WITH_ID = 3
"""The topic znode's version once it carries ``topic_id`` (Kafka 2.8+)."""


# -- paths --------------------------------------------------------------------------


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def partition_path(tp: TopicPartition) -> str:
    return f"{TOPICS_PATH}/{tp.topic}/partitions/{tp.partition}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{partition_path(tp)}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS_PATH}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def isr_change_path(name: str) -> str:
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{name}"


def log_dir_event_path(name: str) -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{name}"


# -- JSON helpers -------------------------------------------------------------------


def _dumps(value: Mapping[str, Any]) -> bytes:
    # Compact like Kafka's Json.encodeAsBytes; key order as written here.
    return json.dumps(value, separators=(",", ":")).encode()


def _loads(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(f"{what}: not JSON: {data[:80]!r}") from exc
    if not isinstance(value, dict):
        raise ZkDataError(f"{what}: expected a JSON object, got {data[:80]!r}")
    return value


def _field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ZkDataError(f"{what}: field {key!r} missing or not {kind}: {value!r}")
    return value


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ZkDataError(f"{what}: expected a list of integers, got {value!r}")
    return tuple(value)


# -- /controller and /controller_epoch ----------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    """The controller's broker id (Kafka 0.8 wrote a bare integer; still accepted)."""
    text = data.strip()
    if text.lstrip(b"-").isdigit():
        return int(text)
    return int(_field(_loads(data, CONTROLLER_PATH), "brokerid", int, CONTROLLER_PATH))


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode().strip())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZkDataError(f"{CONTROLLER_EPOCH_PATH}: not an integer: {data[:40]!r}") from exc


# -- /latest_producer_id_block ------------------------------------------------------

PRODUCER_ID_BLOCK_VERSION = 1


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    # Kafka writes the bounds as decimal strings (a JSON number would lose int64 range).
    return _dumps(
        {
            "version": PRODUCER_ID_BLOCK_VERSION,
            "broker": block.broker,
            "block_start": str(block.start),
            "block_end": str(block.end),
        }
    )


def decode_producer_id_block(data: bytes) -> ProducerIdBlock | None:
    """The block in the znode; None for the empty znode no broker has written yet."""
    if not data.strip():
        return None
    obj = _loads(data, PRODUCER_ID_BLOCK_PATH)
    try:
        return ProducerIdBlock(int(obj["broker"]), int(obj["block_start"]), int(obj["block_end"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ZkDataError(f"{PRODUCER_ID_BLOCK_PATH}: bad producer id block {obj!r}") from exc


# -- /brokers/ids/N -----------------------------------------------------------------


def encode_broker_info(info: BrokerInfo) -> bytes:
    value: dict[str, Any] = {
        "version": BROKER_ZNODE_VERSION,
        "host": info.host,
        "port": info.port,
        "jmx_port": info.jmx_port,
        "timestamp": str(info.timestamp_ms),
        "endpoints": [str(e) for e in info.endpoints],
        "listener_security_protocol_map": {
            e.listener: info.security_protocol(e.listener) for e in info.endpoints
        },
        "features": {},
    }
    if info.rack is not None:
        value["rack"] = info.rack
    if info.identity_key is not None:
        value[broker_proof.REGISTRATION_FIELD] = info.identity_key
    return _dumps(value)


def decode_broker_info(broker_id: int, data: bytes, *, epoch: int = -1) -> BrokerInfo:
    what = broker_path(broker_id)
    value = _loads(data, what)
    raw_endpoints = value.get("endpoints")
    if isinstance(raw_endpoints, list) and raw_endpoints:
        endpoints = tuple(EndPoint.parse(str(e)) for e in raw_endpoints)
    else:  # version 1: host and port only
        host = _field(value, "host", str, what)
        endpoints = (EndPoint(DEFAULT_SECURITY_PROTOCOL, host, _field(value, "port", int, what)),)
    rack = value.get("rack")
    timestamp = value.get("timestamp", "0")
    protocols = value.get("listener_security_protocol_map")
    if not isinstance(protocols, dict):
        protocols = {}
    identity_key = value.get(broker_proof.REGISTRATION_FIELD)
    return BrokerInfo(
        id=broker_id,
        endpoints=endpoints,
        rack=rack if isinstance(rack, str) else None,
        timestamp_ms=int(timestamp) if str(timestamp).isdigit() else 0,
        jmx_port=int(value.get("jmx_port", -1)),
        epoch=epoch,
        security_protocols=tuple((str(k), str(v)) for k, v in sorted(protocols.items())),
        identity_key=identity_key if isinstance(identity_key, str) else None,
    )


# -- /brokers/topics/T --------------------------------------------------------------


def encode_topic_assignment(assignment: TopicAssignment) -> bytes:
    def as_json(m: Mapping[int, Sequence[int]], *, skip_empty: bool) -> dict[str, list[int]]:
        return {str(p): list(m[p]) for p in sorted(m) if m[p] or not skip_empty}

    topic_id = assignment.topic_id
    return _dumps(
        {
            "version": TOPIC_ZNODE_VERSION if topic_id is None else TOPIC_ZNODE_VERSION_WITH_ID,
            **({} if topic_id is None else {"topic_id": topic_id_str(topic_id)}),
            "partitions": as_json(assignment.partitions, skip_empty=False),
            # Kafka lists only the partitions a reassignment is actually changing.
            "adding_replicas": as_json(assignment.adding_replicas, skip_empty=True),
            "removing_replicas": as_json(assignment.removing_replicas, skip_empty=True),
        }
    )


def decode_topic_assignment(topic: str, data: bytes, *, zk_version: int = -1) -> TopicAssignment:
    what = topic_path(topic)
    value = _loads(data, what)

    def as_map(key: str, required: bool) -> dict[int, tuple[int, ...]]:
        raw = value.get(key)
        if raw is None and not required:
            return {}
        if not isinstance(raw, dict):
            raise ZkDataError(f"{what}: field {key!r} missing or not an object")
        try:
            return {int(p): _int_list(r, what) for p, r in raw.items()}
        except ValueError as exc:
            raise ZkDataError(f"{what}: partition ids must be integers: {raw!r}") from exc

    raw_id = value.get("topic_id")
    try:
        topic_id = None if raw_id is None else parse_topic_id(str(raw_id))
    except ValueError as exc:
        raise ZkDataError(f"{what}: {exc}") from exc
    return TopicAssignment(
        topic,
        as_map("partitions", True),
        as_map("adding_replicas", False),
        as_map("removing_replicas", False),
        zk_version,
        topic_id,
    )


# -- /brokers/topics/T/partitions/P/state ---------------------------------------------


def encode_partition_state(state: LeaderAndIsr) -> bytes:
    return _dumps(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_partition_state(tp: TopicPartition, data: bytes, zk_version: int) -> LeaderAndIsr:
    what = partition_state_path(tp)
    value = _loads(data, what)
    return LeaderAndIsr(
        leader=_field(value, "leader", int, what),
        leader_epoch=_field(value, "leader_epoch", int, what),
        isr=_int_list(value.get("isr"), what),
        controller_epoch=_field(value, "controller_epoch", int, what),
        zk_version=zk_version,
    )


# -- /config ------------------------------------------------------------------------


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    return _dumps({"version": 1, "config": {k: str(config[k]) for k in sorted(config)}})


def decode_topic_config(topic: str, data: bytes) -> dict[str, str]:
    what = topic_config_path(topic)
    config = _field(_loads(data, what), "config", dict, what)
    return {str(k): str(v) for k, v in config.items()}


def encode_config_change(entity_path: str) -> bytes:
    """A /config/changes notification; ``entity_path`` is e.g. ``topics/<t>``."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes, what: str) -> str:
    """The ``entity_path`` a /config/changes notification names."""
    return str(_field(_loads(data, what), "entity_path", str, what))


# -- /log_dir_event_notification --------------------------------------------------


def encode_log_dir_event(broker_id: int, event: int = LOG_DIR_FAILURE_EVENT) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "event": event})


def decode_log_dir_event(data: bytes, what: str) -> int:
    """The broker id a log dir event names."""
    return int(_field(_loads(data, what), "broker", int, what))


# -- partition lists: ISR changes, preferred election, reassignment -----------------


def encode_partition_list(partitions: Iterable[TopicPartition]) -> bytes:
    """``{"version":1,"partitions":[{"topic","partition"}]}``, sorted for stable bytes."""
    items = [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))]
    return _dumps({"version": 1, "partitions": items})


def decode_partition_list(data: bytes, what: str) -> set[TopicPartition]:
    return {TopicPartition(t, p) for t, p, _ in _partition_items(data, what, replicas=False)}


def encode_reassignment(targets: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    items = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(targets[tp])}
        for tp in sorted(targets)
    ]
    return _dumps({"version": 1, "partitions": items})


def decode_reassignment(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    items = _partition_items(data, REASSIGN_PARTITIONS_PATH, replicas=True)
    return {TopicPartition(t, p): replicas for t, p, replicas in items}


def _partition_items(
    data: bytes, what: str, *, replicas: bool
) -> list[tuple[str, int, tuple[int, ...]]]:
    items = _field(_loads(data, what), "partitions", list, what)
    result = []
    for item in items:
        if not isinstance(item, dict):
            raise ZkDataError(f"{what}: partition entry is not an object: {item!r}")
        topic = _field(item, "topic", str, what)
        partition = _field(item, "partition", int, what)
        targets = _int_list(item.get("replicas"), what) if replicas else ()
        result.append((topic, partition, targets))
    return result
