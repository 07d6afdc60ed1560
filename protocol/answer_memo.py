"""LastEncoded: the encoding of a large answer body, kept while handlers keep
answering with that same body object.

The metadata cache hands out one memoised answer object per question until the next
UpdateMetadata, so a client polling Metadata of every topic of a 10,000-partition
cluster asks the codec to encode the same object again and again: 13 ms (msgpack) and
35 ms (Kafka) a time here, against well under a millisecond to copy the bytes. A codec
keeps one LastEncoded per listener and asks it for the body's bytes; it encodes only
what it was not given last time. Holding the body keeps its identity from being reused;
the body must not change once answered, which memoised answers never do (they are
shared, and copied by whoever adds to them).

Only encodings of at least ``MIN_KEPT`` bytes are kept, so small answers to other
questions do not push out the large one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

MIN_KEPT = 64 * 1024
"""Smaller encodings are cheap to redo; keeping them would evict the large one."""


class LastEncoded:
    __slots__ = ("_body", "_encoded", "_key")

    def __init__(self) -> None:
        self._body: object = None
        self._key: Hashable = None
        self._encoded = b""

    def encoded(self, body: Any, key: Hashable, encode: Callable[[Any], bytes]) -> bytes:
        """``encode(body)``, or the bytes it gave last time for this very object and
        ``key`` (what else the encoding depends on: the version)."""
        if body is self._body and key == self._key:
            return self._encoded
        encoded = encode(body)
        if len(encoded) >= MIN_KEPT:
            self._body, self._key, self._encoded = body, key, encoded
        return encoded
