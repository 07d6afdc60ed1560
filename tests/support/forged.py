"""Controller requests as an attacker would forge them: the bodies of StopReplica (with
delete) and LeaderAndIsr for partition 0 of a topic, carrying whatever controller id and
epochs the attacker knows or guesses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

FORGED_LEADER_EPOCH = 1000
"""Far above any real leader epoch of a test topic: a broker that believed it would switch."""


def stop_replica(
    topic: str, controller_id: int, controller_epoch: int, broker_epoch: int
) -> dict[str, Any]:
    """StopReplica deleting ``topic``-0."""
    return {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "partition_states": [
            {
                "topic_name": topic,
                "partition_index": 0,
                "leader_epoch": -1,
                "delete_partition": True,
            }
        ],
    }


def leader_and_isr(
    topic: str,
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    *,
    leader: int,
    replicas: Sequence[int],
) -> dict[str, Any]:
    """LeaderAndIsr making ``leader`` the sole in-sync leader of ``topic``-0."""
    return {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "partition_states": [
            {
                "topic_name": topic,
                "partition_index": 0,
                "controller_epoch": controller_epoch,
                "leader": leader,
                "leader_epoch": FORGED_LEADER_EPOCH,
                "isr": [leader],
                "zk_version": 0,
                "replicas": list(replicas),
                "is_new": False,
            }
        ],
        "live_leaders": [{"id": leader, "host": "127.0.0.1", "port": 1}],
    }
