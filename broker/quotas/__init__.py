"""Quotas: the client quotas the dispatcher enforces (client_quotas.py) and the
inter-broker replication throttle (replication_quota.py, with the format of its
throttled-replicas config values). Leaves: they import nothing else of the broker.
"""
