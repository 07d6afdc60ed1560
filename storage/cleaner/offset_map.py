"""The cleaner's offset map: for each key of the dirty section, the last offset it has.

How this works. The map keeps every key's FULL bytes, so a hash collision can never
merge two keys: each key's last offset is exact, and the cleaner never drops the
latest record of a live key because another key shares its hash (Kafka's
SkimpyOffsetMap keeps only a digest and accepts that risk; keeping the keys costs
their bytes, which ``capacity_bytes`` accounts for). Two ways, the same answers:

- the default: a dict keyed by the key bytes. Python's dict hashes them (SipHash, in
  C, cached on the bytes object) and on equal hashes compares the keys themselves, so
  collisions are resolved by the full key. The map pass adds a whole batch with one
  ``dict.update`` (a C loop), and ``lookup`` is the dict's own ``get``: the two hot
  paths run no Python code per record.
- with ``hash_fn`` (tests inject a tiny hash to force collisions): per hash the first
  key seen and its offset; a different key with the same hash (verified by comparing
  the stored key) goes to an overflow dict keyed by the full key.

Memory: ``log.cleaner.dedupe.buffer.size`` (split over the cleaner threads) bounds
``used_bytes``, which counts ``ENTRY_OVERHEAD_BYTES`` plus the key's bytes per key
(per batch, by the batch's first key length: an estimate, not an exact census). The
cleaner stops adding batches once ``is_full`` and cleans up to the last one mapped.
"""

from __future__ import annotations

from collections.abc import Callable

ENTRY_OVERHEAD_BYTES = 100
"""What one key costs besides its bytes: a dict slot, an int and a bytes header."""

NOT_FOUND = -1


class OffsetMap:
    __slots__ = (
        "_hash",
        "_keys",
        "_latest",
        "_offsets",
        "_overflow",
        "capacity_bytes",
        "lookup",
        "used_bytes",
    )

    def __init__(self, capacity_bytes: int, hash_fn: Callable[[bytes], int] | None = None) -> None:
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0
        self._hash = hash_fn
        self._latest: dict[bytes, int] = {}
        """Key -> offset (the default way)."""
        self._keys: dict[int, bytes] = {}
        self._offsets: dict[int, int] = {}
        self._overflow: dict[bytes, int] = {}
        """Keys whose hash is taken by another key, with their offsets."""
        self.lookup: Callable[[bytes, int], int] = (
            self._latest.get if hash_fn is None else self._lookup_hashed
        )
        """``lookup(key, default)``: the latest offset of ``key``, else ``default``."""

    def __len__(self) -> int:
        return len(self._latest) + len(self._keys) + len(self._overflow)

    @property
    def is_full(self) -> bool:
        return self.used_bytes >= self.capacity_bytes

    @property
    def collisions(self) -> int:
        """Keys that met another key's hash (kept apart by their full bytes); always 0
        the default way, where the dict resolves collisions itself."""
        return len(self._overflow)

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``; NOT_FOUND (-1) when the map has not seen it."""
        return self.lookup(key, NOT_FOUND)

    def put(self, key: bytes, offset: int) -> None:
        self.put_all([key], [offset])

    def put_all(self, keys: list[bytes], offsets: list[int]) -> None:
        """Remember each key's offset as its latest (offsets arrive in order)."""
        if not keys:
            return
        before = len(self)
        if self._hash is None:
            self._latest.update(zip(keys, offsets, strict=True))
        else:
            self._put_hashed(keys, offsets)
        self.used_bytes += (len(self) - before) * (len(keys[0]) + ENTRY_OVERHEAD_BYTES)

    def _put_hashed(self, keys: list[bytes], offsets: list[int]) -> None:
        hash_fn, key_of, offset_of, overflow = self._hash, self._keys, self._offsets, self._overflow
        assert hash_fn is not None
        for key, offset in zip(keys, offsets, strict=True):
            h = hash_fn(key)
            stored = key_of.setdefault(h, key)
            if stored is key or stored == key:
                offset_of[h] = offset
            else:
                overflow[key] = offset

    def _lookup_hashed(self, key: bytes, default: int) -> int:
        assert self._hash is not None
        h = self._hash(key)
        stored = self._keys.get(h)
        if stored is not None and (stored is key or stored == key):
            return self._offsets[h]
        return self._overflow.get(key, default)
