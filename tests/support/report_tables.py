"""Report tables as the job collects them (lists of dicts, ``analytics.report``'s
columns), made up for the HTML page's tests: a cluster of any size, with or without
damage, in a few lines."""

from __future__ import annotations

from typing import Any

from minibroker.analytics.schema import MINUTE_MS

T0 = 1_700_000_040_000  # a whole minute
Tables = dict[str, list[dict[str, Any]]]


def cluster_tables(
    topics: int, partitions: int, replicas: int = 3, *, damaged: bool = False
) -> Tables:
    """``topics`` x ``partitions`` partitions on ``replicas`` brokers, a day of traffic in
    240 buckets, ten keys a topic, a producer a partition, three leader epochs each; with
    ``damaged``, one corrupt region and one partition whose replicas disagree."""
    tables: Tables = {name: [] for name in ("partitions", "topics", "traffic", "top_keys",
                                            "batches", "producers", "leader_epochs",
                                            "corruption", "divergence")}  # fmt: skip
    bucket = 6 * MINUTE_MS
    for t in range(topics):
        topic = f"topic-{t:03d}"
        tables["topics"].append({"topic": topic, "partitions": partitions,
                                 "records": 1000 * partitions, "value_bytes": 10**5,
                                 "approx_distinct_keys": 500 + t, "null_keys": t})  # fmt: skip
        tables["top_keys"] += [
            {"topic": topic, "rank": k + 1, "key": f"key-{k}".encode(), "records": 100 - k}
            for k in range(10)
        ]
        for series in [None, *range(min(partitions, 5))] if t < 8 else []:
            tables["traffic"] += [
                {"topic": topic, "partition": series, "bucket_start": T0 + b * bucket,
                 "bucket_ms": bucket, "records": 50 + b % 7, "bytes": 5000 + b,
                 "topic_rank": t + 1}
                for b in range(240)
            ]  # fmt: skip
        for p in range(partitions):
            for r in range(1, replicas + 1):
                replica = {"topic": topic, "partition": p, "log_dir": f"/data/broker-{r}/logs",
                           "broker_id": r}  # fmt: skip
                tables["partitions"].append({
                    **replica, "records": 1000 + p, "batches": 50, "bytes": 10**6 + p,
                    "value_bytes": 9 * 10**5, "first_offset": 0, "last_offset": 999 + p,
                    "first_timestamp": T0, "last_timestamp": T0 + 86_400_000,
                    "records_per_minute": 0.7, "approx_distinct_keys": 90, "null_keys": 0,
                    "corrupt_regions": 0, "corrupt_bytes": 0,
                })  # fmt: skip
                tables["batches"].append({
                    **replica, "compression": ("gzip", "none")[p % 2], "batches": 50,
                    "records": 1000 + p, "min_records_per_batch": 1,
                    "avg_records_per_batch": 20.0, "max_records_per_batch": 40,
                    "avg_batch_bytes": 20_000.0, "max_batch_bytes": 40_000, "bytes": 10**6,
                    "uncompressed_bytes": 3 * 10**6, "compression_ratio": 3.0,
                })  # fmt: skip
                tables["leader_epochs"] += [
                    {**replica, "leader_epoch": e, "start_offset": 300 * e,
                     "last_offset": 300 * e + 299, "batches": 15,
                     "first_minute": T0 + e * 480 * MINUTE_MS,
                     "last_minute": T0 + (e + 1) * 480 * MINUTE_MS - MINUTE_MS}
                    for e in range(3)
                ]  # fmt: skip
            tables["producers"].append({
                "producer_id": t * 1000 + p, "idempotent": True, "first_epoch": 0,
                "last_epoch": 1, "epochs": 2, "topics": [topic], "partitions": 1,
                "batches": 50, "records": 1000 + p, "bytes": 10**6, "uncompressed_bytes": 3 * 10**6,
                "compression_ratio": 3.0, "sequence_gaps": p % 3, "transactional_batches": 0,
                "committed": 0, "aborted": 0, "open_transactions": 0,
            })  # fmt: skip
    if damaged:
        tables["corruption"].append({
            "topic": "topic-000", "partition": 1, "log_dir": "/data/broker-2/logs",
            "broker_id": 2, "segment": "/data/broker-2/logs/topic-000-1/00000000000000000000.log",
            "position": 4242, "length": 1000, "batch_base_offset": 17,
            "reason": "batch at 4242 has CRC 0x1, computed 0x2",
        })  # fmt: skip
        tables["divergence"].append({
            "topic": "topic-000", "partition": 1, "replicas": ["/data/broker-1/logs",
            "/data/broker-2/logs"], "broker_ids": [1, 2], "common_start": 0,
            "smallest_end": 1001, "compared_offsets": 1001, "diverging_offsets": 20,
            "first_diverging_offset": 17, "agree": False,
        })  # fmt: skip
    return tables
