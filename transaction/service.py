"""The coordinators as one broker service: the group coordinator, and the transaction
coordinator built beside it (a transaction's offsets are the group coordinator's).

``run_coordinators(broker)`` (a ``BrokerService``, started by node/) starts the group
coordinator (coordinator/service.py), then assembles the TransactionStateManager over
``__transaction_state``, the MarkerSender, the TransactionCoordinator and its handlers,
and the leaders' transaction verification (KIP-890 part 1: transaction/verifier.py;
part 2's adds, also for TxnOffsetCommit v5: transaction/offsets_adder.py);
adds FindCoordinator's key type 1; listens to the ReplicaManager's leadership changes
(load a ``__transaction_state`` partition on becoming its leader, drop it on losing
it); and runs the timeout checks until the broker stops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import trio

from minibroker.broker.broker import Broker
from minibroker.broker.cluster.coordinator_locator import CoordinatorLocator
from minibroker.broker.cluster.producer_ids import InitProducerIdApi
from minibroker.broker.replication.partition import Partition
from minibroker.coordinator.offsets_log import ReplicaOffsetsLog
from minibroker.coordinator.service import serve_group_coordinator
from minibroker.protocol.messages.groups import KEY_TYPE_TRANSACTION
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.protocol.transaction_log import TRANSACTION_STATE_TOPIC, partition_for
from minibroker.transaction.apis import TransactionApis
from minibroker.transaction.broker_links import BrokerLinks
from minibroker.transaction.coordinator import TransactionConfig, TransactionCoordinator
from minibroker.transaction.markers import MarkerSender
from minibroker.transaction.metrics import TransactionCollector
from minibroker.transaction.offsets_adder import OffsetsPartitionAdder
from minibroker.transaction.state_manager import TransactionStateManager
from minibroker.transaction.verifier import TransactionVerifier

TRANSACTION_STATE_SEGMENT_BYTES = 104857600
"""Kafka's transaction.state.log.segment.bytes: small segments compact and load sooner."""
STATE_WRITE_TIMEOUT_MS = 5000
"""How long a state change waits for every in-sync replica of its partition."""
VERIFY_TIMEOUT_S = 10.0
"""How long a leader waits for a coordinator's verification (then NOT_ENOUGH_REPLICAS:
the producer retries)."""


async def run_coordinators(
    broker: Broker, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    config = broker.config
    parts = broker.parts  # a service starts once the broker's parts are built
    replica_manager, producer_ids = parts.replica_manager, parts.producer_ids
    cache = broker.metadata_cache
    async with trio.open_nursery() as nursery:
        group = await nursery.start(serve_group_coordinator, broker)

        def spawn(fn: Callable[[], Awaitable[None]]) -> None:
            nursery.start_soon(fn)

        admin = parts.admin_manager
        locator = CoordinatorLocator(
            cache,
            topic=TRANSACTION_STATE_TOPIC,
            partition_for=partition_for,
            num_partitions=config.transaction_state_log_num_partitions,
            replication_factor=config.transaction_state_log_replication_factor,
            configs={
                "cleanup.policy": "compact",
                "segment.bytes": str(TRANSACTION_STATE_SEGMENT_BYTES),
                "unclean.leader.election.enable": "false",
            },
            min_isr=config.transaction_state_log_min_isr,
            create_topics=None if admin is None else admin.create_topics,
            spawn=spawn,
        )
        group.apis.locators[KEY_TYPE_TRANSACTION] = locator

        def partition_count() -> int:
            return locator.partition_count() or config.transaction_state_log_num_partitions

        state = TransactionStateManager(
            ReplicaOffsetsLog(
                replica_manager,
                timeout_ms=STATE_WRITE_TIMEOUT_MS,
                clock=broker.clock,
                topic=TRANSACTION_STATE_TOPIC,
            ),
            num_partitions=partition_count,
            clock=broker.clock,
        )
        markers = MarkerSender(
            cache,
            broker_id=config.broker_id,
            security=parts.inter_broker_security,
            local=parts.txn_markers.start,
        )
        coordinator = TransactionCoordinator(
            state,
            producer_ids,
            markers,
            TransactionConfig(
                max_timeout_ms=config.transaction_max_timeout_ms,
                id_expiration_ms=config.transactional_id_expiration_ms,
                abort_interval_ms=config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            ),
            clock=broker.clock,
        )
        await nursery.start(coordinator.run)
        verifier_links = BrokerLinks(
            cache,
            broker_id=config.broker_id,
            security=parts.inter_broker_security,
            client_id="txn-verifier",
            request_timeout_s=VERIFY_TIMEOUT_S,
        )
        verifier = TransactionVerifier(
            coordinator, cache, verifier_links, broker_id=config.broker_id
        )
        TransactionApis(
            coordinator,
            InitProducerIdApi(producer_ids),
            cache,
            offsets_partition=group.manager.partition_of,
        ).install(broker.dispatcher)
        OffsetsPartitionAdder(
            group.apis.handle_txn_offset_commit,
            verifier,
            offsets_partition=group.manager.partition_of,
        ).install(broker.dispatcher)

        def leadership_changed(
            leaders: Sequence[Partition], resigned: Sequence[TopicPartition]
        ) -> None:
            for tp in resigned:
                if tp.topic == TRANSACTION_STATE_TOPIC:
                    state.resigned(tp.partition)
            for partition in leaders:
                if partition.tp.topic == TRANSACTION_STATE_TOPIC:
                    nursery.start_soon(
                        state.became_leader, partition.tp.partition, partition.leader_epoch
                    )

        def marker_written(tp: TopicPartition, producer_id: int, committed: bool) -> None:
            if tp.topic == OFFSETS_TOPIC:  # a transaction's offsets are committed or dropped
                group.manager.complete_txn(tp.partition, producer_id, committed)

        parts.txn_markers.marker_listeners.append(marker_written)
        replica_manager.replicas.leadership_listeners.append(leadership_changed)
        collector = TransactionCollector(state, markers)
        broker.metrics.registry.register(collector)
        already_led = [
            p
            for tp, p in replica_manager.replicas.partitions.items()
            if p.is_leader and tp.topic == TRANSACTION_STATE_TOPIC
        ]
        leadership_changed(already_led, [])
        try:
            with parts.txn_verification.provided_by(verifier):  # leaders ask it meanwhile
                task_status.started()
                await trio.sleep_forever()
        finally:
            replica_manager.replicas.leadership_listeners.remove(leadership_changed)
            parts.txn_markers.marker_listeners.remove(marker_written)
            broker.metrics.registry.unregister(collector)
            await markers.aclose()
            await verifier_links.aclose()
