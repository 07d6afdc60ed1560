"""Many partitions: a 3-broker cluster holding N partitions with replication factor 3.

    python3 bench/partitions_bench.py [--partitions 1000,3000,10000] [--quick]
                                      [--py-spy DIR]

For each N, a real ZooKeeper and three ``minibroker broker`` processes on 127.0.0.1
(ids 1-3, each holding all N replicas), ``TOPICS`` topics of N / TOPICS partitions, then,
in order (the issue's bars in brackets):

``create_s``                 a CreateTopics per topic, all at once (as Kafka's admin
    client sends them; one request may name at most ``request.max.partitions``
    partitions) until every partition has a leader in every broker's Metadata [<= 30 s];
    ``create_in_sync_s`` until every ISR is full too;
``rss_mb``                   the largest broker RSS once in sync [<= 300 MB];
``metadata_ms``              an all-topics Metadata on the msgpack listener, from the last
    request byte sent to the last response byte read, undecoded: the broker's time plus
    loopback, median of ``METADATA_SAMPLES`` [<= 50 ms]; the ``metadata_*_ms`` figures
    are its parts, measured in this process on a MetadataCache of N partitions: applying
    an UpdateMetadata of all of them, building the answer after it and after one
    partition changed, and encoding it for each listener;
``disk_kb_per_partition_*``  ``du`` of the three brokers' dirs / 3N, after creation, after
    the clean restart and after the kill -9 restart [<= 64 KB];
``controlled_shutdown_s``    SIGTERM to a broker other than the controller (leading about
    N / 3 partitions) until the controller's Metadata names another leader for each of
    them; ``shutdown_exit_s`` until the process exited [<= 10 s];
``clean_restart_*``          that broker started again: until it serves (its "listening"
    line: logs loaded, registered), until every ISR is full again;
``kill9_restart_*``          SIGKILL, start at once: until it serves [<= 10 s], until every
    ISR is full again with every leader epoch moved on (the controller saw the bounce)
    [<= 30 s]; ``kill9_restart_load_s`` is what its log manager says loading took and
    ``kill9_progress_lines`` how many load-progress lines it wrote;
``kill9_down_restart_*``     SIGKILL, start once the controller took it out of every ISR
    (``kill9_isr_shrink_s``): the issue's drill;
``controller_failover_s``    SIGKILL of the controller's broker until every partition has a
    live leader in a surviving broker's Metadata; ``..._over_session_s`` is that minus
    the session timeout [<= 3 s];
``zk_requests``              ZooKeeper requests per phase (the server's packet counter,
    ``srvr``; pings included): a path costing one request per partition shows as ~N.

Prints one JSON object per N, then ``{"summary": {N: {figure: value}}}``. ``--quick``
runs N = 200 (tests/integration/test_partitions_bench.py). ``--py-spy DIR`` samples
every broker during every phase with py-spy (``pip install py-spy``; not a dependency)
and writes the raw stacks to ``DIR/nN-phase-brokerB.txt`` and a summary of where each
phase's CPU went to ``DIR/nN-summary.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.network.kafka_codec import advertise_kafka_listeners
from minibroker.protocol.api import (
    ApiKey,
    RequestHeader,
    encode_packed_response,
    encode_request,
    latest_version,
)
from minibroker.protocol.frames import encode_frame
from minibroker.protocol.kafka.codec import encode_response as kafka_encode_response
from minibroker.protocol.kafka.reshape import response_from_newest
from minibroker.zk.client import open_zk_client
from minibroker.zk.server import ZooKeeperServer, packets_received
from tests.support.cluster import ProcessCluster

TOPICS = 10
"""Topics the partitions are spread over (the issue's drill: 10 topics of 200)."""
SESSION_TIMEOUT_MS = 6000
"""Shorter than Kafka's 18 s so the failover phase does not dominate the run; the bar
is relative to it."""
PROPERTIES: dict[str, Any] = {
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    "auto.leader.rebalance.enable": "false",
    "replica.lag.time.max.ms": 30_000,  # Kafka's default: no ISR churn from a busy machine
    "replica.fetch.wait.max.ms": 500,  # Kafka's default
    "controlled.shutdown.retry.backoff.ms": 1000,
}
METADATA_SAMPLES = 20
KAFKA_METADATA_VERSION = 12
"""What Kafka 3.x clients ask for."""
POLL_S = 0.25
"""How often cluster state is read while waiting: the figures' resolution."""
ALL_TOPICS = {"topics": None, "allow_auto_topic_creation": False}
METADATA_VERSION = latest_version(ApiKey.METADATA)
PHASE_TIMEOUT_S = 600.0
READY = re.compile(rb"broker \d+ listening on port \d+")
LOADED = re.compile(r"loaded (\d+)/(\d+) logs in \S+ \((\d+) recovered\) in ([\d.]+) s")
PROGRESS = re.compile(r"loaded \d+/\d+ logs in \S+ \(\d+ recovered\) (?:after|in) ")


PY_SPY_RATE = 50
"""Samples per second per broker: enough to see a phase of a second, cheap enough not
to slow the brokers measured."""


class Sampler:
    """py-spy attached to broker processes for one phase at a time (``--py-spy``)."""

    def __init__(self, out_dir: Path | None, prefix: str) -> None:
        self.out_dir = out_dir
        self.prefix = prefix
        self._running: list[subprocess.Popen[bytes]] = []
        self.files: dict[str, list[Path]] = {}

    def attach(self, phase: str, broker_id: int, pid: int) -> None:
        if self.out_dir is None:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"{self.prefix}-{phase}-broker{broker_id}.txt"
        self.files.setdefault(phase, []).append(path)
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        command = [
            py_spy, "record", "--pid", str(pid), "--format", "raw", "--output", str(path),
            "--rate", str(PY_SPY_RATE), "--nolineno", "--nonblocking",
        ]  # fmt: skip
        self._running.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )

    def stop(self) -> None:
        for proc in self._running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for proc in self._running:
            proc.wait()
        self._running = []

    def summary(self, top: int = 25) -> str:
        """Per phase: the functions holding the most samples, with and without their
        callees, over every broker of the phase (seconds of CPU at PY_SPY_RATE)."""
        lines = []
        for phase, paths in self.files.items():
            own: Counter[str] = Counter()
            inclusive: Counter[str] = Counter()
            for path in paths:
                if not path.exists():
                    continue
                for line in path.read_text().splitlines():
                    stack, _, count = line.rpartition(" ")
                    frames = stack.split(";")
                    own[frames[-1]] += int(count)
                    for frame in set(frames):
                        inclusive[frame] += int(count)
            lines.append(f"== {self.prefix} {phase}: {sum(own.values()) / PY_SPY_RATE:.1f} s CPU")
            lines.append("-- own time")
            lines += [f"{n / PY_SPY_RATE:8.2f} s  {f}" for f, n in own.most_common(top)]
            lines.append("-- with callees (minibroker frames)")
            ours = [(f, n) for f, n in inclusive.most_common() if "minibroker" in f or "(" not in f]
            lines += [f"{n / PY_SPY_RATE:8.2f} s  {f}" for f, n in ours[:top]]
        return "\n".join(lines)


class Bench:
    """One cluster of three brokers and the probes the phases share."""

    def __init__(
        self, root: Path, zk_connect: str, zk_server: ZooKeeperServer, sampler: Sampler
    ) -> None:
        self.root = root
        self.zk_server = zk_server
        self.cluster = ProcessCluster(root, zk_connect, size=3, properties=PROPERTIES)
        self.sampler = sampler
        self.zk_requests: dict[str, int] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count ZooKeeper requests over the phase and sample the live brokers."""
        before = self.zk_packets()
        for broker_id, broker in self.cluster.brokers.items():
            if broker.running and broker.proc is not None:
                self.sampler.attach(name, broker_id, broker.proc.pid)
        try:
            yield
        finally:
            self.sampler.stop()
            self.zk_requests[name] = self.zk_packets() - before

    async def restart(
        self,
        broker_id: int,
        phase: str,
        in_sync: Callable[[], Awaitable[bool]],
        figures: dict[str, Any],
    ) -> None:
        """Start the stopped broker as ``phase``: ``<phase>_serving_s`` until it serves,
        ``<phase>_in_sync_s`` until ``in_sync`` holds."""
        with self.phase(phase):
            started = time.monotonic()
            await self.start(broker_id, phase)
            figures[f"{phase}_serving_s"] = round(time.monotonic() - started, 2)
            await self.wait(in_sync, f"full ISRs after {phase}")
            figures[f"{phase}_in_sync_s"] = round(time.monotonic() - started, 2)

    async def start(self, broker_id: int, phase: str) -> None:
        """Start a broker and sample it from its first moments."""
        broker = self.cluster.brokers[broker_id]
        old = broker.proc
        async with trio.open_nursery() as nursery:

            async def attach() -> None:
                while broker.proc is old:
                    await trio.sleep(0.005)
                assert broker.proc is not None
                self.sampler.attach(phase, broker_id, broker.proc.pid)

            nursery.start_soon(attach)
            await self.cluster.start(broker_id)

    # --- cluster state ---------------------------------------------------------------

    async def partitions(self, broker_id: int) -> dict[tuple[str, int], dict[str, Any]]:
        """Every partition as ``broker_id``'s Metadata describes it. Read over a raw
        socket and unpacked without the client's validation: the bench polls this for
        10,000 partitions several times a second and must not take the brokers' CPU."""
        frame = encode_frame(
            encode_request(ApiKey.METADATA, METADATA_VERSION, 1, "bench", ALL_TOPICS)
        )
        host, port = self.cluster.address(broker_id)
        with trio.fail_after(30):
            stream = await trio.open_tcp_stream(host, port)
            async with stream:
                await stream.send_all(frame)
                payload = await _receive_frame(stream)
        _, response = msgpack.unpackb(payload)
        return {
            (topic["name"], p["partition_index"]): p
            for topic in response["topics"]
            for p in topic["partitions"]
        }

    async def controller(self) -> int:
        """The controller's id, once every broker knows it."""
        found: set[int] = set()

        async def agreed() -> bool:
            found.clear()
            for broker_id in self.cluster.live:
                body = {"topics": []}
                response = await self.cluster.request(broker_id, ApiKey.METADATA, body)
                found.add(int(response["controller_id"]))
            return len(found) == 1 and min(found) >= 0

        await self.wait(agreed, "a controller")
        return found.pop()

    async def wait(self, condition: Callable[[], Awaitable[bool]], what: str) -> float:
        """Seconds until ``condition()`` holds, polled every POLL_S."""
        started = time.monotonic()
        with trio.move_on_after(PHASE_TIMEOUT_S):
            while True:
                try:
                    if await condition():
                        return time.monotonic() - started
                except (OSError, KeyError, trio.TooSlowError) as exc:
                    print(f"  ({what}: {exc!r})", file=sys.stderr)
                except Exception as exc:  # a broker going away answers with errors
                    print(f"  ({what}: {exc!r})", file=sys.stderr)
                await trio.sleep(POLL_S)
        raise TimeoutError(f"timed out waiting for {what}")

    def led_everywhere(
        self, expected: int, brokers: list[int], exclude: frozenset[int] = frozenset()
    ) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            for broker_id in brokers:
                parts = await self.partitions(broker_id)
                if len(parts) < expected:
                    return False
                if any(p["leader_id"] < 0 or p["leader_id"] in exclude for p in parts.values()):
                    return False
            return True

        return check

    def in_sync(
        self, expected: int, broker_id: int, epochs_before: dict[Any, int] | None = None
    ) -> Callable[[], Awaitable[bool]]:
        """Every ISR full in ``broker_id``'s Metadata (and, given ``epochs_before``,
        every leader epoch past those: the controller has acted since)."""

        async def check() -> bool:
            parts = await self.partitions(broker_id)
            if epochs_before is not None and any(
                p["leader_epoch"] <= epochs_before.get(tp, -1) for tp, p in parts.items()
            ):
                return False
            return len(parts) >= expected and all(
                len(p["isr_nodes"]) == len(p["replica_nodes"]) for p in parts.values()
            )

        return check

    # --- measurements ----------------------------------------------------------------

    def rss_mb(self) -> float:
        worst = 0
        for broker in self.cluster.brokers.values():
            if broker.running and broker.proc is not None:
                status = Path(f"/proc/{broker.proc.pid}/status").read_text()
                kb = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
                worst = max(worst, kb)
        return round(worst / 1024, 1)

    def disk_kb_per_partition(self, replicas: int) -> float:
        dirs = [str(self.root / f"broker-{i}") for i in self.cluster.brokers]
        out = subprocess.run(["du", "-sk", "--total", *dirs], capture_output=True, text=True)
        total_kb = int(out.stdout.strip().splitlines()[-1].split()[0])
        return round(total_kb / replicas, 1)

    def zk_packets(self) -> int:
        """ZooKeeper's count of packets received (every request is one)."""
        return packets_received("127.0.0.1", self.zk_server.port)

    async def metadata_ms(self, broker_id: int) -> float:
        """Median time of an all-topics Metadata: request sent to the response's last
        byte read, never decoded (the client's decoding is not the broker's time)."""
        frame = encode_frame(
            encode_request(ApiKey.METADATA, METADATA_VERSION, 1, "bench", ALL_TOPICS)
        )
        samples = []
        host, port = self.cluster.address(broker_id)
        with socket.create_connection((host, port), timeout=30) as conn:
            for _ in range(METADATA_SAMPLES):
                started = time.perf_counter()
                conn.sendall(frame)
                header = _read_exactly(conn, 4)
                _read_exactly(conn, int.from_bytes(header, "big"))
                samples.append(time.perf_counter() - started)
        return round(statistics.median(samples) * 1000, 2)

    def output(self, broker_id: int) -> str:
        return self.cluster.output(broker_id)


def metadata_costs(partitions: int) -> dict[str, float]:
    """What answering Metadata for all topics costs a broker, measured here in-process
    on a MetadataCache of ``partitions`` partitions (TOPICS topics, 3 brokers, RF 3), in
    ms (the median of METADATA_SAMPLES): applying an UpdateMetadata of every partition,
    building the answer after it and after one partition changed, and encoding it for
    each listener. The wire figure (``metadata_ms``) is a warm answer's encoding plus
    loopback."""
    brokers = [
        {"id": b, "host": "127.0.0.1", "port": 9000 + b, "rack": None}
        | {"kafka_host": "127.0.0.1", "kafka_port": 9100 + b}
        for b in (1, 2, 3)
    ]

    def update(states: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "controller_id": 1,
            "controller_epoch": 1,
            "broker_epoch": -1,
            "partition_states": states,
            "live_brokers": brokers,
        }

    everything = [
        {
            "topic_name": f"t{p % TOPICS}",
            "partition_index": p // TOPICS,
            "controller_epoch": 1,
            "leader": 1 + p % 3,
            "leader_epoch": 0,
            "isr": [1, 2, 3],
            "zk_version": 0,
            "replicas": [1, 2, 3],
            "offline_replicas": [],
        }
        for p in range(partitions)
    ]
    one = [everything[0] | {"isr": [1, 2], "zk_version": 1}]
    samples: dict[str, list[float]] = {}
    for _ in range(METADATA_SAMPLES):
        for name, ms in _metadata_sample(update(everything), update(one)).items():
            samples.setdefault(name, []).append(ms)
    return {name: round(statistics.median(values), 2) for name, values in samples.items()}


def _metadata_sample(everything: dict[str, Any], one: dict[str, Any]) -> dict[str, float]:
    header = RequestHeader(ApiKey.METADATA, KAFKA_METADATA_VERSION, 7, "bench")
    request = {"topics": None, "allow_auto_topic_creation": False}
    cache = MetadataCache(1)
    ticks = [time.perf_counter()]

    def tick() -> None:
        ticks.append(time.perf_counter())

    cache.update(everything)
    tick()
    cache.metadata_response(None)
    tick()
    cache.update(one)
    ticks.append(time.perf_counter())
    body = cache.metadata_response(None)
    tick()
    encode_packed_response(7, body)
    tick()
    answer = advertise_kafka_listeners(body, "node_id")  # what KafkaCodec does
    answer = response_from_newest(ApiKey.METADATA, header.api_version, request, answer)
    kafka_encode_response(header, answer)
    tick()
    names = (
        "metadata_update_all_ms",
        "metadata_build_all_ms",
        None,
        "metadata_build_after_one_ms",
        "metadata_encode_msgpack_ms",
        "metadata_encode_kafka_ms",
    )
    return {
        name: (ticks[i + 1] - ticks[i]) * 1000 for i, name in enumerate(names) if name is not None
    }


async def _receive_frame(stream: trio.SocketStream) -> bytes:
    buffer = bytearray()
    while len(buffer) < 4 or len(buffer) < 4 + int.from_bytes(buffer[:4], "big"):
        chunk = await stream.receive_some(1 << 20)
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buffer += chunk
    return bytes(buffer[4:])


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = conn.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


async def measure(
    root: Path, zk_server: ZooKeeperServer, partitions: int, py_spy: Path | None
) -> dict[str, Any]:
    zk_connect = zk_server.connect_string + f"/bench{partitions}"
    async with open_zk_client(zk_server.connect_string) as zk:
        await zk.ensure_path(f"/bench{partitions}")
    bench = Bench(root, zk_connect, zk_server, Sampler(py_spy, f"n{partitions}"))
    cluster = bench.cluster
    replicas = 3 * partitions
    figures: dict[str, Any] = {"partitions": partitions}
    try:
        async with cluster:
            await _measure_phases(bench, partitions, replicas, figures)
    finally:
        bench.sampler.stop()
    figures["zk_requests"] = bench.zk_requests
    if py_spy is not None:
        (py_spy / f"n{partitions}-summary.txt").write_text(bench.sampler.summary() + "\n")
    return figures


async def _measure_phases(
    bench: Bench, partitions: int, replicas: int, figures: dict[str, Any]
) -> None:
    cluster = bench.cluster
    controller = await bench.controller()
    per_topic = partitions // TOPICS

    # 1. Create every topic, as Kafka's admin client would: all at once, one CreateTopics
    # per topic (a request may name at most request.max.partitions partitions).
    async def create(topic: str) -> None:
        body = {
            "topics": [{"name": topic, "num_partitions": per_topic, "replication_factor": 3}],
            "timeout_ms": 120_000,
        }
        response = await cluster.request(controller, ApiKey.CREATE_TOPICS, body, timeout=180)
        errors = [t for t in response["topics"] if t["error_code"]]
        assert not errors, errors

    with bench.phase("create"):
        started = time.monotonic()
        async with trio.open_nursery() as nursery:
            for i in range(TOPICS):
                nursery.start_soon(create, f"t{i}")
        figures["create_response_s"] = round(time.monotonic() - started, 2)
        await bench.wait(bench.led_everywhere(partitions, cluster.live), "leaders")
        figures["create_s"] = round(time.monotonic() - started, 2)
        await bench.wait(bench.in_sync(partitions, controller), "full ISRs")
        figures["create_in_sync_s"] = round(time.monotonic() - started, 2)
    figures["rss_mb"] = bench.rss_mb()
    figures["metadata_ms"] = await bench.metadata_ms(controller)
    figures |= metadata_costs(partitions)
    figures["disk_kb_per_partition_created"] = bench.disk_kb_per_partition(replicas)

    # 2. Controlled shutdown of a broker other than the controller.
    victim = next(b for b in cluster.live if b != controller)
    before = await bench.partitions(controller)
    led = {tp for tp, p in before.items() if p["leader_id"] == victim}
    figures["controlled_shutdown_partitions"] = len(led)

    async def moved() -> bool:
        parts = await bench.partitions(controller)
        return all(parts[tp]["leader_id"] not in (victim, -1) for tp in led)

    with bench.phase("controlled_shutdown"):
        started = time.monotonic()
        exit_s: list[float] = []

        async def stop() -> None:
            await cluster.terminate(victim, PHASE_TIMEOUT_S)
            exit_s.append(time.monotonic() - started)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop)
            figures["controlled_shutdown_s"] = round(await bench.wait(moved, "leaders moved"), 2)
        figures["shutdown_exit_s"] = round(exit_s[0], 2)

    # 3. Clean restart.
    await bench.restart(victim, "clean_restart", bench.in_sync(partitions, controller), figures)
    figures["disk_kb_per_partition_clean_restart"] = bench.disk_kb_per_partition(replicas)

    # 4. kill -9 and restart at once, as a supervisor would. The controller sees the
    # broker bounce: it takes it out of every ISR (a new leader epoch) and the leaders
    # take it back once it caught up. In sync means both happened.
    epochs = {tp: p["leader_epoch"] for tp, p in (await bench.partitions(controller)).items()}
    cluster.kill(victim)
    offset = len(bench.output(victim))
    await bench.restart(
        victim, "kill9_restart", bench.in_sync(partitions, controller, epochs), figures
    )
    output = bench.output(victim)[offset:]
    loaded = LOADED.search(output)
    figures["kill9_restart_load_s"] = float(loaded.group(4)) if loaded else None
    figures["kill9_recovered_logs"] = int(loaded.group(3)) if loaded else None
    figures["kill9_progress_lines"] = len(PROGRESS.findall(output))
    figures["disk_kb_per_partition_kill9_restart"] = bench.disk_kb_per_partition(replicas)
    figures["rss_mb_after_restart"] = bench.rss_mb()

    # 5. kill -9, down until the controller took it out of every ISR (the drill,
    # where the restart took minutes), then restart.
    cluster.kill(victim)

    async def out_of_every_isr() -> bool:
        parts = await bench.partitions(controller)
        return all(victim not in p["isr_nodes"] for p in parts.values())

    figures["kill9_isr_shrink_s"] = round(await bench.wait(out_of_every_isr, "ISR shrink"), 2)
    await bench.restart(
        victim, "kill9_down_restart", bench.in_sync(partitions, controller), figures
    )

    # 6. kill -9 of the controller's broker.
    survivors = [b for b in cluster.live if b != controller]
    with bench.phase("controller_failover"):
        started = time.monotonic()
        cluster.kill(controller)
        failover = await bench.wait(
            bench.led_everywhere(partitions, survivors, frozenset({controller})), "failover"
        )
    figures["controller_failover_s"] = round(failover, 2)
    figures["controller_failover_over_session_s"] = round(failover - SESSION_TIMEOUT_MS / 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1000,3000,10000")
    parser.add_argument("--quick", action="store_true", help="one small run (N = 200)")
    parser.add_argument("--py-spy", type=Path, metavar="DIR", help="sample the brokers")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="run in DIR and keep it")
    args = parser.parse_args()
    sizes = [200] if args.quick else [int(n) for n in args.partitions.split(",")]
    summary: dict[str, Any] = {}
    load = os.getloadavg()
    with (
        contextlib.nullcontext(str(args.keep))
        if args.keep
        else tempfile.TemporaryDirectory(prefix="partitions-bench-") as tmp,
        ZooKeeperServer(Path(tmp) / "zookeeper", force_sync=False) as zk_server,
    ):
        for size in sizes:
            root = Path(tmp) / f"n{size}"
            figures = trio.run(measure, root, zk_server, size, args.py_spy)
            figures["load_before"] = [round(x, 2) for x in load]
            load = os.getloadavg()
            figures["load_after"] = [round(x, 2) for x in load]
            print(json.dumps(figures), flush=True)
            summary[str(size)] = figures
    print(json.dumps({"summary": summary}))


if __name__ == "__main__":
    main()
