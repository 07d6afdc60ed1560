"""Kafka's ZooKeeper data layer (Kafka's KafkaZkClient) over ``ZkClient``.

How this works: each method reads or writes the znodes of ``zk.model`` and returns typed
values. Multi-partition operations are pipelined (one round trip for all partitions),
which keeps controller failover fast with many partitions. The methods are grouped by
the znodes they touch, one module each:

* ``zk.broker_registration``: ``/brokers/ids/N``, the live brokers;
* ``zk.topic_znodes``: topic assignments, configs, deletion marks, partition states;
* ``zk.controller_election``: ``/controller`` and ``/controller_epoch``;
* ``zk.notifications``: ISR change and log dir event notifications, reassignment and
  preferred election requests;
* ``zk.znodes``: what they share - the session, the clock, fenced writes.

Watches are one-shot (see ``zk.client``): ``watch=True`` arms one on the read it belongs
to; the resulting ``WatchEvent`` names the path to read (and re-arm) again.

Who calls what: brokers register themselves and report ISR changes; the active
controller owns everything under /brokers/topics/*/partitions, /controller_epoch and the
admin notifications it consumes; any broker may create topics and deletion marks
(CreateTopics / DeleteTopics on a non-controller broker).
"""

from __future__ import annotations

from minibroker.zk.broker_registration import BrokerZnodes
from minibroker.zk.controller_election import ControllerElectionZnodes
from minibroker.zk.model import PERSISTENT_PATHS
from minibroker.zk.notifications import NotificationZnodes
from minibroker.zk.producer_ids import ProducerIdZnodes
from minibroker.zk.topic_znodes import TopicZnodes


class KafkaZkClient(
    BrokerZnodes, TopicZnodes, ControllerElectionZnodes, NotificationZnodes, ProducerIdZnodes
):
    """Kafka's znodes as typed async calls. ``clock`` gives wall-clock ms (injectable)."""

    async def create_top_level_paths(self) -> None:
        """The persistent parents every broker expects (idempotent)."""
        for path in PERSISTENT_PATHS:
            await self.zk.ensure_path(path)
