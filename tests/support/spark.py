"""Shared fixtures for Spark tests: one local SparkSession, and segment files on disk.

``spark`` is session-scoped (a JVM start costs ~10 s): local[2], two shuffle partitions,
no UI, bound to 127.0.0.1, with the ``minibroker`` data source registered. Import it
into a conftest or test module: ``from tests.support.spark import spark``.

``PartitionLog`` writes a partition replica's directory the way a broker lays it out
(docs/architecture.md, "On disk"): ``<log dir>/<topic>-<partition>/<20-digit base
offset>.log`` files holding RecordBatch v2 batches back to back, encoded with
``protocol.records``, from a ``Producer`` (id, epoch, sequence) or none, with
transaction markers (``append_marker``). It remembers what it wrote (``written``) so
tests compare Spark's answers with the truth, and it can damage files on purpose
(``corrupt_batch``, ``tear_tail``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import struct
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from minibroker.analytics.datasource import register
from minibroker.analytics.jobargs import JOB_CONF
from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    ControlRecordType,
    Record,
    control_record_key,
    encode_batch,
)
from minibroker.protocol.records.layout import CONTROL_BIT, TRANSACTIONAL_BIT
from minibroker.storage.names import TXN_INDEX_SUFFIX
from minibroker.storage.txn_index import AbortedTxn, TransactionIndex

SPARK_TEST_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",  # tiny data: 200 default partitions is pure overhead
    "spark.default.parallelism": "2",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.python.unix.domain.socket.enabled": JOB_CONF["spark.python.unix.domain.socket.enabled"],
}
"""Small, short-lived: no UI, few shuffle tasks, loopback only. The JVM options trade
peak speed (unused on tiny data) for much less JIT and GC work on a busy 2-core box;
Python workers are reached as the job reaches them (``jobargs.JOB_CONF``)."""

SHORT_JVM_OPTIONS = SPARK_TEST_CONF["spark.driver.extraJavaOptions"]


def local_spark_session(app_name: str = "minibroker-tests") -> SparkSession:
    """A local[2] SparkSession bound to loopback, with the data source registered."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    warehouse = tempfile.mkdtemp(prefix="mb-wh-")  # Spark may write to it until exit
    atexit.register(shutil.rmtree, warehouse, ignore_errors=True)
    builder = builder.config("spark.sql.warehouse.dir", warehouse)
    for key, value in SPARK_TEST_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = local_spark_session()
    yield session
    session.stop()


@dataclass(frozen=True, slots=True)
class Producer:
    """Who writes a batch: producer id, epoch and the batch's base sequence."""

    id: int
    epoch: int = 0
    sequence: int = 0


NO_PRODUCER = Producer(-1, -1, -1)  # a producer that is not idempotent
_ATTRIBUTES_AT = 21  # batch header: the first byte under the CRC
_CRC_AT = 17


def with_attribute_bits(data: bytes, bits: int) -> bytes:
    """The batch ``data`` with attribute ``bits`` set and its CRC made right again."""
    out = bytearray(data)
    (attributes,) = struct.unpack_from(">h", out, _ATTRIBUTES_AT)
    struct.pack_into(">h", out, _ATTRIBUTES_AT, attributes | bits)
    struct.pack_into(">I", out, _CRC_AT, crc32c(memoryview(out)[_ATTRIBUTES_AT:]))
    return bytes(out)


@dataclass(frozen=True, slots=True)
class Written:
    """One record as written: where it is and what it holds."""

    offset: int
    record: Record
    leader_epoch: int
    segment: Path
    batch_position: int


class PartitionLog:
    """Writes one partition replica's segment files, batch by batch."""

    def __init__(self, log_dir: Path, topic: str, partition: int) -> None:
        self.dir = log_dir / f"{topic}-{partition}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.topic = topic
        self.partition = partition
        self.next_offset = 0
        self.written: list[Written] = []
        self.segments: list[Path] = []
        self.open_transactions: dict[int, int] = {}  # producer id -> its first offset
        self.roll()

    def roll(self) -> Path:
        """Start a new segment named after the next offset, as a broker's roll does."""
        path = self.dir / f"{self.next_offset:020d}.log"
        path.touch()
        self.segments.append(path)
        return path

    def append(
        self,
        records: Sequence[Record],
        *,
        compression: Compression = Compression.NONE,
        leader_epoch: int = 0,
        now_ms: int = 1_700_000_000_000,
        producer: Producer = NO_PRODUCER,
        attributes: int = 0,
    ) -> int:
        """Append one batch at the next offset; returns its byte position.
        ``attributes`` are bits to set (``TRANSACTIONAL_BIT``, ``CONTROL_BIT``)."""
        segment = self.segments[-1]
        data = encode_batch(
            records,
            base_offset=self.next_offset,
            compression=compression,
            partition_leader_epoch=leader_epoch,
            now_ms=now_ms,
            producer_id=producer.id,
            producer_epoch=producer.epoch,
            base_sequence=producer.sequence,
        )
        if attributes:
            data = with_attribute_bits(data, attributes)
        if attributes & TRANSACTIONAL_BIT and not attributes & CONTROL_BIT:
            self.open_transactions.setdefault(producer.id, self.next_offset)
        position = segment.stat().st_size
        with segment.open("ab") as f:
            f.write(data)
        for i, record in enumerate(records):
            self.written.append(
                Written(self.next_offset + i, record, leader_epoch, segment, position)
            )
        self.next_offset += len(records)
        return position

    def append_marker(
        self, kind: ControlRecordType, producer: Producer, *, leader_epoch: int = 0
    ) -> int:
        """Append a transaction marker (a transactional control batch) of ``producer``;
        an ABORT goes into its segment's ``.txnindex`` too, as a broker's does."""
        marker = Record(b"\x00\x00\x00\x00\x00\x00", control_record_key(kind))
        bits = TRANSACTIONAL_BIT | CONTROL_BIT
        offset = self.next_offset
        first = self.open_transactions.pop(producer.id, offset)
        if kind is ControlRecordType.ABORT:
            index = TransactionIndex(self.segments[-1].with_suffix(TXN_INDEX_SUFFIX))
            index.add(AbortedTxn(producer.id, first, offset, offset + 1))
        return self.append([marker], leader_epoch=leader_epoch, producer=producer,
                           attributes=bits)  # fmt: skip

    def corrupt_batch(self, segment: Path, position: int) -> None:
        """Flip one byte inside the records of the batch at ``position`` (CRC breaks,
        the length stays right) and forget its records: they are no longer readable."""
        with segment.open("r+b") as f:
            f.seek(position + BATCH_HEADER_SIZE)
            byte = f.read(1)
            f.seek(position + BATCH_HEADER_SIZE)
            f.write(bytes([byte[0] ^ 0xFF]))
        self.written = [
            w for w in self.written if not (w.segment == segment and w.batch_position == position)
        ]

    def tear_tail(self, append_records: Sequence[Record], cut: int = 10) -> int:
        """Append a batch and then cut its last ``cut`` bytes, as a crash mid-write
        leaves it; the torn batch's records are not in ``written``. Returns its position."""
        keep = len(self.written)
        position = self.append(append_records)
        self.written = self.written[:keep]
        segment = self.segments[-1]
        with segment.open("r+b") as f:
            f.truncate(segment.stat().st_size - cut)
        return position

    def offsets(self) -> list[int]:
        return [w.offset for w in self.written]


def make_records(
    count: int, *, key_every: int = 1, start_ts: int = 1_700_000_000_000
) -> list[Record]:
    """``count`` records one second apart; every ``key_every``-th has a key (others null),
    every third has a header."""
    out: list[Record] = []
    for i in range(count):
        key = f"key-{i % 5}".encode() if i % key_every == 0 else None
        headers = (("h", f"v{i}".encode()),) if i % 3 == 0 else ()
        out.append(Record(f"value-{i}".encode(), key, headers, start_ts + i * 1000))
    return out
