"""The machine's floor under bench/round_trip.py: send-and-wait over loopback with no work.

    python3 bench/round_trip_floor.py [--round-trips 50000] [--same-cpu]

bench/round_trip.py measures a one-record produce, sent and waited for, against a real
broker. This bench measures what the same exchange costs when neither side does any
work, so its figures are a bound no broker on this machine can beat. A client sends a
130-byte request and waits for a 30-byte answer, ``--round-trips`` times in a row, over
a TCP connection on 127.0.0.1 with TCP_NODELAY, against three pairings:

- ``c``: a server and a client in C (compiled here with ``cc``), a read and a write
  each per request: what the kernel and the machine cost.
- ``trio_server_c_client``: the smallest Trio server, one coroutine per connection that
  reads the socket's descriptor and waits with ``trio.lowlevel.wait_readable`` when it
  is empty (as the broker does), answering the C client: the best any Trio broker can do.
- ``trio``: that server answering the smallest Trio client (the same loop on the other
  side): the best a Trio broker and a Trio client can do together.

For each: round trips per second, microseconds per round trip, and the server's CPU time
per request (user + system, and each apart, measured by the server from its first
request to the client's hang-up). ``--same-cpu`` pins every process to the first CPU
this one may run on, which takes the wake-up of a sleeping CPU out of each round trip:
the difference shows what that wake-up costs on this machine. The last line of stdout is
one JSON object. Without a C compiler the two pairings with the C client are reported as
skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from trio.lowlevel import wait_readable

REQUEST_SIZE = 130
ANSWER = b"a" * 30
READ_SIZE = 65536
WARMUP = 2000
TIMEOUT_S = 300.0

# One program, two roles: ``serve`` listens on an ephemeral port, prints it, answers one
# connection, and prints its CPU time per request when the client hangs up; ``send PORT
# N`` makes WARMUP round trips, then N timed ones, and prints their rate.
C_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>

static double seconds(struct timeval t) { return t.tv_sec + t.tv_usec / 1e6; }

static double wall_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    int on = 1;
    char buf[65536];
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (argc == 2 && strcmp(argv[1], "serve") == 0) {
        int listener = socket(AF_INET, SOCK_STREAM, 0);
        socklen_t len = sizeof addr;
        if (bind(listener, (struct sockaddr *)&addr, sizeof addr) || listen(listener, 1)
            || getsockname(listener, (struct sockaddr *)&addr, &len)) {
            perror("listen");
            return 1;
        }
        printf("%d\n", ntohs(addr.sin_port));
        fflush(stdout);
        int conn = accept(listener, NULL, NULL);
        setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        long answered = 0;
        struct rusage start, end;
        for (;;) {
            ssize_t n = read(conn, buf, sizeof buf);
            if (n <= 0) break;
            if (answered == 0) getrusage(RUSAGE_SELF, &start);
            if (write(conn, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 30) != 30) break;
            answered++;
        }
        getrusage(RUSAGE_SELF, &end);
        printf("%ld %.3f %.3f\n", answered,
               (seconds(end.ru_utime) - seconds(start.ru_utime)) / answered * 1e6,
               (seconds(end.ru_stime) - seconds(start.ru_stime)) / answered * 1e6);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "send") == 0) {
        int warmup = atoi(argv[3]), count = atoi(argv[4]);
        char request[REQUEST_SIZE];
        memset(request, 'r', sizeof request);
        addr.sin_port = htons(atoi(argv[2]));
        int conn = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(conn, (struct sockaddr *)&addr, sizeof addr)) {
            perror("connect");
            return 1;
        }
        setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        double start = 0;
        for (int i = 0; i < warmup + count; i++) {
            if (i == warmup) start = wall_s();
            if (write(conn, request, sizeof request) != sizeof request) return 1;
            if (read(conn, buf, sizeof buf) <= 0) return 1;
        }
        printf("%.6f\n", wall_s() - start);
        return 0;
    }
    fprintf(stderr, "usage: floor serve | floor send PORT WARMUP COUNT\n");
    return 2;
}
"""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--round-trips", type=int, default=50_000)
    p.add_argument("--same-cpu", action="store_true", help="pin every process to one CPU")
    return p.parse_args()


def read_now(fd: int) -> bytes | None:
    """What the socket holds (b"" at its end), or None when it holds nothing yet."""
    try:
        return os.read(fd, READ_SIZE)
    except BlockingIOError:
        return None


async def trio_serve() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    print(listener.getsockname()[1], flush=True)
    await wait_readable(listener)
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.setblocking(False)
    fd = conn.fileno()
    answered = 0
    start = resource.getrusage(resource.RUSAGE_SELF)
    while True:
        data = read_now(fd)
        if data is None:
            await wait_readable(fd)
            continue
        if not data:
            break
        if answered == 0:
            start = resource.getrusage(resource.RUSAGE_SELF)
        os.write(fd, ANSWER)
        answered += 1
    end = resource.getrusage(resource.RUSAGE_SELF)
    user_us = (end.ru_utime - start.ru_utime) / answered * 1e6
    system_us = (end.ru_stime - start.ru_stime) / answered * 1e6
    print(answered, f"{user_us:.3f}", f"{system_us:.3f}", flush=True)


async def trio_send(port: int, warmup: int, count: int) -> None:
    conn = socket.create_connection(("127.0.0.1", port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.setblocking(False)
    fd = conn.fileno()
    request = b"r" * REQUEST_SIZE
    start = 0.0
    for i in range(warmup + count):
        if i == warmup:
            start = time.perf_counter()
        os.write(fd, request)
        while not read_now(fd):  # a small answer comes whole; b"" would be the server gone
            await wait_readable(fd)
    print(f"{time.perf_counter() - start:.6f}", flush=True)
    conn.close()


def compile_c(workdir: Path) -> Path | None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    source = workdir / "floor.c"
    source.write_text(C_SOURCE)
    binary = workdir / "floor"
    define = f"-DREQUEST_SIZE={REQUEST_SIZE}"
    subprocess.run([compiler, "-O2", define, "-o", str(binary), str(source)], check=True)
    return binary


def pair(server: list[str], client: list[str], round_trips: int) -> dict[str, Any]:
    """Run ``server serve``, point ``client send`` at the port it prints, read both results."""
    with subprocess.Popen([*server, "serve"], stdout=subprocess.PIPE, text=True) as serving:
        assert serving.stdout is not None
        port = serving.stdout.readline().strip()
        sending = subprocess.run(
            [*client, "send", port, str(WARMUP), str(round_trips)],
            capture_output=True,
            text=True,
            check=True,
            timeout=TIMEOUT_S,
        )
        answered, user_us, system_us = serving.stdout.read().split()
        serving.wait(timeout=TIMEOUT_S)
    seconds = float(sending.stdout)
    assert int(answered) == WARMUP + round_trips, (answered, round_trips)
    return {
        "round_trips_per_s": round(round_trips / seconds),
        "us_per_round_trip": round(seconds / round_trips * 1e6, 1),
        "server_cpu_us_per_request": round(float(user_us) + float(system_us), 1),
        "server_user_us_per_request": round(float(user_us), 1),
        "server_system_us_per_request": round(float(system_us), 1),
    }


def main() -> None:
    # The Trio roles speak as the C program does: ``serve``, ``send PORT WARMUP COUNT``.
    if sys.argv[1:2] == ["serve"]:
        trio.run(trio_serve)
        return
    if sys.argv[1:2] == ["send"]:
        port, warmup, count = map(int, sys.argv[2:5])
        trio.run(trio_send, port, warmup, count)
        return
    args = parse_args()
    if args.same_cpu:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # children inherit it
    trio_side = [sys.executable, __file__]
    figures: dict[str, Any] = {"round_trips": args.round_trips, "same_cpu": args.same_cpu}
    with tempfile.TemporaryDirectory(prefix="mb-floor-") as workdir:
        binary = compile_c(Path(workdir))
        if binary is None:
            figures["c"] = figures["trio_server_c_client"] = {"skipped": "no C compiler"}
        else:
            c_side = [str(binary)]
            figures["c"] = pair(c_side, c_side, args.round_trips)
            figures["trio_server_c_client"] = pair(trio_side, c_side, args.round_trips)
        figures["trio"] = pair(trio_side, trio_side, args.round_trips)
    figures["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
