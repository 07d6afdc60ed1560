"""Log compaction: Kafka's log cleaner.

- ``offset_map``: key -> last offset of the dirty section, exact under hash collisions;
- ``records``: the fields of records a cleaning needs, read without decoding records;
- ``clean``: one cleaning of one log, run in a worker process; leaves ``.cleaned`` files;
- ``storage.segment_swap`` (beside the Log, which uses it): swapping those into the
  log, and finishing a swap a crash interrupted;
- ``manager``: which log to clean next (dirty ratio, compaction lags), the jobs, the
  ``cleaner-offset-checkpoint`` files, statistics.

The broker runs it (broker/logdirs/log_cleaner.py); docs/architecture.md has the overview.
"""
