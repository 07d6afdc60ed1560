"""The network-fault harness (tests/support/netns.py) does what its fault tests rely on:
each fault drops exactly the packets it names, ``heal`` undoes all of it, ``slow``
delays, and nothing is left behind.

Probes are UDP datagrams between tiny Python processes in the nodes' namespaces, so a
one-way cut can be told apart from a two-way one (TCP needs both directions).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.netns import Network, namespaces

PORT = 7000
PROBE_TIMEOUT_S = 2.0  # a datagram crosses the bridge in microseconds; loaded CI aside
RECEIVE = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(float(sys.argv[3]))
print("listening", flush=True)
try:
    data, _ = s.recvfrom(100)
    print(data.decode(), flush=True)
except TimeoutError:
    print("nothing", flush=True)
"""
SEND = """
import socket, sys
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"hello", (sys.argv[1], int(sys.argv[2])))
"""
ECHO_RTT = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
start = time.monotonic()
s.sendto(b"ping", (sys.argv[1], int(sys.argv[2])))
s.recvfrom(100)
print(time.monotonic() - start)
"""
ECHO_SERVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
data, peer = s.recvfrom(100)
s.sendto(data, peer)
"""


@pytest.fixture
def network() -> Iterator[Network]:
    with Network(["a", "b", "c"]) as net:
        yield net


def python_in(network: Network, node: str, script: str, *args: str) -> subprocess.Popen[str]:
    argv = [*network.exec_prefix(node), sys.executable, "-c", script, *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)


def delivered(network: Network, sender: str, receiver: str) -> bool:
    """Does a datagram from ``sender`` reach ``receiver``?"""
    address = network.addresses[receiver]
    listener = python_in(network, receiver, RECEIVE, address, str(PORT), str(PROBE_TIMEOUT_S))
    assert listener.stdout is not None
    assert listener.stdout.readline() == "listening\n"
    python_in(network, sender, SEND, address, str(PORT)).wait(timeout=30)
    answer = listener.stdout.readline().strip()
    listener.wait(timeout=30)
    return answer == "hello"


def round_trip_s(network: Network, sender: str, receiver: str) -> float:
    address = network.addresses[receiver]
    echo = python_in(network, receiver, ECHO_SERVER, address, str(PORT))
    assert echo.stdout is not None
    assert echo.stdout.readline() == "listening\n"
    probe = python_in(network, sender, ECHO_RTT, address, str(PORT))
    out, _ = probe.communicate(timeout=30)
    echo.wait(timeout=30)
    return float(out)


def test_cut_drops_one_direction_only_until_healed(network: Network) -> None:
    assert delivered(network, "a", "b")
    network.cut("a", "b")
    assert not delivered(network, "a", "b")
    assert delivered(network, "b", "a")
    network.heal()
    assert delivered(network, "a", "b")


def test_partition_separates_groups_and_a_node_in_both_bridges_them(network: Network) -> None:
    network.partition([["a", "c"], ["b", "c"]])
    assert not delivered(network, "a", "b")
    assert not delivered(network, "b", "a")
    assert delivered(network, "a", "c")
    assert delivered(network, "c", "b")
    network.heal()
    network.isolate("c")
    assert not delivered(network, "a", "c")
    assert not delivered(network, "c", "b")
    assert delivered(network, "a", "b")


def test_slow_delays_what_the_node_sends_and_heal_removes_the_delay(network: Network) -> None:
    network.slow("a", 300)
    assert round_trip_s(network, "a", "b") >= 0.3
    assert round_trip_s(network, "b", "a") >= 0.3  # the echo is what a sends here
    network.heal()
    assert round_trip_s(network, "a", "b") < 0.3


def test_loss_drops_that_share_of_what_the_node_sends(network: Network) -> None:
    network.slow("a", 0, loss=1.0)
    assert not delivered(network, "a", "b")
    assert delivered(network, "b", "a")


def test_destroy_removes_every_namespace_it_made() -> None:
    network = Network(["a", "b"]).create()
    made = [network.namespace("a"), network.namespace("b"), network.bridge_namespace]
    assert set(made) <= set(namespaces())
    network.destroy()
    assert not set(made) & set(namespaces())
