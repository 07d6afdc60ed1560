"""A plain Trio frame echo over loopback: the ceiling a Trio broker can reach.

    python3 bench/echo.py [--seconds 2]            # figures, one JSON line at the end
    python3 bench/echo.py --serve [--mode echo]    # just the server; prints its port

The server (in its own process, so client and server each get a core) reads frames
with protocol.frames.FrameDecoder and writes each one back unchanged: framing and
socket costs, nothing else. ``--mode answer`` instead decodes each request
(``decode_request``: msgpack + schema validation) and answers ``[correlation_id, {}]``,
the least a real server must do; ``--canned-bytes N`` answers every request with an N-byte
frame (a stand-in for fetch responses).

The client is Trio too, with pre-encoded frames:

- ``rtt_per_s``: one frame at a time;
- ``pipelined_per_s``: ``WINDOW_SMALL`` frames in flight;
- ``mb_s``: 1 MiB frames, ``WINDOW_BIG`` in flight, counting the bytes sent (one way).

Other benches reuse it: ``with echo_process(mode) as port:`` then
``await measure_frames(port, frame, ...)`` (see bench/wire_bench.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minibroker.protocol.api import (
    MalformedRequest,
    RejectedRequest,
    decode_request,
    encode_response,
)
from minibroker.protocol.frames import NEED_DATA, FrameDecoder, encode_frame
from minibroker.protocol.heap import keep_freed_memory

RECEIVE_SIZE: Final = 256 * 1024
"""Bytes per receive on both sides; the broker and Connection use the same figure."""
WINDOW_SMALL: Final = 64
"""Small frames in flight when pipelining (what a busy producer connection sees)."""
WINDOW_BIG: Final = 4
"""1 MiB frames in flight (enough to keep loopback busy, as the broker bench does)."""
JOIN_MAX_BYTES: Final = 64 * 1024
"""Answers up to this size are joined into one send; larger ones are sent piece by piece."""
MAX_FRAME: Final = 1 << 30


async def serve_echo(
    *,
    port: int = 0,
    mode: str = "echo",
    canned_bytes: int = 0,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve on 127.0.0.1:``port`` until cancelled; reports the bound port as started."""
    canned = encode_frame(bytes(canned_bytes)) if canned_bytes else b""

    async def handler(stream: trio.SocketStream) -> None:
        decoder = FrameDecoder(MAX_FRAME)
        async with stream:
            while data := await stream.receive_some(RECEIVE_SIZE):
                decoder.feed(data)
                out: list[bytes | bytearray | memoryview] = []
                while (frame := decoder.next_frame()) is not NEED_DATA:
                    assert isinstance(frame, bytes)
                    if canned:
                        out.append(canned)
                    elif mode == "answer":
                        try:
                            header, _ = decode_request(frame)
                        except (MalformedRequest, RejectedRequest):
                            return
                        out.extend(encode_response(header.correlation_id, {}))
                    else:
                        out.append(len(frame).to_bytes(4, "big"))
                        out.append(frame)
                # Small answers to one received chunk go out in one send (what a batching
                # server does); large frames are sent from their own buffer, uncopied.
                if sum(map(len, out)) <= JOIN_MAX_BYTES:
                    await stream.send_all(out[0] if len(out) == 1 else b"".join(out))
                else:
                    for piece in out:
                        await stream.send_all(piece)

    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handler, listeners)


@contextmanager
def echo_process(mode: str = "echo", canned_bytes: int = 0) -> Iterator[int]:
    """Run ``serve_echo`` in a child process; yields its port, stops it afterwards."""
    args = [sys.executable, str(Path(__file__).resolve()), "--serve", "--mode", mode]
    proc = subprocess.Popen([*args, "--canned-bytes", str(canned_bytes)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("echo server exited before reporting its port")
        yield int(line)
    finally:
        proc.terminate()
        proc.wait(10)


async def _receive_frames(
    stream: trio.SocketStream, decoder: FrameDecoder, count: int, on_frame: trio.Semaphore | None
) -> int:
    """Read ``count`` frames; returns their payload bytes."""
    got = total = 0
    while got < count:
        frame = decoder.next_frame()
        if frame is NEED_DATA:
            data = await stream.receive_some(max(RECEIVE_SIZE, decoder.bytes_needed))
            if not data:
                raise EOFError("server closed the connection")
            decoder.feed(data)
            continue
        assert isinstance(frame, bytes)
        got += 1
        total += len(frame)
        if on_frame is not None:
            on_frame.release()
    return total


async def round_trips(port: int, frame: bytes, seconds: float) -> float:
    """Sequential round trips per second of ``frame`` (a whole frame, prefix included)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    decoder = FrameDecoder(MAX_FRAME)
    async with stream:
        for _ in range(50):  # warm-up
            await stream.send_all(frame)
            await _receive_frames(stream, decoder, 1, None)
        count = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(100):
                await stream.send_all(frame)
                await _receive_frames(stream, decoder, 1, None)
            count += 100
        return count / (time.perf_counter() - start)


async def pipelined(port: int, frame: bytes, count: int, window: int) -> tuple[float, int]:
    """Send ``count`` frames with ``window`` in flight: (seconds, response payload bytes)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    decoder = FrameDecoder(MAX_FRAME)
    credit = trio.Semaphore(window)
    received = 0

    async def receive() -> None:
        nonlocal received
        received = await _receive_frames(stream, decoder, count, credit)

    async with stream:
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive)
            for _ in range(count):
                await credit.acquire()
                await stream.send_all(frame)
        return time.perf_counter() - start, received


async def measure_frames(
    port: int, small_frame: bytes, big_frame: bytes, seconds: float
) -> dict[str, float]:
    """The three echo figures for these frames (see the module docstring)."""
    rtt = await round_trips(port, small_frame, seconds)
    count = max(1000, int(rtt * seconds * 3))
    elapsed, _ = await pipelined(port, small_frame, count, WINDOW_SMALL)
    big_count = 20
    elapsed_big, _ = await pipelined(port, big_frame, big_count, WINDOW_BIG)
    big_count = max(20, int(big_count * seconds / elapsed_big))
    elapsed_big, _ = await pipelined(port, big_frame, big_count, WINDOW_BIG)
    return {
        "rtt_per_s": round(rtt),
        "pipelined_per_s": round(count / elapsed),
        "mb_s": round(len(big_frame) * big_count / elapsed_big / 1e6, 1),
    }


def _sample_frames() -> tuple[bytes, bytes]:
    """A 100-byte and a 1 MiB produce request frame (records are opaque here)."""
    from minibroker.protocol.api import ApiKey, encode_request

    def produce(records: bytes) -> bytes:
        partitions = [{"index": 0, "records": records}]
        body = {
            "acks": 1,
            "timeout_ms": 30_000,
            "topics": [{"name": "t", "partitions": partitions}],
        }
        return encode_frame(encode_request(ApiKey.PRODUCE, 0, 1, "bench", body))

    return produce(b"s" * 100), produce(b"x" * (1 << 20))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--serve", action="store_true", help="only run the server")
    parser.add_argument("--mode", choices=("echo", "answer"), default="echo")
    parser.add_argument("--canned-bytes", type=int, default=0)
    args = parser.parse_args()
    keep_freed_memory()  # the ceiling gets the same allocator tuning as the broker
    if args.serve:

        async def serve() -> None:
            async with trio.open_nursery() as nursery:
                port = await nursery.start(
                    lambda task_status: serve_echo(
                        mode=args.mode, canned_bytes=args.canned_bytes, task_status=task_status
                    )
                )
                print(port, flush=True)

        trio.run(serve)
        return
    small, big = _sample_frames()
    with echo_process(args.mode) as port:
        figures = trio.run(measure_frames, port, small, big, args.seconds)
    print(json.dumps({f"echo_{k}": v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
