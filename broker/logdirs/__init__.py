"""The log dirs under the replicas: moving replicas between them (log_dir_mover.py and
its APIs, log_dirs.py), periodic housekeeping (log_maintenance.py), compaction
(log_cleaner.py) and corrupt replicas taken out of service and repaired
(corruption.py). Built on replication/.
"""
