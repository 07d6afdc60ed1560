"""ZooKeeper's multiRead (3.6+): many getData operations in one request, answered one by one.

A new controller reads every partition state znode. Pipelined getData requests cost
kazoo's pure-Python connection thread seconds for 10,000 partitions (docs/performance.md,
"Figures behind the code"); one multiRead carries ``READS_PER_REQUEST`` of them.
Unlike a multi (transaction), a multiRead is not atomic: a missing znode fails only its
own operation.

The bytes (ZooKeeper's jute records, big-endian), after kazoo's request header with
op code 22:

    request:  per path   MultiHeader(type=4 getData, done=false, err=-1)
                         GetDataRequest(path: int32 length + UTF-8, watch: bool=false)
              then       MultiHeader(type=-1, done=true, err=-1)
    response: per path   MultiHeader(type=4, ...) GetDataResponse(data: int32 length +
                         bytes, stat: 68 bytes)
                      or MultiHeader(type=-1, ...) ErrorResponse(err: int32)
              then       MultiHeader(done=true)

``MultiReadRequest`` is what kazoo's connection sends and decodes (it needs ``type``,
``serialize`` and ``deserialize``); paths must already carry the chroot. A server
older than 3.6 answers UnimplementedError, and the caller falls back to pipelined
getData requests. Watches cannot be set this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.exceptions import EXCEPTIONS
from kazoo.protocol.serialization import (
    GetData,
    MultiHeader,
    ZnodeStat,
    int_struct,
    read_buffer,
    stat_struct,
)

MULTI_READ = 22
"""ZooKeeper's op code for multiRead (ZooDefs.OpCode.multiRead)."""
ERROR = -1
"""The MultiHeader type of an operation that failed (followed by its error code)."""
READS_PER_REQUEST = 500
"""getData operations per multiRead: a response near 100 KB for partition states, well
below ZooKeeper's 1 MB jute.maxbuffer."""


class MultiReadRequest:
    """A multiRead of the data of ``paths``; decodes to one (bytes, ZnodeStat) or
    kazoo exception per path, in order."""

    type = MULTI_READ

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = paths

    def __repr__(self) -> str:
        return f"MultiReadRequest({len(self.paths)} paths)"

    def serialize(self) -> bytearray:
        out = bytearray()
        for path in self.paths:
            out += MultiHeader(GetData.type, False, -1).serialize()
            out += GetData(path, False).serialize()
        out += MultiHeader(ERROR, True, -1).serialize()
        return out

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        header, offset = MultiHeader.deserialize(data, offset)
        while not header.done:
            if header.type == GetData.type:
                value, offset = read_buffer(data, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                offset += stat_struct.size
                results.append((value, stat))
            elif header.type == ERROR:
                code = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"multiRead answered an operation of type {header.type}")
            header, offset = MultiHeader.deserialize(data, offset)
        return results
