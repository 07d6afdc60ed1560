"""Kafka's znode JSON: exact bytes written, older versions read, garbage refused."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker.protocol.topic_ids import new_topic_id, parse_topic_id, topic_id_str
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.model import (
    LeaderAndIsr,
    decode_broker_info,
    decode_config_change,
    decode_controller,
    decode_controller_epoch,
    decode_log_dir_event,
    decode_partition_list,
    decode_partition_state,
    decode_reassignment,
    decode_topic_assignment,
    decode_topic_config,
    encode_broker_info,
    encode_config_change,
    encode_controller,
    encode_controller_epoch,
    encode_log_dir_event,
    encode_partition_list,
    encode_partition_state,
    encode_reassignment,
    encode_topic_assignment,
    encode_topic_config,
    log_dir_event_path,
    partition_state_path,
)
from minibroker.zk.values import KAFKA_LISTENER, BrokerInfo, EndPoint, TopicAssignment, ZkDataError

TP = TopicPartition("orders", 3)


def test_controller_znode_is_kafkas_json_and_bare_integers_are_still_read() -> None:
    assert encode_controller(2, 1700000000000) == (
        b'{"version":1,"brokerid":2,"timestamp":"1700000000000"}'
    )
    assert decode_controller(encode_controller(2, 5)) == 2
    assert decode_controller(b"7") == 7


def test_controller_epoch_is_decimal_text() -> None:
    assert encode_controller_epoch(12) == b"12"
    assert decode_controller_epoch(b"12") == 12
    with pytest.raises(ZkDataError):
        decode_controller_epoch(b"twelve")


def test_broker_znode_is_version_5_with_endpoints_and_optional_rack() -> None:
    info = BrokerInfo(1, (EndPoint("PLAINTEXT", "10.0.0.1", 9092),), timestamp_ms=42)
    value = json.loads(encode_broker_info(info))
    assert value == {
        "version": 5,
        "host": "10.0.0.1",
        "port": 9092,
        "jmx_port": -1,
        "timestamp": "42",
        "endpoints": ["PLAINTEXT://10.0.0.1:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "features": {},
    }
    racked = BrokerInfo(1, info.endpoints, rack="r1", timestamp_ms=42)
    assert json.loads(encode_broker_info(racked))["rack"] == "r1"
    decoded = decode_broker_info(1, encode_broker_info(racked), epoch=99)
    assert decoded == BrokerInfo(1, info.endpoints, rack="r1", timestamp_ms=42, epoch=99)
    assert (decoded.host, decoded.port) == ("10.0.0.1", 9092)


def test_broker_znode_version_1_without_endpoints_is_read() -> None:
    decoded = decode_broker_info(3, b'{"version":1,"host":"h","port":9093,"jmx_port":-1}')
    assert decoded.endpoints == (EndPoint("PLAINTEXT", "h", 9093),)


def test_ipv6_endpoint_round_trips_with_brackets() -> None:
    endpoint = EndPoint("INTERNAL", "::1", 9092)
    assert str(endpoint) == "INTERNAL://[::1]:9092"
    assert EndPoint.parse(str(endpoint)) == endpoint
    with pytest.raises(ZkDataError):
        EndPoint.parse("localhost:9092")


def test_topic_znode_is_version_2_and_lists_only_changing_partitions() -> None:
    assignment = TopicAssignment("t", {1: (2, 3), 0: (1, 2)}, adding_replicas={0: (2,), 1: ()})
    assert encode_topic_assignment(assignment) == (
        b'{"version":2,"partitions":{"0":[1,2],"1":[2,3]},'
        b'"adding_replicas":{"0":[2]},"removing_replicas":{}}'
    )
    decoded = decode_topic_assignment("t", encode_topic_assignment(assignment), zk_version=4)
    assert decoded.partitions == {0: (1, 2), 1: (2, 3)}
    assert decoded.adding_replicas == {0: (2,)}
    assert decoded.zk_version == 4


def test_topic_znode_with_an_id_is_version_3_with_kafkas_string_form() -> None:
    topic_id = bytes(range(16))
    assignment = TopicAssignment("t", {0: (1,)}, topic_id=topic_id)
    encoded = encode_topic_assignment(assignment)
    assert encoded.startswith(b'{"version":3,"topic_id":"AAECAwQFBgcICQoLDA0ODw","partitions"')
    assert decode_topic_assignment("t", encoded).topic_id == topic_id
    assert decode_topic_assignment("t", b'{"version":2,"partitions":{}}').topic_id is None
    with pytest.raises(ZkDataError):
        decode_topic_assignment("t", b'{"version":3,"topic_id":"short","partitions":{}}')


def test_new_topic_ids_are_random_version_4_never_reserved_nor_dash_led() -> None:
    rng = random.Random(7)
    ids = {new_topic_id(rng) for _ in range(2000)}
    assert len(ids) == 2000
    for topic_id in ids:
        assert topic_id[6] >> 4 == 4  # version 4
        assert not topic_id_str(topic_id).startswith("-")
        assert parse_topic_id(topic_id_str(topic_id)) == topic_id


def test_topic_znode_version_1_has_no_reassignment_fields() -> None:
    decoded = decode_topic_assignment("t", b'{"version":1,"partitions":{"0":[1]}}')
    assert decoded.partitions == {0: (1,)}
    assert decoded.adding_replicas == {} and decoded.removing_replicas == {}


def test_partition_state_carries_the_znode_version_as_zk_version() -> None:
    state = LeaderAndIsr(leader=1, leader_epoch=4, isr=(1, 2), controller_epoch=3, zk_version=9)
    assert encode_partition_state(state) == (
        b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}'
    )
    assert decode_partition_state(TP, encode_partition_state(state), 9) == state


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b"not json",
        b'{"leader":"1","leader_epoch":0,"isr":[],"controller_epoch":1}',
        b'{"leader":1,"leader_epoch":0,"isr":[true],"controller_epoch":1}',
        b'{"leader":1,"leader_epoch":0,"controller_epoch":1}',
    ],
)
def test_malformed_partition_state_names_the_znode(data: bytes) -> None:
    with pytest.raises(ZkDataError, match=partition_state_path(TP)):
        decode_partition_state(TP, data, 0)


def test_topic_config_values_are_strings() -> None:
    data = encode_topic_config({"retention.ms": "1000", "cleanup.policy": "delete"})
    assert data == b'{"version":1,"config":{"cleanup.policy":"delete","retention.ms":"1000"}}'
    assert decode_topic_config("t", data) == {"retention.ms": "1000", "cleanup.policy": "delete"}
    assert encode_config_change("topics/t") == b'{"version":2,"entity_path":"topics/t"}'


def test_config_change_notification_names_its_entity_and_refuses_other_json() -> None:
    path = "/config/changes/config_change_0000000001"
    assert decode_config_change(encode_config_change("topics/t"), path) == "topics/t"
    for bad in (b"[]", b'{"version":2}', b'{"entity_path":7}', b"\xff"):
        with pytest.raises(ZkDataError, match=path):
            decode_config_change(bad, path)


def test_isr_change_and_preferred_election_lists() -> None:
    data = encode_partition_list([TopicPartition("b", 1), TopicPartition("a", 0)])
    assert data == (
        b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":1}]}'
    )
    assert decode_partition_list(data, "/x") == {TopicPartition("a", 0), TopicPartition("b", 1)}


def test_log_dir_event_is_kafkas_failure_notification_naming_the_broker() -> None:
    data = encode_log_dir_event(7)
    assert data == b'{"version":1,"broker":7,"event":1}'
    path = log_dir_event_path("log_dir_event_0000000003")
    assert path == "/log_dir_event_notification/log_dir_event_0000000003"
    assert decode_log_dir_event(data, path) == 7
    with pytest.raises(ZkDataError, match="log_dir_event_0000000003"):
        decode_log_dir_event(b'{"version":1,"event":1}', path)


def test_reassignment_json_names_target_replicas() -> None:
    data = encode_reassignment({TP: [2, 3]})
    assert data == b'{"version":1,"partitions":[{"topic":"orders","partition":3,"replicas":[2,3]}]}'
    assert decode_reassignment(data) == {TP: (2, 3)}
    with pytest.raises(ZkDataError):
        decode_reassignment(b'{"version":1,"partitions":[{"topic":"orders","partition":3}]}')


replica_lists = st.lists(st.integers(0, 1000), max_size=5).map(tuple)


@given(st.dictionaries(st.integers(0, 500), replica_lists, max_size=20))
def test_any_assignment_round_trips(partitions: dict[int, tuple[int, ...]]) -> None:
    assignment = TopicAssignment("t", partitions)
    assert decode_topic_assignment("t", encode_topic_assignment(assignment)) == assignment


@given(
    st.builds(
        LeaderAndIsr,
        leader=st.integers(-2, 1000),
        leader_epoch=st.integers(0, 2**31 - 1),
        isr=replica_lists,
        controller_epoch=st.integers(0, 2**31 - 1),
        zk_version=st.integers(0, 2**31 - 1),
    )
)
def test_any_partition_state_round_trips(state: LeaderAndIsr) -> None:
    assert decode_partition_state(TP, encode_partition_state(state), state.zk_version) == state


def test_a_brokers_kafka_listener_is_a_second_endpoint_of_its_znode() -> None:
    endpoints = (EndPoint("PLAINTEXT", "h", 9092), EndPoint(KAFKA_LISTENER, "h", 19092))
    value = json.loads(encode_broker_info(BrokerInfo(1, endpoints, timestamp_ms=1)))
    assert value["endpoints"] == ["PLAINTEXT://h:9092", "KAFKA://h:19092"]
    assert value["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT",
        "KAFKA": "PLAINTEXT",
    }
    assert (value["host"], value["port"]) == ("h", 9092)  # the msgpack listener stays first
    decoded = decode_broker_info(1, encode_broker_info(BrokerInfo(1, endpoints)))
    assert decoded.kafka_address == ("h", 19092)
    assert BrokerInfo(2, endpoints[:1]).kafka_address is None


def test_a_brokers_znode_gives_each_listener_its_security_protocol() -> None:
    endpoints = (EndPoint("SASL_SSL", "h", 9092), EndPoint(KAFKA_LISTENER, "h", 19092))
    protocols = (("SASL_SSL", "SASL_SSL"), (KAFKA_LISTENER, "SSL"))
    info = BrokerInfo(1, endpoints, security_protocols=protocols)
    value = json.loads(encode_broker_info(info))
    assert value["listener_security_protocol_map"] == {"SASL_SSL": "SASL_SSL", "KAFKA": "SSL"}
    decoded = decode_broker_info(1, encode_broker_info(info))
    assert decoded.security_protocol(KAFKA_LISTENER) == "SSL"
    assert decoded.security_protocol("OTHER") == "PLAINTEXT"
