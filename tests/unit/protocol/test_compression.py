"""Batches of every codec Kafka clients use: encoded, validated and read back; both
Snappy framings read; damaged compressed data refused as CORRUPT_MESSAGE."""

from __future__ import annotations

import struct

import cramjam
import pytest

from minibroker.protocol.compression import CODEC_NAMES, Compression, compress, decompress
from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import Record, decode_batch, encode_batch, validate_batch

RECORDS = [Record(b"value %d " % i * 20, key=b"k%d" % i, timestamp=1000 + i) for i in range(50)]


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_a_batch_of_every_codec_validates_and_decodes_to_its_records(codec: Compression) -> None:
    batch = encode_batch(RECORDS, compression=codec)
    header = validate_batch(batch, 0)
    assert header.compression is codec
    _, decoded = decode_batch(batch)
    assert [(r.key, r.value, r.timestamp) for r in decoded] == [
        (r.key, r.value, r.timestamp) for r in RECORDS
    ]
    if codec is not Compression.NONE:
        assert len(batch) < len(encode_batch(RECORDS))  # it really is compressed


def test_codec_names_are_kafkas_compression_types() -> None:
    assert set(CODEC_NAMES) == {"none", "gzip", "snappy", "lz4", "zstd"}


def test_snappy_in_the_java_clients_xerial_framing_is_read() -> None:
    data = b"xerial framed snappy " * 500
    blocks = [data[:4000], data[4000:]]
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for block in blocks:
        raw = bytes(cramjam.snappy.compress_raw(block))
        framed += struct.pack(">i", len(raw)) + raw
    assert decompress(Compression.SNAPPY, framed) == data


@pytest.mark.parametrize(
    "codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
)
def test_damaged_compressed_data_is_a_corrupt_message(codec: Compression) -> None:
    damaged = compress(codec, b"some records " * 100)[:-7] + b"garbage"
    with pytest.raises(CorruptMessageError):
        decompress(codec, damaged)


def test_an_unknown_codec_number_is_refused_at_validation() -> None:
    batch = bytearray(encode_batch(RECORDS))
    batch[22] |= 0x05  # attributes (low byte): codec 5 does not exist
    with pytest.raises(CorruptMessageError, match="compression codec"):
        validate_batch(bytes(batch), 0)
