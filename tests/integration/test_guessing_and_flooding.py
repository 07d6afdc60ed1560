"""A password cannot be guessed at speed and connections cannot exhaust the broker.

Recipe, on a real cluster-mode broker with a SASL_PLAINTEXT listener: a guesser tries
wrong passwords (PLAIN and SCRAM) on many connections at once while a logged-in client
keeps doing round trips. Every failure is answered only after
``connection.failed.authentication.delay.ms``; once the guesser's address has spent its
burst, its attempts wait for the per-address rate, however many connections it opens,
and the waits are counted; the right password still logs in from that address; the
other client is answered throughout. Then connection floods, on a plaintext broker:
past ``max.connections.per.ip`` (or its override) and ``max.connections`` new
connections are closed at once and counted, the ones held keep working, and a
connection past ``max.connection.creation.rate`` waits its turn.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from minibroker.broker.broker import Broker
from minibroker.broker.security.auth_failures import FAILURE_BURST
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaError, NetworkError, SaslAuthenticationFailedError
from minibroker.zk.client import ZkClient
from tests.support.broker import broker_config, running_broker
from tests.support.security import (
    BROKER_PASSWORD,
    BROKER_USER,
    add_user,
    sasl_properties,
    secured_node,
)

pytestmark = pytest.mark.timeout(120)

DELAY_MS = 100
RATE_PER_S = 2.0
GUESSERS = 8


def login(mechanism: str, password: str) -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", None, mechanism, "alice", password)


async def guess(port: int, mechanism: str) -> float:
    """One wrong login; how long until it was refused."""
    started = trio.current_time()
    with pytest.raises(SaslAuthenticationFailedError):
        async with Connection("127.0.0.1", port, security=login(mechanism, "wrong")):
            pass
    return trio.current_time() - started


async def test_wrong_passwords_are_slow_and_rate_limited_per_address_and_the_right_one_works(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    await add_user(zk_client, BROKER_USER, BROKER_PASSWORD)
    await add_user(zk_client, "alice", "alice-pw")
    properties = sasl_properties() | {
        "connection.failed.authentication.delay.ms": str(DELAY_MS),
        "connection.failed.authentication.rate.per.ip": str(RATE_PER_S),
    }
    async with secured_node(tmp_path, zk_connect, properties) as broker:
        limiter = broker.auth_failures
        probe_times: list[float] = []
        refusal_times: list[float] = []
        attempts = 2 * FAILURE_BURST + 6  # past the burst: the rate applies

        async def probe(done: trio.Event) -> None:
            good = login("SCRAM-SHA-512", "alice-pw")
            async with Connection("127.0.0.1", broker.port, security=good) as conn:
                while not done.is_set():
                    started = time.perf_counter()
                    await conn.request(ApiKey.METADATA, {"topics": []})
                    probe_times.append(time.perf_counter() - started)
                    await trio.sleep(0.01)

        async def guesser(index: int, left: list[int]) -> None:
            while left[0] > 0:
                left[0] -= 1
                mechanism = "PLAIN" if index % 2 else "SCRAM-SHA-256"
                refusal_times.append(await guess(broker.port, mechanism))

        done = trio.Event()
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(probe, done)
            left = [attempts]
            async with trio.open_nursery() as guessers:
                for index in range(GUESSERS):
                    guessers.start_soon(guesser, index, left)
            elapsed = trio.current_time() - started
            done.set()

        assert len(refusal_times) == attempts
        assert min(refusal_times) >= DELAY_MS / 1000 * 0.9  # every failure answered late
        # However many connections: beyond the burst, at most RATE_PER_S a second.
        assert elapsed >= (attempts - FAILURE_BURST - 1) / RATE_PER_S * 0.9
        assert limiter.throttled > 0 and limiter.delayed >= attempts
        assert probe_times, "the logged-in client was never answered"
        # The right password still logs in from the guesser's address.
        async with Connection(
            "127.0.0.1", broker.port, security=login("PLAIN", "alice-pw")
        ) as conn:
            assert (await conn.request(ApiKey.METADATA, {"topics": []}))["brokers"]


async def connections(port: int, count: int) -> list[Connection]:
    opened = []
    for _ in range(count):
        conn = Connection("127.0.0.1", port)
        await conn.connect()
        opened.append(conn)
    return opened


async def is_refused(port: int) -> bool:
    """Whether a new connection is closed before it is answered."""
    try:
        async with Connection("127.0.0.1", port) as conn:
            await conn.request(ApiKey.API_VERSIONS, {}, timeout=5)
    except (NetworkError, KafkaError):
        return True
    return False


async def served(conns: list[Connection]) -> bool:
    for conn in conns:
        await conn.request(ApiKey.API_VERSIONS, {})
    return True


async def test_connections_past_the_limits_are_closed_at_once_and_counted(
    tmp_path: Path,
) -> None:
    config = broker_config(
        tmp_path / "a",
        max_connections=12,
        max_connections_per_ip=4,
    )
    async with running_broker(config) as broker:
        held = await connections(broker.port, 4)
        assert await is_refused(broker.port)  # the 5th from this address
        assert broker.parts.server.closed["max_connections_per_ip"] >= 1
        assert await served(held)
        for conn in held:
            await conn.aclose()
        await wait_for_release(broker, 0)
        assert not await is_refused(broker.port)

    overridden = broker_config(
        tmp_path / "b",
        max_connections=6,
        max_connections_per_ip=2,
        max_connections_per_ip_overrides="127.0.0.1:50",
    )
    async with running_broker(overridden) as broker:
        held = await connections(broker.port, 6)  # the override lifts the per-address cap
        assert await is_refused(broker.port)  # but not max.connections
        assert broker.parts.server.closed["max_connections"] >= 1
        assert await served(held)
        for conn in held:
            await conn.aclose()


async def wait_for_release(broker: Broker, count: int) -> None:
    with trio.fail_after(10):
        while broker.connection_limits.open > count:
            await trio.sleep(0.01)


async def test_connections_faster_than_the_creation_rate_wait_their_turn(tmp_path: Path) -> None:
    config = broker_config(tmp_path, max_connection_creation_rate=5)
    async with running_broker(config) as broker:
        held = await connections(broker.port, 12)
        assert await served(held)  # each answered, after its wait
        assert broker.parts.server.creation_rate.throttle_time_s > 0
        for conn in held:
            await conn.aclose()
