"""What a running broker is made of: the parts ``Broker.run`` builds, in one place, once
its logs are loaded (and, in cluster mode, its ZooKeeper session is open), before any
listener serves.

They are one frozen object, so whoever is handed it - the broker's services (node/
passes the group and transaction coordinators), its shutdown, tests - gets every part
built and typed as such, not attributes that stay None until start-up reaches them.
The ones that can be absent are absent by configuration, and say when.
"""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.broker.admin.admin_manager import AdminManager
from minibroker.broker.admin.topic_configs import TopicConfigs
from minibroker.broker.apis import KafkaApis
from minibroker.broker.cluster.producer_ids import ProducerIdManager
from minibroker.broker.logdirs.corruption import Scrubber
from minibroker.broker.logdirs.log_cleaner import LogCleaner
from minibroker.broker.logdirs.log_dir_mover import LogDirMover
from minibroker.broker.network.server import BrokerServer
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.broker.replication.txn_markers import WriteTxnMarkersApi
from minibroker.broker.replication.txn_verification import TxnVerification
from minibroker.broker.security.authorizer import AclAuthorizer
from minibroker.broker.security.identity_key import BrokerKey
from minibroker.net.security import ClientSecurity
from minibroker.storage.log_manager import LogManager


@dataclass(frozen=True)
class BrokerParts:
    """The parts of a started broker (see the module doc)."""

    log_manager: LogManager
    replica_manager: ReplicaManager
    kafka_apis: KafkaApis
    """The data-path handlers."""
    txn_markers: WriteTxnMarkersApi
    """The leader's side of WriteTxnMarkers (the transaction coordinator's markers)."""
    txn_verification: TxnVerification
    """Where the data-path handlers find the transaction coordinator's answer (KIP-890),
    which its service provides while it runs."""
    producer_ids: ProducerIdManager
    topic_configs: TopicConfigs
    """DescribeConfigs / AlterConfigs."""
    log_dir_mover: LogDirMover
    log_cleaner: LogCleaner
    scrubber: Scrubber
    server: BrokerServer
    """The listener (``listeners``)."""
    kafka_server: BrokerServer | None
    """The Kafka-protocol listener: with ``kafka.listeners``."""
    admin_manager: AdminManager | None
    """CreateTopics and friends: in cluster mode."""
    authorizer: AclAuthorizer | None
    """With ``authorizer.class.name``."""
    identity: BrokerKey | None
    """The key this broker proves its id with: in cluster mode
    (broker/security/identity_key.py)."""
    inter_broker_security: ClientSecurity | None
    """How this broker's connections to the others secure and prove themselves (None:
    plaintext, no proof)."""
