"""Wire protocol costs: codec figures, the Trio echo ceiling, and client Connection rates.

    python3 bench/wire_bench.py [--seconds 1]

Codec (single thread, no I/O; ops/s unless named otherwise, best of five windows):

- ``produce_decode_{1kib,1mib}``: ``decode_request`` of a Produce payload whose records
  are 1 KiB / 1 MiB (msgpack unpack + compiled schema validation + defaults);
  ``produce_validate_only_1kib``: the validator alone on an unpacked body;
  ``produce_frame_decode_1kib``: FrameDecoder + decode_request, frames fed 64 KiB at a time;
- ``fetch_validate_{compiled,interpreted}_30p``: validating an unpacked 30-partition
  follower Fetch request with the compiled validator, and with a straightforward
  interpreter walking the same schema (what the compiled form saves);
- ``frame_decoder_tiny_frames_per_s``: 100-byte frames out of 64 KiB chunks;
  ``frame_decoder_1mib_mb_s``: 1 MiB frames arriving in 64 KiB chunks;
- ``fetch_encode_{1kib,1mib}``: ``encode_response`` of a one-partition Fetch response
  (records a memoryview); ``fetch_encode_packb_1mib``: the copying alternative
  (``msgpack.packb`` + length prefix), for comparison.

Network (loopback, server in its own process; see bench/echo.py):

- ``echo_rtt_per_s``, ``echo_pipelined_per_s``, ``echo_mb_s``: plain frame echo of a
  100-byte and a 1 MiB produce frame - the ceiling the broker bench compares against;
- ``answer_rtt_per_s``, ``answer_pipelined_per_s``: the server decodes and validates each
  request and answers ``[correlation_id, {}]``;
- ``connection_rtt_per_s``, ``connection_pipelined_per_s``: net/connection.py
  ``Connection.request`` (encode, send, read, decode, validate) against that server,
  sequential and with 64 concurrent callers.

Prints one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import msgpack
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from echo import WINDOW_SMALL, echo_process, measure_frames, pipelined, round_trips

from minibroker.net.connection import Connection
from minibroker.protocol.api import (
    SCHEMAS,
    ApiKey,
    decode_request,
    encode_request,
    encode_response,
    validate_request,
)
from minibroker.protocol.frames import NEED_DATA, FrameDecoder, encode_frame
from minibroker.protocol.schemas.types import (
    REQUIRED,
    Nullable,
    SchemaArray,
    SchemaError,
    SchemaPrimitive,
    Type,
)

_PRIMITIVE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int8": lambda v: type(v) is int and -(2**7) <= v < 2**7,
    "int16": lambda v: type(v) is int and -(2**15) <= v < 2**15,
    "int32": lambda v: type(v) is int and -(2**31) <= v < 2**31,
    "int64": lambda v: type(v) is int and -(2**63) <= v < 2**63,
    "bool": lambda v: type(v) is bool,
    "float64": lambda v: type(v) is float,
    "string": lambda v: type(v) is str,
    "bytes": lambda v: type(v) is bytes,
    "records": lambda v: type(v) is bytes,
}


def interpret(t: Type, version: int, value: Any, path: str = "body") -> None:
    """The generic alternative to compile_validator: walk the schema for every value."""
    if isinstance(t, SchemaPrimitive):
        if not _PRIMITIVE_CHECKS[t.name](value):
            raise SchemaError(path, f"expected {t.name}")
    elif isinstance(t, Nullable):
        if value is not None:
            interpret(t.of, version, value, path)
    elif isinstance(t, SchemaArray):
        if type(value) is not list:
            raise SchemaError(path, "expected array")
        for item in value:
            interpret(t.of, version, item, path + "[]")
    else:
        if type(value) is not dict:
            raise SchemaError(path, "expected map")
        for f in t.fields:
            if f.in_version(version):
                if f.name in value:
                    interpret(f.type, version, value[f.name], f"{path}.{f.name}")
                elif f.default is REQUIRED:
                    raise SchemaError(f"{path}.{f.name}", "required field missing")
                else:
                    value[f.name] = [] if isinstance(f.default, list) else f.default


CHUNK = 64 * 1024


def rate(fn: Callable[[], object], seconds: float, windows: int = 5) -> float:
    """Calls of ``fn`` per second: the best of ``windows`` short windows filling about
    ``seconds`` (best-of, as timeit advises: other processes only ever slow a run down)."""
    for _ in range(3):
        fn()
    best = 0.0
    for _ in range(windows):
        calls = 0
        batch = 1
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds / windows:
            for _ in range(batch):
                fn()
            calls += batch
            batch = min(batch * 2, 1000)
        best = max(best, calls / elapsed)
    return best


def produce_body(records: bytes) -> dict[str, Any]:
    partitions = [{"index": 0, "records": records}]
    return {"acks": 1, "timeout_ms": 30_000, "topics": [{"name": "t", "partitions": partitions}]}


def fetch_body(records: memoryview) -> dict[str, Any]:
    partition = {
        "partition_index": 0,
        "error_code": 0,
        "high_watermark": 1000,
        "last_stable_offset": 1000,
        "log_start_offset": 0,
        "diverging_epoch": None,
        "current_leader": None,
        "preferred_read_replica": -1,
        "records": records,
    }
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "topics": [{"topic": "t", "partitions": [partition]}],
    }


def codec_figures(seconds: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, size in (("1kib", 1024), ("1mib", 1 << 20)):
        payload = encode_request(ApiKey.PRODUCE, 0, 1, "bench", produce_body(b"x" * size))
        out[f"produce_decode_{name}"] = rate(partial(decode_request, payload), seconds)
        records = memoryview(bytearray(size))
        body = fetch_body(records)
        out[f"fetch_encode_{name}"] = rate(partial(encode_response, 7, body), seconds)

    unpacked = msgpack.unpackb(encode_request(ApiKey.PRODUCE, 0, 1, "b", produce_body(b"x" * 1024)))
    body = unpacked[4]
    out["produce_validate_only_1kib"] = rate(
        lambda: validate_request(ApiKey.PRODUCE, 0, body), seconds
    )

    partitions = [
        {
            "partition": p,
            "current_leader_epoch": 3,
            "fetch_offset": 1000,
            "partition_max_bytes": 1 << 20,
        }
        for p in range(10)
    ]
    follower_fetch = {
        "replica_id": 2,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "topics": [{"topic": f"t{t}", "partitions": partitions} for t in range(3)],
    }
    out["fetch_validate_compiled_30p"] = rate(
        lambda: validate_request(ApiKey.FETCH, 0, follower_fetch), seconds
    )
    out["fetch_validate_interpreted_30p"] = rate(
        lambda: interpret(SCHEMAS[ApiKey.FETCH].request, 0, follower_fetch), seconds
    )

    big_fetch = fetch_body(memoryview(bytearray(1 << 20)))
    out["fetch_encode_packb_1mib"] = rate(
        lambda: encode_frame(msgpack.packb([7, big_fetch])), seconds
    )

    small_frame = encode_frame(encode_request(ApiKey.PRODUCE, 0, 1, "b", produce_body(b"x" * 1024)))
    per_chunk = CHUNK // len(small_frame)
    stream = small_frame * per_chunk

    def frames_and_decode() -> None:
        decoder = FrameDecoder()
        decoder.feed(stream)
        while (frame := decoder.next_frame()) is not NEED_DATA:
            decode_request(frame)  # type: ignore[arg-type]

    out["produce_frame_decode_1kib"] = rate(frames_and_decode, seconds) * per_chunk

    tiny = encode_frame(b"t" * 96)
    tiny_chunk = tiny * (CHUNK // len(tiny))

    def tiny_frames() -> None:
        decoder = FrameDecoder()
        decoder.feed(tiny_chunk)
        while decoder.next_frame() is not NEED_DATA:
            pass

    out["frame_decoder_tiny_frames_per_s"] = rate(tiny_frames, seconds) * (CHUNK // len(tiny))

    big = encode_frame(bytes(1 << 20))
    pieces = [big[i : i + CHUNK] for i in range(0, len(big), CHUNK)]

    def big_frame() -> None:
        decoder = FrameDecoder()
        for piece in pieces:
            decoder.feed(piece)
        decoder.next_frame()

    out["frame_decoder_1mib_mb_s"] = rate(big_frame, seconds) * len(big) / 1e6
    return {k: round(v, 1) for k, v in out.items()}


async def connection_figures(port: int, seconds: float) -> dict[str, float]:
    metadata: dict[str, Any] = {"topics": None}
    async with Connection("127.0.0.1", port) as conn:
        for _ in range(50):
            await conn.request(ApiKey.METADATA, metadata)
        count = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(100):
                await conn.request(ApiKey.METADATA, metadata)
            count += 100
        rtt = count / (time.perf_counter() - start)

        total = max(2000, int(rtt * seconds * 2))
        per_task = total // WINDOW_SMALL

        async def caller() -> None:
            for _ in range(per_task):
                await conn.request(ApiKey.METADATA, metadata)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(WINDOW_SMALL):
                nursery.start_soon(caller)
        piped = per_task * WINDOW_SMALL / (time.perf_counter() - start)
    return {"connection_rtt_per_s": round(rtt), "connection_pipelined_per_s": round(piped)}


async def answer_figures(port: int, frame: bytes, seconds: float) -> dict[str, float]:
    rtt = await round_trips(port, frame, seconds)
    count = max(1000, int(rtt * seconds * 2))
    elapsed, _ = await pipelined(port, frame, count, WINDOW_SMALL)
    return {"answer_rtt_per_s": round(rtt), "answer_pipelined_per_s": round(count / elapsed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    figures: dict[str, float] = codec_figures(args.seconds / 2)
    small = encode_frame(encode_request(ApiKey.PRODUCE, 0, 1, "bench", produce_body(b"s" * 100)))
    big = encode_frame(encode_request(ApiKey.PRODUCE, 0, 1, "bench", produce_body(bytes(1 << 20))))
    with echo_process("echo") as port:
        echo = trio.run(measure_frames, port, small, big, args.seconds)
    figures.update({f"echo_{k}": v for k, v in echo.items()})
    with echo_process("answer") as port:
        figures.update(trio.run(answer_figures, port, small, args.seconds))
        figures.update(trio.run(connection_figures, port, args.seconds))
    # Shared machines: say how busy this one was, so figures from runs can be compared.
    figures["loadavg_1m"] = round(os.getloadavg()[0], 2)
    figures["cpus"] = os.cpu_count() or 0
    for key, value in figures.items():
        print(f"{key:36} {value:>14,.1f}", file=sys.stderr)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
