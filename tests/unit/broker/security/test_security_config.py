"""Listener security in the broker config and Kafka's client properties: names,
protocols and logins are read as Kafka reads them, and a setup that cannot work fails
at start naming the key."""

from __future__ import annotations

import re

import pytest

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.security.security import inter_broker_security, listener_security
from minibroker.net.security import ClientSecurity, jaas_credentials
from minibroker.protocol.errors import ConfigError

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="p\\"w";'
)


def config(**values: str) -> BrokerConfig:
    return BrokerConfig.from_properties(None, {k.replace("_", "."): v for k, v in values.items()})


def test_the_msgpack_listener_is_named_by_its_scheme_and_carries_inter_broker_traffic() -> None:
    plain = config(listeners="127.0.0.1:0")
    assert (plain.listener_name, plain.inter_broker_listener) == ("PLAINTEXT", "PLAINTEXT")
    sasl = config(listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_jaas_config=JAAS)
    assert sasl.inter_broker_listener == "SASL_PLAINTEXT"
    security = listener_security(sasl, "SASL_PLAINTEXT")
    assert security.uses_sasl and security.ssl_context is None
    assert security.mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    login = inter_broker_security(sasl)
    assert login is not None
    assert (login.mechanism, login.username, login.password) == ("SCRAM-SHA-512", "broker", 'p"w')
    assert inter_broker_security(plain) is None


def test_kafkas_protocol_map_gives_any_listener_name_a_protocol() -> None:
    named = config(
        listeners="INTERNAL://127.0.0.1:0",
        listener_security_protocol_map="INTERNAL:SASL_PLAINTEXT,KAFKA:SASL_PLAINTEXT",
        kafka_listeners="127.0.0.1:0",
        sasl_jaas_config=JAAS,
    )
    assert named.security_protocol("INTERNAL") == "SASL_PLAINTEXT"
    assert named.security_protocol("KAFKA") == "SASL_PLAINTEXT"


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"listeners": "SSL://h:1"}, "ssl.certificate.location"),
        ({"listeners": "KAFKA://h:1"}, "listeners"),
        ({"listeners": "h:1", "inter.broker.listener.name": "OTHER"}, "inter.broker.listener.name"),
        ({"listeners": "h:1", "security.inter.broker.protocol": "SSL"}, "security.inter.broker"),
        ({"listener.security.protocol.map": "A:NOPE"}, "listener.security.protocol.map"),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
        ({"ssl.client.auth": "always"}, "ssl.client.auth"),
    ],
)
def test_a_listener_setup_that_cannot_work_fails_naming_the_key(
    values: dict[str, str], key: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(key)):
        BrokerConfig.from_properties(None, values)


def test_a_sasl_inter_broker_listener_without_the_brokers_login_fails() -> None:
    with pytest.raises(ConfigError, match=re.escape("sasl.jaas.config")):
        inter_broker_security(config(listeners="SASL_PLAINTEXT://h:1"))


def test_client_properties_read_as_kafka_clients_read_them() -> None:
    assert ClientSecurity.from_properties({}) == ClientSecurity()
    scram = ClientSecurity.from_properties(
        {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "pw",
            "bootstrap.servers": "ignored:1",
        }
    )
    assert (scram.protocol, scram.mechanism, scram.username, scram.password) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-256",
        "alice",
        "pw",
    )
    assert not scram.uses_ssl
    java_style = ClientSecurity.from_properties(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS}
    )
    assert (java_style.username, java_style.password) == ("broker", 'p"w')
    assert ClientSecurity.from_properties({"security.protocol": "SSL"}).uses_ssl


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.username"),
        ({"security.protocol": "SSL", "ssl.ca.location": "/no/such/ca.pem"}, "ssl.ca.location"),
    ],
)
def test_bad_client_properties_fail_naming_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(key)):
        ClientSecurity.from_properties(props)


def test_jaas_options_are_read_with_escapes() -> None:
    assert jaas_credentials('x required username="a b" password="c\\\\d";') == ("a b", "c\\d")
    assert jaas_credentials("nothing here") == (None, None)
