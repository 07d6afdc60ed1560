"""minibroker.protocol.heap: large freed buffers stay in the heap for the next frame."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minibroker.protocol import heap

# Runs in a fresh interpreter: the tuning is process-wide and cannot be undone. The
# project runs on Linux with glibc (mmap-backed segments); mallinfo2 is glibc >= 2.33.
_PROBE = textwrap.dedent(
    """
    import ctypes, sys
    from minibroker.protocol.heap import keep_freed_memory

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
            "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    if sys.argv[1] == "tuned":
        assert keep_freed_memory()
    frame = bytes(8 << 20)
    mapped_alone = libc.mallinfo2().hblkhd
    del frame
    print(mapped_alone, libc.mallinfo2().fordblks)
    """
)


def _probe(mode: str) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[3],
    ).stdout.split()
    return int(out[0]), int(out[1])


def test_tuned_process_keeps_a_freed_large_frame_in_the_heap() -> None:
    mapped, free_in_heap = _probe("tuned")
    assert mapped < 8 << 20  # the frame came from the heap, not a mmap of its own
    assert free_in_heap >= 8 << 20  # and freeing it did not hand the pages back


def test_untuned_process_maps_and_unmaps_a_large_frame() -> None:
    mapped, free_in_heap = _probe("default")
    assert mapped >= 8 << 20
    assert free_in_heap < 8 << 20


def test_tuning_is_applied_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[None] = []

    def apply() -> bool:
        calls.append(None)
        return True

    monkeypatch.setattr(heap, "_applied", None)
    monkeypatch.setattr(heap, "_apply", apply)
    assert heap.keep_freed_memory() and heap.keep_freed_memory()
    assert len(calls) == 1
