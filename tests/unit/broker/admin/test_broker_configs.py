"""Dynamic broker configs: validation, the znode format, and applying the log-dir
throttle to the mover (no ZooKeeper, no network)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from minibroker.broker.admin.broker_configs import (
    FOLLOWER_THROTTLE,
    LEADER_THROTTLE,
    LOG_DIRS_THROTTLE,
    BrokerConfigs,
    decode_broker_config,
    encode_broker_config,
    parse_broker_id,
    validate_broker_configs,
)
from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.logdirs.log_dir_mover import TokenBucket
from minibroker.protocol.errors import InvalidConfigError, InvalidRequestError


def test_the_three_throttle_keys_are_accepted_as_whole_bytes_per_second() -> None:
    typed = validate_broker_configs(
        {LOG_DIRS_THROTTLE: "1000", LEADER_THROTTLE: "5", FOLLOWER_THROTTLE: " 7 "}
    )
    assert typed == {LOG_DIRS_THROTTLE: 1000, LEADER_THROTTLE: 5, FOLLOWER_THROTTLE: 7}


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "fast", "", "9223372036854775808"])
def test_a_throttle_that_is_not_a_positive_long_is_invalid_config_naming_the_key(
    value: str,
) -> None:
    with pytest.raises(InvalidConfigError, match=LOG_DIRS_THROTTLE):
        validate_broker_configs({LOG_DIRS_THROTTLE: value})


def test_a_key_that_is_not_dynamic_is_invalid_config() -> None:
    with pytest.raises(InvalidConfigError, match=r"broker\.rack is not a dynamic"):
        validate_broker_configs({"broker.rack": "r1"})


def test_the_keys_topics_inherit_are_dynamic_and_checked_as_the_broker_checks_them() -> None:
    typed = validate_broker_configs({"log.retention.ms": "1000", "compression.type": "zstd"})
    assert typed == {"log.retention.ms": 1000, "compression.type": "zstd"}
    with pytest.raises(InvalidConfigError, match=r"min\.insync\.replicas"):
        validate_broker_configs({"min.insync.replicas": "0"})


def test_kafkas_per_broker_sasl_login_keys_are_dynamic_but_not_cluster_wide() -> None:
    """Kafka takes them per broker (DynamicListenerConfig) and refuses them at the
    default; librdkafka's 0081_admin sets the first."""
    typed = validate_broker_configs(
        {
            "sasl.kerberos.min.time.before.relogin": "58000",
            "sasl.login.refresh.window.factor": "0.9",
        }
    )
    assert typed == {
        "sasl.kerberos.min.time.before.relogin": 58000,
        "sasl.login.refresh.window.factor": 0.9,
    }
    with pytest.raises(InvalidConfigError, match=r"window\.factor"):
        validate_broker_configs({"sasl.login.refresh.window.factor": "0.2"})
    with pytest.raises(InvalidConfigError, match="cluster-wide default"):
        validate_broker_configs(
            {"sasl.kerberos.min.time.before.relogin": "58000"}, cluster_default=True
        )
    assert validate_broker_configs({"log.retention.ms": "1000"}, cluster_default=True)


@pytest.mark.parametrize("name", ["", "one", "-1", "1 "])
def test_a_broker_resource_must_name_a_broker_id(name: str) -> None:
    with pytest.raises(InvalidRequestError):
        parse_broker_id(name)


def test_the_znode_is_kafkas_version_1_config_object() -> None:
    raw = encode_broker_config({LOG_DIRS_THROTTLE: "100"})
    assert json.loads(raw) == {"version": 1, "config": {LOG_DIRS_THROTTLE: "100"}}
    assert decode_broker_config(raw) == {LOG_DIRS_THROTTLE: "100"}


class FakeMover:
    def __init__(self, rate: float) -> None:
        self.bucket = TokenBucket(rate, clock=lambda: 0.0)


def test_an_override_sets_the_mover_rate_and_removing_it_restores_the_static_value() -> None:
    config = BrokerConfig(replica_alter_log_dirs_io_max_bytes_per_second=5000)
    mover: Any = FakeMover(5000)
    configs = BrokerConfigs(config, mover, zk=None)
    configs.apply_overrides({LOG_DIRS_THROTTLE: "123", LEADER_THROTTLE: "9"})
    assert mover.bucket.rate == 123
    assert configs.overrides == {LOG_DIRS_THROTTLE: 123, LEADER_THROTTLE: 9}
    configs.apply_overrides({})
    assert mover.bucket.rate == 5000


def test_a_bad_stored_override_is_ignored_not_fatal() -> None:
    config = BrokerConfig(replica_alter_log_dirs_io_max_bytes_per_second=5000)
    mover: Any = FakeMover(77)
    BrokerConfigs(config, mover, zk=None).apply_overrides({LOG_DIRS_THROTTLE: "x"})
    assert mover.bucket.rate == 5000
