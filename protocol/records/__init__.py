"""RecordBatch v2, byte for byte as Kafka writes it (magic 2, KIP-98). Sans-IO: bytes
in, values out.

- ``types``: the values taken and returned (Record, DecodedRecord, ConsumerRecord) and
  the layout of one record inside a batch;
- ``layout``: where each field of the 61-byte batch header lies (offsets, sizes, the
  CRC range, the attribute bits): the one declaration of the format;
- ``batch``: the batch header: reading, validating, patching in place (offsets
  and leader epochs are assigned without touching the records) and writing;
- ``varint``: the zigzag varints every record field uses;
- ``encode`` / ``decode``: records to a batch and back;
- ``control``: the transaction markers' record key (commit or abort).

Callers import from this package; the modules are how it is organised. Code that
reads header fields itself (the log, recovery, the cleaner, analytics) imports
``layout`` for the offsets and ``header_struct``.
"""

from minibroker.protocol.compression import Compression
from minibroker.protocol.records.batch import (
    BatchHeader,
    iter_headers,
    patch_base_offset,
    patch_partition_leader_epoch,
    read_header,
    set_log_append_time,
    validate_batch,
)
from minibroker.protocol.records.control import (
    ControlRecordType,
    Marker,
    control_record_key,
    control_record_type,
    encode_marker_batch,
    read_marker,
)
from minibroker.protocol.records.decode import (
    decode_batch,
    decode_consumer_records,
    decode_records,
)
from minibroker.protocol.records.encode import encode_batch, encode_values
from minibroker.protocol.records.layout import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
)
from minibroker.protocol.records.types import (
    Buffer,
    ConsumerRecord,
    DecodedRecord,
    Header,
    Record,
    TimestampType,
)
from minibroker.protocol.records.varint import read_varint, varint

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "MIN_BATCH_LENGTH",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_TIMESTAMP",
    "BatchHeader",
    "Buffer",
    "Compression",
    "ConsumerRecord",
    "ControlRecordType",
    "DecodedRecord",
    "Header",
    "Marker",
    "Record",
    "TimestampType",
    "control_record_key",
    "control_record_type",
    "decode_batch",
    "decode_consumer_records",
    "decode_records",
    "encode_batch",
    "encode_marker_batch",
    "encode_values",
    "iter_headers",
    "patch_base_offset",
    "patch_partition_leader_epoch",
    "read_header",
    "read_marker",
    "read_varint",
    "set_log_append_time",
    "validate_batch",
    "varint",
]
