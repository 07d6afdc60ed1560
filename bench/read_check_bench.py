"""What checking every batch a read serves costs: ``storage.corruption.check_batches``
(header, length, CRC-32C, contiguous offsets) over 16 MiB of batches of 1 KiB records,
for several batch sizes.

Usage: python3 bench/read_check_bench.py

Prints one line per batch size, then ONE JSON object of figures (ms per MiB, median of
ROUNDS) on the last line. ``crc32c_backend`` says which CRC-32C implementation ran.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minibroker.protocol.crc32c import BACKEND
from minibroker.protocol.records import encode_values
from minibroker.storage.corruption import check_batches

TOTAL_BYTES = 16 * 1024 * 1024
"""Enough batches that per-call overhead does not show; small enough for the cache."""
RECORD_BYTES = 1024
BATCH_SIZES = (1 << 20, 64 << 10, 16 << 10, 1100)
"""From producer batches at batch.size 1 MiB down to one record per batch."""
ROUNDS = 7


def segment_bytes(batch_bytes: int) -> bytes:
    per_batch = max(1, batch_bytes // (RECORD_BYTES + 10))
    values = [os.urandom(RECORD_BYTES)] * per_batch
    out = bytearray()
    offset = 0
    while len(out) < TOTAL_BYTES:
        out += encode_values(values, timestamp=1, base_offset=offset)
        offset += per_batch
    return bytes(out)


def main() -> None:
    figures: dict[str, float | str] = {"crc32c_backend": BACKEND}
    for batch_bytes in BATCH_SIZES:
        data = memoryview(segment_bytes(batch_bytes))
        mib = len(data) / (1 << 20)
        times = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            checked = check_batches(data)
            times.append(time.perf_counter() - started)
            assert checked.problem is None
        ms_per_mib = statistics.median(times) / mib * 1000
        print(f"batches of ~{batch_bytes} B: {ms_per_mib:.3f} ms/MiB")
        figures[f"check_ms_per_mib_batch_{batch_bytes}"] = round(ms_per_mib, 4)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
