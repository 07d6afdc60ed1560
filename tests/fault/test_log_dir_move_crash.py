"""kill -9 of a broker in the middle of a log-dir move, then a restart: the log is
intact, the move resumes from the -future dir and finishes, no -future dir is left."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from minibroker.client.admin import Admin
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from tests.support.broker_process import BrokerProcess

TOPIC = "crashmove"
VALUE_SIZE = 8192
RECORDS = 2500  # ~20 MB
THROTTLE = 2 * 1024 * 1024  # the first run copies ~2 MB/s: killed well before the end
SESSION = "zookeeper.session.timeout.ms=4000"  # a killed broker's registration ends soon


@contextmanager
def broker_process(root: Path, zk_connect: str) -> Iterator[BrokerProcess]:
    """Broker 1 over two log dirs, its first start throttling log-dir moves; killed on exit."""
    broker = BrokerProcess(
        1,
        [root / "logs-0", root / "logs-1"],
        zk_connect,
        root / "broker.out",
        settings=(SESSION, f"replica.alter.log.dirs.io.max.bytes.per.second={THROTTLE}"),
    )
    try:
        yield broker
    finally:
        broker.kill()


def partition_dirs(broker: BrokerProcess) -> list[Path]:
    return [p for d in broker.log_dirs for p in d.iterdir() if p.name.startswith(f"{TOPIC}-0")]


async def wait_for(condition: Callable[[], Awaitable[bool]], what: str, timeout: float) -> None:
    with trio.move_on_after(timeout):
        while not await condition():
            await trio.sleep(0.2)
        return
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_broker_killed_mid_move_resumes_the_move_and_loses_nothing(
    tmp_path: Path, zk_connect: str
) -> None:
    with broker_process(tmp_path, zk_connect) as broker:
        await broker.start()
        bootstrap = f"127.0.0.1:{broker.port}"
        acked: dict[int, bytes] = {}
        async with Admin(bootstrap) as admin:
            await admin.create_topic(TOPIC, 1, 1)
            async with Producer(bootstrap, acks=1, batch_size=256 * 1024) as producer:
                deliveries = [
                    producer.send_nowait(TOPIC, b"%08d" % i + bytes(VALUE_SIZE), partition=0)
                    for i in range(RECORDS)
                ]
                await producer.flush()
                for i, delivery in enumerate(deliveries):
                    acked[(await delivery.result()).offset] = b"%08d" % i
            [home] = [
                d
                for d in await admin.describe_log_dirs()
                if any(r.topic == TOPIC for r in d.replicas)
            ]
            target = next(d for d in broker.log_dirs if str(d) != home.path)
            assert await admin.alter_replica_log_dirs({(TOPIC, 0, 1): str(target)}) == {
                (TOPIC, 0, 1): None
            }

            async def copying() -> bool:
                for d in await admin.describe_log_dirs():
                    for r in d.replicas:
                        if r.topic == TOPIC and r.is_future and r.size > 2 * THROTTLE:
                            return True
                return False

            await wait_for(copying, "the copy to be under way", 60)
        broker.kill()  # kill -9 in the middle of the copy
        assert any(p.name.endswith("-future") for p in partition_dirs(broker))

        broker.settings = (SESSION,)  # unthrottled now: the resumed move finishes quickly
        await broker.start()  # on the same port
        async with Admin(bootstrap) as admin:

            async def finished() -> bool:
                names = [p.name for p in partition_dirs(broker)]
                return names == [f"{TOPIC}-0"] and (target / f"{TOPIC}-0").is_dir()

            await wait_for(finished, "the resumed move to finish", 120)
        values: dict[int, bytes] = {}
        async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([(TOPIC, 0)])
            await consumer.seek_to_beginning()
            while len(values) < len(acked):
                for record in await consumer.poll(timeout_ms=2000, max_records=5000):
                    assert record.offset not in values
                    assert record.value is not None
                    values[record.offset] = record.value[:8]
        assert values == acked
        assert not any(p.name.endswith("-future") for d in broker.log_dirs for p in d.iterdir())
