"""confluent-kafka's verifiable producer and consumer (``confluent_kafka.kafkatest``, the
clients Kafka's own system tests drive through JSON events on stdout) in a short
produce/consume-with-rebalance run, checked as those system tests check it: every
record the producer had acknowledged is consumed, nothing is consumed that was not
acknowledged, offsets are consumed in order per partition, and the group's committed
offsets end at the log end.

The run: two consumers join one group, the producer sends; a third consumer joins
(rebalance) and one of the first two is stopped with SIGTERM (rebalance) while records
flow. confluent-kafka 2.16's kafkatest is still Python 2 in two places: it calls
``dict.iteritems`` in ``VerifiableClient.set_config`` and puts keys and values as bytes
into its JSON events; ``start`` runs each client through a launcher that hands it a
dict with ``iteritems`` and decodes bytes before ``send``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import confluent_kafka
import pytest

from tests.support.cluster import LocalCluster
from tests.support.judges import ToolSession

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

CLIENT = (
    f"confluent-kafka {confluent_kafka.version()} kafkatest"
    f" (librdkafka {confluent_kafka.libversion()[0]})"
)
TOPIC = "verifiable"
GROUP = "verifiable-group"
RECORDS = 3000


@dataclass
class Client:
    """A kafkatest client process and the events it printed."""

    name: str
    process: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    reader: threading.Thread | None = None

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["name"] == name]


def start(module: str, name: str, *args: str) -> Client:
    # The kafkatest scripts import their helper as a top-level module (script style).
    code = (
        "import os, runpy, sys\n"
        "import confluent_kafka.kafkatest as kafkatest\n"
        "here = os.path.dirname(kafkatest.__file__)\n"
        "sys.path.insert(0, here)\n"
        "from verifiable_client import VerifiableClient\n"
        "class Args(dict):\n"
        "    def iteritems(self):\n"
        "        return iter(self.items())\n"
        "send = VerifiableClient.send\n"
        "VerifiableClient.send = lambda self, d: send(self, {k: v.decode() "
        "if isinstance(v, bytes) else v for k, v in d.items()})\n"
        "set_config = VerifiableClient.set_config\n"
        "VerifiableClient.set_config = staticmethod("
        "lambda conf, args: set_config(conf, Args(args)))\n"
        f"runpy.run_path(os.path.join(here, '{module}.py'), run_name='__main__')\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    client = Client(name, process)
    client.reader = threading.Thread(target=client.read, daemon=True)
    client.reader.start()
    return client


def consumer(cluster: LocalCluster, name: str) -> Client:
    return start(
        "verifiable_consumer",
        name,
        *("--topic", TOPIC, "--group-id", GROUP, "--broker-list", cluster.kafka_bootstrap),
        *("--session-timeout", "10000", "--verbose", "--reset-policy", "earliest"),
    )


def wait_for(condition: Any, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.judge(CLIENT, "verifiable producer and consumers with rebalances, checked")
def test_verifiable_clients_consume_every_acknowledged_record_through_rebalances(
    cluster: LocalCluster,
) -> None:
    tools = ToolSession(cluster.kafka_bootstrap)
    tools.create_topic(TOPIC, 4)
    assert tools.run()[TOPIC].exit == 0
    clients = [consumer(cluster, "c1"), consumer(cluster, "c2")]
    try:
        wait_for(lambda: all(c.named("partitions_assigned") for c in clients), "first assignment")
        producer = start(
            "verifiable_producer",
            "producer",
            *("--topic", TOPIC, "--broker-list", cluster.kafka_bootstrap),
            *("--max-messages", str(RECORDS), "--throughput", "500", "--acks", "-1"),
        )
        clients.append(producer)
        wait_for(lambda: len(producer.named("producer_send_success")) > RECORDS // 4, "sends")
        clients.append(consumer(cluster, "c3"))  # joins: a rebalance
        wait_for(lambda: len(producer.named("producer_send_success")) > RECORDS // 2, "sends")
        clients[0].process.send_signal(signal.SIGTERM)  # leaves: another rebalance
        assert producer.process.wait(timeout=120) == 0
        acked = {
            (e["partition"], e["offset"]): e["value"]
            for e in producer.named("producer_send_success")
        }
        assert producer.named("producer_send_error") == []
        assert len(acked) == RECORDS

        readers = [c for c in clients if c.name in ("c1", "c2", "c3")]

        def consumed() -> dict[tuple[int, int], str]:
            return {
                (e["partition"], e["offset"]): e["value"]
                for c in readers
                for e in c.named("record_data")
            }

        wait_for(lambda: set(acked) <= set(consumed()), "every acknowledged record consumed")
        log_end: dict[int, int] = defaultdict(int)
        for partition, offset in acked:
            log_end[partition] = max(log_end[partition], offset + 1)

        def committed() -> dict[int, int]:
            final: dict[int, int] = {}
            for c in readers:
                for event in c.named("offsets_committed"):
                    if event["success"]:
                        for o in event["offsets"]:
                            final[o["partition"]] = max(final.get(o["partition"], 0), o["offset"])
            return final

        wait_for(lambda: committed() == dict(log_end), "commits at the log end", timeout=60)
    finally:
        for client in clients:
            if client.process.poll() is None:
                client.process.send_signal(signal.SIGTERM)
        for client in clients:
            try:
                client.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                client.process.kill()

    everything = consumed()
    assert everything.items() >= acked.items()  # the same value at each acknowledged offset
    assert set(everything) == set(acked)  # nothing consumed that was not acknowledged
    rebalances = sum(len(c.named("partitions_assigned")) for c in readers)
    assert rebalances >= 4, rebalances  # c1, c2 at start; c3 joined; c1 left
