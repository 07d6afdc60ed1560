"""Partitions and their replicas: the data path and replication.

``ReplicaManager`` (replica_manager.py), owning the ``HostedReplicas`` (hosted_replicas.py)
and each ``Partition`` (partition.py); the controller's requests and what they change
(controller_apis.py, leadership_changes.py, with the checkpoints written after them:
epoch_checkpoints.py, hw_checkpoint.py, partition_metadata_writer.py); the leader's side
(isr.py, the Fetch path fetch_reader.py with replica_selector.py, acks=all in
delayed_produce.py over purgatory.py, and transactions: txn_verification.py,
txn_markers.py); the follower's side (replica_fetcher.py, fetch_state.py,
fetcher_truncation.py, truncation.py). See docs/architecture.md, "Replication".
"""
