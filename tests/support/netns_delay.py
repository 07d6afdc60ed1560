"""Holds every packet of one NFQUEUE for a fixed time, then lets it go: link latency
without ``sch_netem`` (see tests/support/netns.py for why).

    ip netns exec NS python -m tests.support.netns_delay --queue 7 --delay-ms 200

How this works: it speaks nfnetlink_queue over a raw ``AF_NETLINK`` socket (no C
library needed). It binds the queue in copy-meta mode (the kernel sends each packet's id,
not its bytes), with fail-open (a full queue lets packets through rather than dropping
them), prints ``ready``, then for each queued packet issues an ``NF_ACCEPT`` verdict
``delay`` seconds after it arrived. The delay is constant, so packets leave in the order
they came. Killing the process unbinds the queue; the iptables rule's
``--queue-bypass`` then lets packets pass undelayed.

Message layouts (include/uapi/linux/netfilter/nfnetlink_queue.h): a netlink header
(``len u32, type u16, flags u16, seq u32, pid u32``, host order), ``nfgenmsg``
(``family u8, version u8, queue u16`` big-endian), then attributes
(``len u16, type u16`` host order, payload padded to 4 bytes; payload fields big-endian).
"""

from __future__ import annotations

import argparse
import select
import socket
import struct
import time
from collections import deque
from collections.abc import Iterator

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQA_CFG_F_FAIL_OPEN = 1
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NF_ACCEPT = 1
QUEUE_MAXLEN = 65536  # packets the kernel may hold for us (the delay fills it)
RECEIVE_BUFFER = 16 << 20  # bytes: a burst of queued packets must not overflow it
HEADER = struct.Struct("=IHHII")
NFGENMSG = struct.Struct("!BBH")
ATTRIBUTE = struct.Struct("=HH")


def attribute(kind: int, payload: bytes) -> bytes:
    body = ATTRIBUTE.pack(ATTRIBUTE.size + len(payload), kind) + payload
    return body + b"\0" * (-len(body) % 4)


def message(kind: int, queue: int, attributes: bytes, seq: int = 0) -> bytes:
    body = NFGENMSG.pack(socket.AF_UNSPEC, 0, queue) + attributes
    msg_type = (NFNL_SUBSYS_QUEUE << 8) | kind
    return HEADER.pack(HEADER.size + len(body), msg_type, NLM_F_REQUEST, seq, 0) + body


def bind(sock: socket.socket, queue: int) -> None:
    config = [
        attribute(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, socket.AF_INET)),
        attribute(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)),
        attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)),
        # flags are only read together with their mask, in the same message
        attribute(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN))
        + attribute(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)),
    ]
    for seq, attr in enumerate(config, start=1):
        sock.send(message(NFQNL_MSG_CONFIG, queue, attr, seq))


def packet_ids(data: bytes) -> Iterator[int]:
    """The packet ids of the queued-packet messages in one netlink read."""
    offset = 0
    while offset + HEADER.size <= len(data):
        length, msg_type, _, _, _ = HEADER.unpack_from(data, offset)
        if length < HEADER.size:
            return
        if msg_type == NLMSG_ERROR:
            (error,) = struct.unpack_from("=i", data, offset + HEADER.size)
            if error:
                raise OSError(-error, "nfnetlink_queue refused a request")
        elif msg_type == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            at = offset + HEADER.size + NFGENMSG.size
            end = offset + length
            while at + ATTRIBUTE.size <= end:
                size, kind = ATTRIBUTE.unpack_from(data, at)
                if size < ATTRIBUTE.size:
                    break
                if kind & 0x7FFF == NFQA_PACKET_HDR:
                    (packet_id,) = struct.unpack_from("!I", data, at + ATTRIBUTE.size)
                    yield packet_id
                    break
                at += (size + 3) & ~3
        offset += (length + 3) & ~3


def serve(queue: int, delay: float) -> None:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    sock.bind((0, 0))
    bind(sock, queue)
    print("ready", flush=True)
    held: deque[tuple[float, int]] = deque()
    while True:
        timeout = max(0.0, held[0][0] - time.monotonic()) if held else None
        readable, _, _ = select.select([sock], [], [], timeout)
        if readable:
            now = time.monotonic()
            for packet_id in packet_ids(sock.recv(1 << 20)):
                held.append((now + delay, packet_id))
        now = time.monotonic()
        while held and held[0][0] <= now:
            _, packet_id = held.popleft()
            verdict = attribute(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet_id))
            sock.send(message(NFQNL_MSG_VERDICT, queue, verdict))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=int, required=True)
    args = parser.parse_args()
    serve(args.queue, args.delay_ms / 1000)


if __name__ == "__main__":
    main()
