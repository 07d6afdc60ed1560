"""kill -9 of a broker in the middle of a log-dir move, then a restart: the log is
intact, the move resumes from the -future dir and finishes, no -future dir is left."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from client.admin import Admin
from client.consumer import Consumer
from client.producer import Producer

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(rb"broker 1 listening on port (\d+)")
START_ATTEMPTS = 40  # a restart loses to the killed broker's ZooKeeper session a while
TOPIC = "crashmove"
VALUE_SIZE = 8192
RECORDS = 2500  # ~20 MB
THROTTLE = 2 * 1024 * 1024  # the first run copies ~2 MB/s: killed well before the end


class BrokerProcess:
    def __init__(self, root: Path, zk_connect: str) -> None:
        self.root = root
        self.zk_connect = zk_connect
        self.dirs = [root / "logs-0", root / "logs-1"]
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self, **props: object) -> None:
        for _ in range(START_ATTEMPTS):
            if await self._spawn(props):
                return
            await trio.sleep(0.5)
        raise AssertionError("broker did not start: " + self.output()[-2000:])

    async def _spawn(self, props: dict[str, object]) -> bool:
        out = self.root / "broker.out"
        offset = out.stat().st_size if out.exists() else 0
        argv = [
            sys.executable,
            "-m",
            "client.cli.main",
            "broker",
            "--broker-id",
            "1",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--log-dirs",
            ",".join(str(d) for d in self.dirs),
            "--zookeeper",
            self.zk_connect,
            "--set",
            "zookeeper.session.timeout.ms=4000",
        ]
        for key, value in props.items():
            argv += ["--set", f"{key}={value}"]
        with out.open("ab") as sink:
            self.proc = subprocess.Popen(
                argv,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        with trio.move_on_after(30):
            while self.proc.poll() is None:
                found = READY.search(out.read_bytes()[offset:])
                if found:
                    self.port = int(found.group(1))
                    return True
                await trio.sleep(0.05)
            return False
        self.kill()
        return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def output(self) -> str:
        out = self.root / "broker.out"
        return out.read_text(errors="replace") if out.exists() else ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def partition_dirs(self) -> list[Path]:
        return [p for d in self.dirs for p in d.iterdir() if p.name.startswith(f"{TOPIC}-0")]


@contextmanager
def broker_process(root: Path, zk_connect: str) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(root, zk_connect)
    try:
        yield broker
    finally:
        broker.kill()


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
        await broker.start(**{"replica.alter.log.dirs.io.max.bytes.per.second": THROTTLE})
        acked: dict[int, bytes] = {}
        async with Admin(broker.bootstrap) as admin:
            await admin.create_topic(TOPIC, 1, 1)
            async with Producer(broker.bootstrap, acks=1, batch_size=256 * 1024) as producer:
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
            target = next(d for d in broker.dirs if str(d) != home.path)
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
        assert any(p.name.endswith("-future") for p in broker.partition_dirs())

        await broker.start()  # unthrottled now: the resumed move finishes quickly
        async with Admin(broker.bootstrap) as admin:

            async def finished() -> bool:
                names = [p.name for p in broker.partition_dirs()]
                return names == [f"{TOPIC}-0"] and (target / f"{TOPIC}-0").is_dir()

            await wait_for(finished, "the resumed move to finish", 120)
        values: dict[int, bytes] = {}
        async with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([(TOPIC, 0)])
            await consumer.seek_to_beginning()
            while len(values) < len(acked):
                for record in await consumer.poll(timeout_ms=2000, max_records=5000):
                    assert record.offset not in values
                    assert record.value is not None
                    values[record.offset] = record.value[:8]
        assert values == acked
        assert not any(p.name.endswith("-future") for d in broker.dirs for p in d.iterdir())
