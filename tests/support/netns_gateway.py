"""A door from the test process into a private network: loopback ports in the root
namespace, each forwarding to one address inside a network namespace.

    python -m tests.support.netns_gateway --netns NS HOST:PORT [HOST:PORT ...]

prints one JSON line ``{"HOST:PORT": LOCAL_PORT, ...}`` and forwards every connection to
``127.0.0.1:LOCAL_PORT`` to ``HOST:PORT`` until killed.

How this works: a socket belongs to the namespace of the thread that created it. The
gateway starts in the root namespace and opens its listening sockets there, then moves
itself into ``NS`` (setns(2)); every connection it makes afterwards leaves from ``NS``.
So the pytest process, which stays in the root namespace, talks to brokers and
ZooKeeper through 127.0.0.1, while the network sees that traffic come from ``NS``'s own
address (the test's "client" node): cutting the client off a broker cuts the test's
requests too.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import socket
from functools import partial

import trio

CLONE_NEWNET = 0x40000000
CONNECT_TIMEOUT_S = 5.0  # a target cut off by a fault: give up, the caller retries
CHUNK = 1 << 16


def enter_namespace(name: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns into {name}: {os.strerror(errno)}")
    finally:
        os.close(fd)


async def pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
    try:
        while data := await source.receive_some(CHUNK):
            await sink.send_all(data)
        await sink.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass


async def forward(target: tuple[str, int], client: trio.SocketStream) -> None:
    async with client:
        try:
            with trio.fail_after(CONNECT_TIMEOUT_S):
                upstream = await trio.open_tcp_stream(*target)
        except (OSError, trio.TooSlowError):
            return
        async with upstream, trio.open_nursery() as nursery:
            nursery.start_soon(pump, client, upstream)
            nursery.start_soon(pump, upstream, client)


async def serve(listeners: dict[tuple[str, int], socket.socket]) -> None:
    async with trio.open_nursery() as nursery:
        for target, sock in listeners.items():
            listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
            nursery.start_soon(trio.serve_listeners, partial(forward, target), [listener])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--netns", required=True)
    parser.add_argument("targets", nargs="+", metavar="HOST:PORT")
    args = parser.parse_args()
    listeners: dict[tuple[str, int], socket.socket] = {}
    for item in args.targets:
        host, port = item.rsplit(":", 1)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        listeners[(host, int(port))] = sock
    enter_namespace(args.netns)
    ports = {f"{h}:{p}": s.getsockname()[1] for (h, p), s in listeners.items()}
    print(json.dumps(ports), flush=True)
    trio.run(serve, listeners)


if __name__ == "__main__":
    main()
