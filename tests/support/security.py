"""Secured brokers for tests: SCRAM users written to ZooKeeper, a local CA, and the
broker properties of SASL / SSL listeners."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from minibroker.broker.broker import Broker
from minibroker.client.cli.dev_certs import LocalCa, issue, make_ca
from minibroker.node.node import Node
from minibroker.protocol.sasl import (
    SCRAM_MECHANISMS,
    format_scram_credential,
    make_scram_credential,
)
from minibroker.zk.client import ZkClient
from minibroker.zk.scram_users import set_scram_credential
from tests.support.broker import broker_config

BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
ALL_MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


async def add_user(
    zk: ZkClient, name: str, password: str, mechanisms: Iterable[str] = SCRAM_MECHANISMS
) -> None:
    for mechanism in mechanisms:
        credential = make_scram_credential(mechanism, password)
        await set_scram_credential(zk, name, mechanism, format_scram_credential(credential))


def jaas(user: str, password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";'
    )


def sasl_properties(protocol: str = "SASL_PLAINTEXT") -> dict[str, str]:
    """A broker whose msgpack listener is ``protocol``, logging in as the broker user."""
    return {
        "listeners": f"{protocol}://127.0.0.1:0",
        "sasl.enabled.mechanisms": ALL_MECHANISMS,
        "sasl.jaas.config": jaas(BROKER_USER, BROKER_PASSWORD),
    }


def ssl_properties(ca: LocalCa, directory: Path, name: str = "broker") -> dict[str, str]:
    issued = issue(ca, directory, name)
    return {
        "ssl.certificate.location": str(issued.certificate),
        "ssl.key.location": str(issued.key),
        "ssl.ca.location": str(ca.certificate),
    }


def local_ca(directory: Path) -> LocalCa:
    return make_ca(directory)


def as_key_words(properties: dict[str, str]) -> dict[str, Any]:
    """Kafka names as ``broker_config`` keyword names (dots become underscores)."""
    return {key.replace(".", "_"): value for key, value in properties.items()}


@asynccontextmanager
async def secured_node(
    log_dir: Path, zk_connect: str, properties: dict[str, str], broker_id: int = 1
) -> AsyncIterator[Broker]:
    """A cluster-mode broker (with its controller candidate) with ``properties``."""
    config = broker_config(
        log_dir,
        broker_id,
        zookeeper_connect=zk_connect,
        zookeeper_session_timeout_ms=4000,
        **as_key_words(properties),
    )
    async with trio.open_nursery() as nursery:
        broker: Broker = await nursery.start(Node(config).run)
        try:
            yield broker
        finally:
            nursery.cancel_scope.cancel()
