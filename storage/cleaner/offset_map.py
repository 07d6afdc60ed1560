"""The cleaner's offset map: for each key of the dirty section, the last offset it has.

How this works. A key is hashed (``hash_fn``, Python's SipHash of the bytes by default:
computed in C and cached on the bytes object) and the map keeps, per hash, the FULL
key and its offset. A put or a get compares the stored key with the one asked about:
a different key with the same hash (a collision) goes to a second map keyed by the
full key. So a collision never merges two keys: each key's last offset is exact, and
the cleaner can never drop the latest record of a live key because another key shares
its hash (Kafka's SkimpyOffsetMap keeps only a digest and accepts that risk; keeping
the keys costs their bytes, which ``capacity_bytes`` accounts for).

Memory: ``log.cleaner.dedupe.buffer.size`` (split over the cleaner threads) bounds
``used_bytes`` (key bytes plus ``ENTRY_OVERHEAD_BYTES`` per key). The cleaner stops
adding batches once ``is_full`` and cleans up to the last batch it mapped.
"""

from __future__ import annotations

from collections.abc import Callable

ENTRY_OVERHEAD_BYTES = 120
"""What one key costs besides its bytes: two dict slots and a bytes object header."""

NOT_FOUND = -1


class OffsetMap:
    __slots__ = ("_hash", "_keys", "_offsets", "_overflow", "capacity_bytes", "used_bytes")

    def __init__(self, capacity_bytes: int, hash_fn: Callable[[bytes], int] = hash) -> None:
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0
        self._hash = hash_fn
        self._keys: dict[int, bytes] = {}
        self._offsets: dict[int, int] = {}
        self._overflow: dict[bytes, int] = {}
        """Keys whose hash is taken by another key, with their offsets."""

    def __len__(self) -> int:
        return len(self._keys) + len(self._overflow)

    @property
    def is_full(self) -> bool:
        return self.used_bytes >= self.capacity_bytes

    @property
    def collisions(self) -> int:
        """Keys that met another key's hash (kept apart, by their full bytes)."""
        return len(self._overflow)

    def put(self, key: bytes, offset: int) -> None:
        """Remember ``offset`` as the latest of ``key`` (offsets arrive in order)."""
        h = self._hash(key)
        stored = self._keys.setdefault(h, key)
        if stored is key or stored == key:
            if h not in self._offsets:
                self.used_bytes += len(key) + ENTRY_OVERHEAD_BYTES
            self._offsets[h] = offset
            return
        if key not in self._overflow:
            self.used_bytes += len(key) + ENTRY_OVERHEAD_BYTES
        self._overflow[key] = offset

    def put_all(self, keys: list[bytes], offsets: list[int]) -> None:
        """``put`` of each key with its offset, the loop inlined (the map pass's hot
        path: one call per batch instead of one per record)."""
        hash_fn, key_of, offset_of, overflow = self._hash, self._keys, self._offsets, self._overflow
        used = self.used_bytes
        for key, offset in zip(keys, offsets, strict=True):
            h = hash_fn(key)
            stored = key_of.setdefault(h, key)
            if stored is key or stored == key:
                if h not in offset_of:
                    used += len(key) + ENTRY_OVERHEAD_BYTES
                offset_of[h] = offset
            else:
                if key not in overflow:
                    used += len(key) + ENTRY_OVERHEAD_BYTES
                overflow[key] = offset
        self.used_bytes = used

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``; NOT_FOUND (-1) when the map has not seen it."""
        h = self._hash(key)
        stored = self._keys.get(h)
        if stored is not None and (stored is key or stored == key):
            return self._offsets[h]
        return self._overflow.get(key, NOT_FOUND)
