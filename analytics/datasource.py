"""The ``minibroker`` Spark data source: segment files as a DataFrame.

    register(spark)
    df = spark.read.format("minibroker").load("/var/kafka/a,/var/kafka/b")
    df.where("topic = 'orders'").groupBy("partition").count()

Options (all optional):
    kind            "records" (default; one row per record), "scan" (records, batches
                    and corrupt regions) or "partials" (the scan pre-aggregated per
                    slice, what the report job reads): analytics.schema
    topics          comma-separated topic names to read (others are not even listed)
    from_timestamp  keep records with timestamp >= this (ms)
    to_timestamp    keep records with timestamp < this (ms)
    split_bytes     segments larger than this are scanned by several tasks
    isolation_level "read_uncommitted" (default) or "read_committed": without the
                    batches of aborted transactions, as each partition's .txnindex
                    files list them (``analytics.isolation``)
    tasks           scan in exactly this many tasks of near-equal bytes (the report job
                    passes Spark's default parallelism: one task per core); each task
                    reads its slices one after the other. Default: one task per slice.
                    With it, slices are cut only where tasks meet, unless split_bytes
                    is also given

How this works: ``partitions()`` (run once, on the driver side) plans one
``SegmentSlice`` per segment, or per batch-aligned byte range of a large segment
(``analytics.layout``); each becomes one Spark task, or with ``tasks`` the slices are
dealt into that many groups of near-equal bytes, one task each. A task's ``read()``
decodes its slices on an executor into Arrow record batches of the view
(``analytics.columns``), which Spark takes as columns. Spark ships this class to its
Python workers by module name, so ``minibroker.analytics`` and ``minibroker.protocol``
must be importable there: ``register`` zips both packages and adds the zip with
``SparkContext.addPyFile`` — this is what lets the job run unchanged where the project
is not installed on the workers, and run the driver's version of the code where it is.
"""

from __future__ import annotations

import atexit
import importlib.util
import marshal
import shutil
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from minibroker.analytics.columns import view_batches
from minibroker.analytics.isolation import (
    ISOLATION_LEVELS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AbortedTransactions,
    of_partition_dir,
)
from minibroker.analytics.layout import (
    SPLIT_BYTES,
    UNSPLIT_BYTES,
    SegmentSlice,
    balanced_groups,
    plan_slices,
)
from minibroker.analytics.partials import partial_batches, replicated_partitions
from minibroker.analytics.scan import TimeRange
from minibroker.analytics.schema import VIEWS

FORMAT_NAME = "minibroker"
SHIPPED_PACKAGES = ("protocol", "analytics")
"""What executors must import: the codec and this data source (analytics -> protocol)."""

_shipped_to: set[str] = set()  # application ids that already have the zip
_zip_path: Path | None = None  # this process's zip, built once (see shipped_zip)


def parse_topics(text: str | None) -> frozenset[str] | None:
    """``"a,b"`` -> {"a", "b"}; None or blank -> None (every topic)."""
    if text is None or not text.strip():
        return None
    return frozenset(t.strip() for t in text.split(",") if t.strip())


def _int_option(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {raw!r}") from None


class SlicePartition(InputPartition):
    """One Spark task: slices of segments, read in order; ``replicated`` names the
    (topic, partition)s among them found in several log dirs (the partials view keeps
    their record rows); ``aborted``, read committed, the aborted transactions of each
    partition directory among them."""

    def __init__(
        self,
        pieces: Sequence[SegmentSlice],
        replicated: frozenset[tuple[str, int]],
        aborted: Mapping[str, AbortedTransactions] | None = None,
    ) -> None:
        super().__init__(tuple(pieces))
        self.pieces = tuple(pieces)
        self.replicated = replicated
        self.aborted = dict(aborted or {})


class MinibrokerReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], kind: str) -> None:
        paths = options.get("path") or options.get("paths") or ""
        self.log_dirs = [p.strip() for p in paths.split(",") if p.strip()]
        if not self.log_dirs:
            raise ValueError("no log dirs: load('dir1,dir2')")
        self.kind = kind
        self.topics = parse_topics(options.get("topics"))
        self.time_range = TimeRange(
            _int_option(options, "from_timestamp"), _int_option(options, "to_timestamp")
        )
        self.isolation_level = str(options.get("isolation_level") or READ_UNCOMMITTED)
        if self.isolation_level not in ISOLATION_LEVELS:
            raise ValueError(
                f"option isolation_level must be one of {list(ISOLATION_LEVELS)},"
                f" got {self.isolation_level!r}"
            )
        self.tasks = _int_option(options, "tasks")
        if self.tasks is not None and self.tasks < 1:
            raise ValueError(f"option tasks must be >= 1, got {self.tasks}")
        # With a task count, cutting slices at split_bytes too would only walk the
        # files' batch prefixes for nothing: a task reads its slices in a row anyway.
        split_bytes = _int_option(options, "split_bytes")
        self.split_bytes = split_bytes or (UNSPLIT_BYTES if self.tasks else SPLIT_BYTES)

    def partitions(self) -> Sequence[InputPartition]:
        pieces = plan_slices(self.log_dirs, self.topics, self.split_bytes)
        replicated = replicated_partitions(pieces)
        groups = balanced_groups(pieces, self.tasks) if self.tasks else [[p] for p in pieces]
        aborted: dict[str, AbortedTransactions] = {}
        if self.isolation_level == READ_COMMITTED:
            for directory in {_partition_dir(p) for p in pieces}:
                found = of_partition_dir(Path(directory))
                if found:
                    aborted[directory] = found
        # Spark needs at least one partition; an empty one reads nothing.
        return [
            SlicePartition(
                group,
                replicated,
                {d: aborted[d] for d in {_partition_dir(p) for p in group} if d in aborted},
            )
            for group in groups
        ] or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        aborted = getattr(partition, "aborted", {})
        for piece in getattr(partition, "pieces", ()):
            dropped = aborted.get(_partition_dir(piece))
            if self.kind == "partials":
                keep = (piece.topic, piece.partition) in getattr(partition, "replicated", ())
                yield from partial_batches(
                    piece, self.time_range, keep_records=keep, aborted=dropped
                )
            else:
                yield from view_batches(self.kind, piece, self.time_range, dropped)


def _partition_dir(piece: SegmentSlice) -> str:
    """The directory of the partition replica ``piece`` is a slice of."""
    return str(Path(piece.segment).parent)


class MinibrokerDataSource(DataSource):
    """``spark.read.format("minibroker")``: see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _kind(self) -> str:
        kind = str(self.options.get("kind") or "records")
        if kind not in VIEWS:
            raise ValueError(f"option kind must be one of {sorted(VIEWS)}, got {kind!r}")
        return kind

    def schema(self) -> StructType:
        return VIEWS[self._kind()]

    def reader(self, schema: StructType) -> DataSourceReader:
        return MinibrokerReader(self.options, self._kind())


_ZIP_PACKAGE_INIT = '"""The codec and the Spark data source, as shipped to executors."""\n'


def package_zip(directory: Path) -> Path:
    """Zip ``protocol/`` and ``analytics/`` (sources only) into ``directory`` as the
    ``minibroker.protocol`` and ``minibroker.analytics`` packages they are imported as.

    The zip's ``minibroker/__init__.py`` is a bare one (the real one also loads the
    client, which executors never use). Spark puts the zip ahead of site-packages on
    the workers' path, so they run the driver's code even where another copy of the
    project is installed.

    Each module also goes in compiled (``_bytecode``): zipimport cannot cache what it
    compiles, and Spark forks a fresh planner process that imports this data source
    twice per query, on the query's critical path."""
    root = Path(__file__).resolve().parent.parent
    target = directory / "minibroker-analytics.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("minibroker/__init__.py", _ZIP_PACKAGE_INIT)
        for package in SHIPPED_PACKAGES:
            for source in sorted((root / package).rglob("*.py")):
                name = "minibroker/" + source.relative_to(root).as_posix()
                archive.write(source, name)
                archive.writestr(name + "c", _bytecode(source))
    return target


def _bytecode(source: Path) -> bytes:
    """``source`` as a .pyc that is never checked against its source (the zip is built
    from both at once). zipimport takes it only from an interpreter of the same bytecode
    version, and compiles the .py itself otherwise."""
    data = source.read_bytes()
    code = compile(data, str(source), "exec", dont_inherit=True)
    unchecked_hash = 0b01  # PEP 552 flags: hash-based, not checked
    header = importlib.util.MAGIC_NUMBER + unchecked_hash.to_bytes(4, "little")
    return header + importlib.util.source_hash(data) + marshal.dumps(code)


def shipped_zip() -> Path:
    """This process's ``package_zip``, built on first use in a temp dir that lives as
    long as the driver (Spark serves the file from it to every application the process
    starts) and is removed when the process exits."""
    global _zip_path
    if _zip_path is None:
        directory = tempfile.mkdtemp(prefix="minibroker-pyfiles-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        _zip_path = package_zip(Path(directory))
    return _zip_path


def register(spark: SparkSession) -> None:
    """Ship the packages to this application's executors and register the format."""
    context = spark.sparkContext
    app_id = context.applicationId
    if app_id not in _shipped_to:
        context.addPyFile(str(shipped_zip()))
        _shipped_to.add(app_id)
    spark.dataSource.register(MinibrokerDataSource)
