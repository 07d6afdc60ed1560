"""A private network of Linux network namespaces, and the faults a test injects into it.

How this works: ``Network(["zk", "1", "2", "3", "client"]).create()`` makes one network
namespace per node plus one holding a bridge, and joins each node to the bridge with a
veth pair (``eth0`` inside the node, ``v-<node>`` on the bridge). Every node gets an
address ``10.<a>.<b>.<n>/24`` (``a``, ``b`` random) that exists only inside these
namespaces: the root namespace has no interface, route or rule of ours, so nothing the
test runs can reach, or be reached from, anywhere else. Processes enter a node with
``network.exec_prefix(node)`` (``ip netns exec <ns>``).

Faults are netfilter rules in the *sender's* namespace, so they act on every packet,
established connections included, exactly when added:

- ``cut(a, b)``        a's packets to b are dropped (one way: b still reaches a's input);
- ``partition(groups)`` two nodes that share no group cannot talk at all (a node may
                        sit in several groups: a bridge between them);
- ``isolate(node)``     the node talks to nobody;
- ``slow(node, ms, loss)`` every packet the node sends waits ``ms`` and ``loss`` of them
                        vanish;
- ``heal()``            removes every rule and delay.

Latency is not ``tc qdisc netem``: kernels built without ``sch_netem`` (this project's
CI machines among them) refuse it, and a fault test must not depend on the kernel's
build. Instead the node's outgoing packets go to an NFQUEUE that a small delayer process
(``tests/support/netns_delay.py``) holds for ``ms`` and then accepts; loss is iptables'
``statistic`` match. Both are in every kernel with netfilter.

Names: every namespace is called ``mbnet-<pid>-<n>-<node>`` (``pid`` of the test process,
``n`` a counter), so parallel runs never share one. ``create()`` first removes the
namespaces of test processes that no longer run (a crashed earlier run); ``destroy()``
kills whatever still runs inside this network's namespaces and deletes them. Both need
root.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence

from tests.support.broker_process import ROOT, child_env

PREFIX = "mbnet"
NAME = re.compile(rf"^{PREFIX}-(\d+)-\d+-")
BRIDGE = "br0"
DELAY_QUEUE = 7  # the NFQUEUE number the delayer serves (per namespace, so any will do)
COMMAND_TIMEOUT_S = 20.0  # one `ip`/`iptables` call; they take milliseconds
DELAYER_READY_TIMEOUT_S = 10.0  # a Python start on a loaded machine

_counter = itertools.count()


def run(*argv: str) -> str:
    """Run a network command; raise with its stderr if it fails."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def namespaces() -> list[str]:
    """Every named network namespace on this machine."""
    return [line.split()[0] for line in run("ip", "netns", "list").splitlines() if line.strip()]


def remove_namespace(name: str) -> None:
    """Kill every process inside ``name``, then delete it (gone already is fine)."""
    try:
        pids = run("ip", "netns", "pids", name).split()
    except RuntimeError:
        return
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=COMMAND_TIMEOUT_S)


def remove_leftovers() -> list[str]:
    """Delete the namespaces left behind by test processes that died; their names."""
    removed = []
    for name in namespaces():
        found = NAME.match(name)
        if found is None or _alive(int(found.group(1))):
            continue
        remove_namespace(name)
        removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Network:
    """Nodes, each in its own namespace on one private bridge (see the module docstring)."""

    def __init__(self, nodes: Sequence[str], *, rng: random.Random | None = None) -> None:
        rng = rng or random.Random()
        self.nodes = list(nodes)
        self.tag = f"{PREFIX}-{os.getpid()}-{next(_counter)}"
        subnet = f"10.{rng.randrange(1, 255)}.{rng.randrange(0, 256)}"
        self.addresses = {node: f"{subnet}.{i + 2}" for i, node in enumerate(self.nodes)}
        self._delayers: dict[str, subprocess.Popen[bytes]] = {}

    def namespace(self, node: str) -> str:
        return f"{self.tag}-{node}"

    @property
    def bridge_namespace(self) -> str:
        return f"{self.tag}-bridge"

    def exec_prefix(self, node: str) -> list[str]:
        """Prefix a command with this to run it inside ``node``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(node)]

    # -- lifecycle --------------------------------------------------------------------

    def create(self) -> Network:
        remove_leftovers()
        try:
            bridge = self.bridge_namespace
            run("ip", "netns", "add", bridge)
            run("ip", "-n", bridge, "link", "add", BRIDGE, "type", "bridge")
            run("ip", "-n", bridge, "link", "set", BRIDGE, "up")
            for node in self.nodes:
                self._join(node)
        except BaseException:
            self.destroy()
            raise
        return self

    def _join(self, node: str) -> None:
        ns, bridge, port = self.namespace(node), self.bridge_namespace, f"v-{node}"
        run("ip", "netns", "add", ns)
        run("ip", "-n", bridge, "link", "add", port, "type", "veth", "peer", "eth0", "netns", ns)
        run("ip", "-n", bridge, "link", "set", port, "master", BRIDGE)
        run("ip", "-n", bridge, "link", "set", port, "up")
        run("ip", "-n", ns, "addr", "add", f"{self.addresses[node]}/24", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")

    def destroy(self) -> None:
        """Stop the delayers, kill what runs inside, delete every namespace. Idempotent."""
        for delayer in self._delayers.values():
            delayer.kill()
            delayer.wait()
        self._delayers.clear()
        for node in self.nodes:
            remove_namespace(self.namespace(node))
        remove_namespace(self.bridge_namespace)

    def __enter__(self) -> Network:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    # -- faults -----------------------------------------------------------------------

    def _iptables(self, node: str, *rule: str) -> None:
        run(*self.exec_prefix(node), "iptables", "-w", *rule)

    def cut(self, a: str, b: str) -> None:
        """Drop every packet ``a`` sends to ``b`` (``b`` to ``a`` still flows)."""
        self._iptables(a, "-I", "OUTPUT", "-d", self.addresses[b], "-j", "DROP")

    def partition(self, groups: Iterable[Iterable[str]]) -> None:
        """Nodes that share no group cannot reach each other, either way."""
        groups = [set(group) for group in groups]
        for a, b in itertools.permutations(self.nodes, 2):
            if not any(a in group and b in group for group in groups):
                self.cut(a, b)

    def isolate(self, node: str) -> None:
        """``node`` reaches nobody and nobody reaches it."""
        for other in self.nodes:
            if other != node:
                self.cut(node, other)
                self.cut(other, node)

    def slow(self, node: str, ms: int, loss: float = 0.0) -> None:
        """Every packet ``node`` sends waits ``ms``; a ``loss`` fraction is dropped."""
        if loss:
            self._iptables(
                node,
                *("-A", "OUTPUT", "-o", "eth0", "-m", "statistic", "--mode", "random"),
                *("--probability", f"{loss:.4f}", "-j", "DROP"),
            )
        if ms and node not in self._delayers:
            self._delayers[node] = self._start_delayer(node, ms)
            self._iptables(
                node,
                *("-A", "OUTPUT", "-o", "eth0", "-j", "NFQUEUE"),
                *("--queue-num", str(DELAY_QUEUE), "--queue-bypass"),
            )

    def _start_delayer(self, node: str, ms: int) -> subprocess.Popen[bytes]:
        argv = [
            *self.exec_prefix(node),
            *(sys.executable, "-m", "tests.support.netns_delay"),
            *("--queue", str(DELAY_QUEUE), "--delay-ms", str(ms)),
        ]
        delayer = subprocess.Popen(
            argv, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, start_new_session=True
        )
        assert delayer.stdout is not None
        line = delayer.stdout.readline()  # the delayer says "ready" once bound to its queue
        if not line.startswith(b"ready"):
            delayer.kill()
            delayer.wait()
            raise RuntimeError(f"the delayer for {node} did not start: {line!r}")
        return delayer

    def heal(self) -> None:
        """Remove every cut, partition, delay and loss."""
        for node in self.nodes:
            self._iptables(node, "-F")
        for delayer in self._delayers.values():
            delayer.kill()
            delayer.wait()
        self._delayers.clear()

    def rules(self, node: str) -> str:
        """``iptables -S`` inside ``node`` (for failure messages)."""
        return run(*self.exec_prefix(node), "iptables", "-w", "-S")
