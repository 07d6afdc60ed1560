"""Hand-made flat frames (records, batches, corruption) for the report unit tests.

Each helper takes a few dicts naming only the fields a test cares about; the rest get
defaults, so a test reads as "these records, in these log dirs".
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from minibroker.analytics.schema import SCAN, SCAN_BATCH, SCAN_CORRUPTION, SCAN_RECORD

_COMMON = StructType(
    [f for f in SCAN.fields if f.name not in ("kind", "record", "batch", "corruption")]
)

_DEFAULTS: dict[str, Any] = {
    "log_dir": "/logs/a",
    "broker_id": 1,
    "topic": "orders",
    "partition": 0,
    "segment": "/logs/a/orders-0/00000000000000000000.log",
    "position": 0,
    "batch_base_offset": 0,
    "leader_epoch": 0,
    # records
    "timestamp": 1_700_000_000_000,
    "key": None,
    "value_size": 10,
    "header_count": 0,
    "checksum": 0,
    # batches
    "record_count": 1,
    "records_in_range": 1,
    "size": 100,
    "compression": "none",
    "timestamp_type": "CreateTime",
    "max_timestamp": 1_700_000_000_000,
    "producer_id": -1,
    "is_transactional": False,
    "is_control": False,
    "producer_epoch": -1,
    "base_sequence": -1,
    "control_type": None,
    # corruption
    "length": 50,
    "reason": "batch at 0 has CRC 0x1, computed 0x2",
}


def _frame(spark: SparkSession, kind_schema: StructType, rows: list[dict[str, Any]]) -> DataFrame:
    schema = StructType([*_COMMON.fields, *kind_schema.fields])
    tuples = []
    for row in rows:
        values = {**_DEFAULTS, **row}
        if "last_offset" not in values and "batch_base_offset" in values:
            values["last_offset"] = values["batch_base_offset"] + values["record_count"] - 1
        values.setdefault("uncompressed_size", values["size"])
        tuples.append(tuple(values[f.name] for f in schema.fields))
    return spark.createDataFrame(tuples, schema)


def records(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    """Each row needs at least ``offset``."""
    return _frame(spark, SCAN_RECORD, rows)


def batches(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return _frame(spark, SCAN_BATCH, rows)


def corruption(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return _frame(spark, SCAN_CORRUPTION, rows)
