"""Brokers joining, dying, re-registering and shutting down under control.

How this works (Kafka's BrokerChange and ControlledShutdown events):

* the /brokers/ids child watch becomes BrokerChange. New brokers get a channel, the
  cluster's metadata and LeaderAndIsr for their replicas (onBrokerStartup); dead ones
  lose their channel and their replicas go offline (onBrokerFailure): partitions they
  led are elected again, they leave every ISR. A broker whose znode was recreated (a
  new broker epoch: it restarted within one watch firing) goes through failure, then
  startup;
* ControlledShutdown (a broker asking before it stops): leadership moves to an ISR
  member that stays, its follower replicas are stopped and leave the ISR; the answer
  lists the partitions it still leads, and the broker asks again while any remain.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import trio

from minibroker.controller import events as ev
from minibroker.controller.context import BrokerAddress, ControllerContext
from minibroker.controller.controller_zk import ControllerZk
from minibroker.controller.partition_state_machine import PartitionStateMachine
from minibroker.controller.replica_failure import ReplicaFailureHandler
from minibroker.controller.replica_state_machine import ReplicaStateMachine
from minibroker.controller.request_batch import ControllerBrokerRequestBatch, RequestSender
from minibroker.controller.state_machines import (
    ElectionStrategy,
    PartitionReplica,
    PartitionState,
    ReplicaState,
)
from minibroker.protocol.errors import BrokerNotAvailableError, KafkaError, StaleBrokerEpochError
from minibroker.protocol.topic_partition import TopicPartition

log = logging.getLogger("minibroker.controller")

STALE_SHUTDOWN = "the broker epoch is not the broker's current registration"


class BrokerChannel(RequestSender, Protocol):
    """The ControllerChannelManager as the controller uses it."""

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...
    def add_broker(self, broker: BrokerAddress) -> None: ...
    def remove_broker(self, broker_id: int) -> None: ...
    def remove_all(self) -> None: ...
    async def all_answered(self) -> None: ...


class BrokerChangeHandler:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZk,
        channel: BrokerChannel,
        batch: ControllerBrokerRequestBatch,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        replica_failure: ReplicaFailureHandler,
        *,
        resume_for_brokers: Sequence[Callable[[set[int]], Awaitable[None]]],
    ) -> None:
        """``resume_for_brokers`` run after brokers started: work that waited for them
        (reassignments to them, deletion of their replicas) goes on."""
        self._ctx = context
        self._zk = zk
        self._channel = channel
        self._batch = batch
        self._psm = partition_state_machine
        self._rsm = replica_state_machine
        self._replica_failure = replica_failure
        self._resume_for_brokers = resume_for_brokers

    async def on_broker_change(self, event: ev.BrokerChange) -> None:
        ctx = self._ctx
        current = await self._zk.get_live_brokers(watch=True)
        known = dict(ctx.live_brokers)
        new = sorted(set(current) - set(known))
        dead = sorted(set(known) - set(current))
        bounced = sorted(b for b in set(current) & set(known) if known[b].epoch != current[b].epoch)
        for broker_id in dead + bounced:
            self._channel.remove_broker(broker_id)
        for broker_id in new + bounced:
            self._channel.add_broker(current[broker_id])
        if new:
            ctx.add_live_brokers(current[b] for b in new)
            await self.on_broker_startup(new)
        if bounced:
            ctx.remove_live_brokers(bounced)
            await self.on_broker_failure(bounced)
            ctx.add_live_brokers(current[b] for b in bounced)
            await self.on_broker_startup(bounced)
        if dead:
            ctx.remove_live_brokers(dead)
            await self.on_broker_failure(dead)

    async def on_broker_startup(self, new_brokers: list[int]) -> None:
        ctx = self._ctx
        log.info("brokers started: %s", new_brokers)
        existing = ctx.live_or_shutting_down_broker_ids - set(new_brokers)
        self._batch.new_batch()
        self._batch.add_update_metadata(existing, [])
        self._batch.add_update_metadata(new_brokers, ctx.leadership)
        self._batch.send_requests(ctx.epoch)
        replicas = {
            r
            for r in ctx.replicas_on_brokers(new_brokers)
            if r.topic not in ctx.topics_to_be_deleted
        }
        await self._rsm.handle_state_changes(replicas, ReplicaState.ONLINE)
        await self._psm.trigger_online_partition_state_change()
        for resume in self._resume_for_brokers:
            await resume(set(new_brokers))

    async def on_broker_failure(self, dead_brokers: list[int]) -> None:
        ctx = self._ctx
        log.info("brokers failed: %s", dead_brokers)
        dead = set(dead_brokers)
        ctx.shutting_down_broker_ids -= dead
        await self._replica_failure.on_replicas_become_offline(ctx.replicas_on_brokers(dead))

    async def on_controlled_shutdown(self, event: ev.ControlledShutdown) -> None:
        try:
            event.reply.set(await self.shutdown_broker(event.broker_id, event.broker_epoch))
        except KafkaError as exc:
            event.reply.fail(exc)

    async def shutdown_broker(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        """Move leadership off ``broker_id`` and stop its follower replicas; returns the
        replicated partitions it still leads (the broker asks again while any remain).
        ``broker_epoch`` must be the epoch of its registration (-1 is no epoch):
        a request of an earlier incarnation changes nothing."""
        ctx = self._ctx
        if broker_id not in ctx.live_brokers:
            raise BrokerNotAvailableError(f"broker {broker_id} is not registered")
        if ctx.live_brokers[broker_id].epoch != broker_epoch:
            raise StaleBrokerEpochError(STALE_SHUTDOWN)
        ctx.shutting_down_broker_ids.add(broker_id)
        to_act_on = [
            tp
            for tp in sorted(ctx.partitions_on_broker(broker_id))
            if len(ctx.replicas_for(tp)) > 1
            and tp in ctx.leadership
            and tp.topic not in ctx.topics_to_be_deleted
        ]
        led = [tp for tp in to_act_on if ctx.leadership[tp].leader == broker_id]
        followers = [tp for tp in to_act_on if ctx.leadership[tp].leader != broker_id]
        await self._psm.handle_state_changes(
            led, PartitionState.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN
        )
        self._batch.new_batch()
        for tp in followers:
            self._batch.add_stop_replica([broker_id], tp, delete=False)
        self._batch.send_requests(ctx.epoch)
        await self._rsm.handle_state_changes(
            [PartitionReplica(tp.topic, tp.partition, broker_id) for tp in followers],
            ReplicaState.OFFLINE,
        )
        return {tp for tp in ctx.partitions_led_by(broker_id) if len(ctx.replicas_for(tp)) > 1}
