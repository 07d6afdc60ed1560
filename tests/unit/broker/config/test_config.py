"""BrokerConfig / TopicConfig: Kafka names, defaults, .properties parsing, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.broker.config.broker_config import BrokerConfig, TopicConfig
from minibroker.broker.config.config_keys import describe_keys
from minibroker.broker.config.config_listeners import parse_endpoint
from minibroker.broker.config.properties import parse_properties
from minibroker.protocol.errors import ConfigError


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config.log_segment_bytes == 1073741824
    assert config.replica_lag_time_max_ms == 30000
    assert config.unclean_leader_election_enable is False
    assert config.retention_ms == 168 * 3_600_000
    assert config.listen_address == ("", 9092)


def test_properties_syntax_comments_separators_escapes_and_continuations() -> None:
    text = (
        "# a comment\n"
        "  ! another comment\n"
        "broker.id=3\n"
        "listeners : PLAINTEXT://127.0.0.1:9093\n"
        "log.dirs /a,\\\n"
        "    /b\n"
        "key\\=with\\:seps = v\\u0041\\tx\n"
        "empty=\n"
        "broker.id=4\n"
    )
    values = parse_properties(text)
    assert values == {
        "broker.id": "4",
        "listeners": "PLAINTEXT://127.0.0.1:9093",
        "log.dirs": "/a,/b",
        "key=with:seps": "vA\tx",
        "empty": "",
    }


def test_file_then_overrides_later_wins(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nlog.dirs=/x,/y\nunclean.leader.election.enable=true\n")
    config = BrokerConfig.from_properties(path, {"broker.id": "7", "log.retention.ms": "1000"})
    assert config.broker_id == 7
    assert config.log_dirs == ["/x", "/y"]
    assert config.unclean_leader_election_enable is True
    assert config.retention_ms == 1000


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("no.such.key", "1"),
        ("broker.id", "abc"),
        ("broker.id", "-5"),
        ("unclean.leader.election.enable", "yes"),
        ("log.message.timestamp.type", "Whenever"),
        ("listeners", "NOSUCH://host:1"),  # a listener name with no security protocol
        ("listeners", "nocolon"),
        ("log.dirs", ""),
    ],
)
def test_unknown_key_or_bad_value_raises_config_error_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig.from_properties(None, {key: value})


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        BrokerConfig.from_properties(tmp_path / "absent.properties")


def test_topic_config_inherits_broker_defaults_and_applies_overrides() -> None:
    broker = BrokerConfig.from_properties(
        None, {"log.segment.bytes": "1024", "min.insync.replicas": "2", "message.max.bytes": "99"}
    )
    topic = broker.topic_config()
    assert topic.segment_bytes == 1024
    assert topic.min_insync_replicas == 2
    assert topic.max_message_bytes == 99
    overridden = broker.topic_config({"message.timestamp.type": "LogAppendTime"})
    assert overridden.log_append_time
    assert overridden.segment_bytes == 1024
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        broker.topic_config({"segment.bytes": "x"})


def test_parse_endpoint_forms() -> None:
    assert parse_endpoint("PLAINTEXT://h:1", "k") == ("h", 1)
    assert parse_endpoint("h:0", "k") == ("h", 0)
    assert parse_endpoint("[::1]:9", "k") == ("::1", 9)
    assert parse_endpoint(":9092", "k") == ("", 9092)


def test_every_key_has_a_doc() -> None:
    for config_type in (BrokerConfig, TopicConfig):
        for name, doc in describe_keys(config_type):
            assert doc, name


def test_kafka_listener_is_off_by_default_and_advertises_a_reachable_host() -> None:
    assert BrokerConfig().kafka_listen_address is None
    assert BrokerConfig().kafka_advertised_address is None
    config = BrokerConfig.from_properties(
        None, {"listeners": "PLAINTEXT://10.0.0.5:9092", "kafka.listeners": ":19092"}
    )
    assert config.kafka_listen_address == ("", 19092)
    assert config.kafka_advertised_address == ("10.0.0.5", 19092)
    advertised = BrokerConfig.from_properties(
        None, {"kafka.listeners": ":0", "kafka.advertised.listeners": "kafka.example:29092"}
    )
    assert advertised.kafka_advertised_address == ("kafka.example", 29092)
    with pytest.raises(ConfigError, match=r"kafka\.listeners"):
        BrokerConfig.from_properties(None, {"kafka.listeners": "no-port"})


def test_compaction_keys_parse_and_topics_inherit_the_cleaner_defaults() -> None:
    config = BrokerConfig.from_properties(
        None,
        {"log.cleaner.min.cleanable.ratio": "0.25", "log.cleaner.delete.retention.ms": "5"},
    )
    topic = config.topic_config({"cleanup.policy": "compact,delete"})
    assert (topic.cleanup_policy, topic.min_cleanable_dirty_ratio) == ("compact,delete", 0.25)
    assert topic.delete_retention_ms == 5
    with pytest.raises(ConfigError, match=r"min\.cleanable\.dirty\.ratio"):
        config.topic_config({"min.cleanable.dirty.ratio": "1.5"})
