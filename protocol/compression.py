"""The four record-batch codecs Kafka clients use, as Kafka frames each one.

A batch's attributes bits 0-2 name the codec of its records section:

    1 gzip    RFC 1952 gzip stream (zlib here)
    2 snappy  raw Snappy, or the xerial framing the Java client writes: the magic
              ``\\x82SNAPPY\\x00``, two int32 versions, then blocks of int32 length +
              raw Snappy. Both are read; raw is written (as librdkafka does)
    3 lz4     an LZ4 frame (KIP-57: the frame format with a correct header checksum)
    4 zstd    a Zstandard frame

The broker stores batches as sent and never calls these; clients and tools do
(the bundled Producer compresses, the Consumer and ``dump-log`` decompress). Snappy,
LZ4 and Zstandard come from one library, ``cramjam``, imported on first use so that
a broker or a gzip-only client never needs it.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from types import ModuleType
from typing import Final

from minibroker.protocol.errors import CorruptMessageError


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


CODEC_NAMES: Final = {c.name.lower(): c for c in Compression}
"""``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``: Kafka's compression.type values."""

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE: Final = 16  # magic + int32 version + int32 compatible version
_BLOCK_LENGTH = struct.Struct(">i")


def _cramjam() -> ModuleType:
    import cramjam

    return cramjam


def compress(codec: Compression, data: bytes) -> bytes:
    """``data`` compressed as ``codec`` frames it in a batch."""
    if codec is Compression.NONE:
        return data
    if codec is Compression.GZIP:
        compressor = zlib.compressobj(wbits=31)  # 31: gzip framing, as Kafka's GZIPOutputStream
        return compressor.compress(data) + compressor.flush()
    cramjam = _cramjam()
    if codec is Compression.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec is Compression.LZ4:
        return bytes(cramjam.lz4.compress(data))
    return bytes(cramjam.zstd.compress(data))


def decompress(codec: Compression, data: bytes) -> bytes:
    """A records section of ``codec`` decompressed; CorruptMessageError if it is not."""
    try:
        if codec is Compression.NONE:
            return data
        if codec is Compression.GZIP:
            return zlib.decompress(data, wbits=47)  # 47: gzip or zlib framing
        cramjam = _cramjam()
        if codec is Compression.SNAPPY:
            if data.startswith(_XERIAL_MAGIC):
                return _xerial_blocks(cramjam, data)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec is Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except (zlib.error, ValueError, struct.error) as exc:
        raise CorruptMessageError(f"bad {codec.name.lower()} data ({exc})") from exc
    except Exception as exc:  # cramjam raises its own DecompressionError
        if type(exc).__name__ != "DecompressionError":
            raise
        raise CorruptMessageError(f"bad {codec.name.lower()} data ({exc})") from exc


def _xerial_blocks(cramjam: ModuleType, data: bytes) -> bytes:
    pos = _XERIAL_HEADER_SIZE
    out = bytearray()
    while pos < len(data):
        (length,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += _BLOCK_LENGTH.size
        if length < 0 or pos + length > len(data):
            raise ValueError("xerial snappy block runs past the data")
        out += cramjam.snappy.decompress_raw(data[pos : pos + length])
        pos += length
    return bytes(out)
