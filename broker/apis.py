"""KafkaApis: the handlers of the data-path and metadata API keys (the controller's
requests are broker/replication/controller_apis.py's).

Each ``handle_*`` method takes the request's header and validated body and returns a
body, None or a ``Deferred`` (broker/requests/dispatcher.py says what each means); the bodies
are the TypedDicts of protocol/messages/bodies.py, plain dicts at run time. ``install``
registers them with the broker's ``RequestDispatcher``. The handlers know no wire
format: the codec in front of the dispatcher decodes and encodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

import trio

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.cluster.topic_auto_creation import TopicAutoCreator
from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.replication.fetch_reader import FetchParams, FetchPartition, PartitionRead
from minibroker.broker.replication.partition import AppendResult
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.broker.replication.txn_verification import (
    TxnVerification,
    TxnVerifier,
    Unverified,
    knows_abortable,
    unverified,
    verify,
    verify_now,
)
from minibroker.broker.requests.dispatcher import Answer, Deferred, RequestDispatcher
from minibroker.broker.requests.request_handler import CloseConnection
from minibroker.broker.security.authorized_operations import (
    cluster_operations,
    everything,
    metadata_operations,
)
from minibroker.protocol.api import RequestHeader, api_versions_body
from minibroker.protocol.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    InvalidRecordError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicIdError,
)
from minibroker.protocol.features import transaction_v2
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.bodies import Records
from minibroker.protocol.session import Session
from minibroker.protocol.topic_partition import TopicPartition

PARTITIONS_PER_TURN = 100
"""A Produce, Fetch or ListOffsets naming more partitions is appended or read this many
at a time, the event loop serving other connections between (a turn stays within a few
milliseconds: docs/performance.md, "Figures behind the code")."""

NOT_FROM_REPLICA = "a replica's request is accepted only from that broker's proven connection"


ReplicaCheck: TypeAlias = Callable[[Session, int], bool]
"""Whether a session may speak for replica (broker) id N: ControllerFence.is_broker."""


class KafkaApis:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        *,
        is_replica: ReplicaCheck = lambda session, broker_id: False,
        txn_verification: TxnVerification | None = None,
    ) -> None:
        """``is_replica``: who may send a follower's requests (replica id >= 0); the
        default refuses them all. ``txn_verification``: where the transaction
        coordinator's answer is found (KIP-890; the broker's part), none by default."""
        self.is_replica = is_replica
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        replicas = replica_manager.replicas
        self.fetch_max_bytes = replicas.config.fetch_max_bytes
        self.max_partitions = replicas.config.request_max_partitions
        self.metrics = replicas.metrics
        self.topic_auto_creator = TopicAutoCreator(metadata_cache)
        self.txn_verification = txn_verification or TxnVerification()

    def install(self, dispatcher: RequestDispatcher) -> None:
        """Serve this class's API keys through ``dispatcher``."""
        dispatcher.register(bodies.PRODUCE, self.handle_produce)
        dispatcher.register(bodies.FETCH, self.handle_fetch)
        dispatcher.register(bodies.LIST_OFFSETS, self.handle_list_offsets)
        dispatcher.register(bodies.METADATA, self.handle_metadata)
        dispatcher.register(bodies.API_VERSIONS, self.handle_api_versions)
        dispatcher.register(bodies.OFFSET_FOR_LEADER_EPOCH, self.handle_offset_for_leader_epoch)
        dispatcher.register(bodies.DESCRIBE_CLUSTER, self.handle_describe_cluster)

    def _check_replica(self, header: RequestHeader, replica_id: int) -> None:
        """A replica's request (``replica_id`` >= 0) only from that broker's proven
        connection (broker/security/controller_fence.py): a fake follower could move the HW."""
        if replica_id >= 0 and not self.is_replica(header.session, replica_id):
            raise ClusterAuthorizationFailedError(NOT_FROM_REPLICA)

    # -- produce ---------------------------------------------------------------------------

    def handle_produce(
        self, header: RequestHeader, request: bodies.ProduceRequest
    ) -> Answer[bodies.ProduceResponse]:
        topics = request["topics"]
        acks = request["acks"]
        transactional_id = request.get("transactional_id")
        if (
            transactional_id is not None
            and (verifier := self.txn_verification.verifier) is not None
        ):
            entries = self._produce_entries(topics)
            needed = unverified(self.replica_manager.replicas.get_partition, entries)
            if needed and acks != 0:
                # KIP-890 part 2: a v12 client leaves adding the partitions to the leader
                add = transaction_v2(header.api_key, header.api_version, request)
                abortable = knows_abortable(header.api_key, header.api_version)
                refused = verify_now(
                    verifier, transactional_id, needed, add=add, abortable=abortable
                )
                if refused != {}:  # not answered here and now, or some refused
                    return self._produce_verified(
                        verifier, request, entries, needed, add, abortable
                    )
        if len(topics) == 1 and len(topics[0]["partitions"]) == 1 and self.max_partitions > 0:
            # One partition (every send-and-wait): nothing to count, none named twice.
            topic = topics[0]
            only = topic["partitions"][0]
            # tuple.__new__: the NamedTuple's generated __new__ is a Python call.
            tp = tuple.__new__(TopicPartition, (topic["name"], only["index"]))
            entry = (tp, only["records"])
            results = self.replica_manager.append_records(acks, [entry])
        else:
            entries = self._produce_entries(topics)
            if len(entries) > PARTITIONS_PER_TURN:
                return self._produce_in_turns(acks, entries, request["timeout_ms"])
            results = self._append(acks, entries)
        if acks == 0:
            # No answer was asked for. On a failure Kafka closes the connection: the
            # producer's only way to notice and refresh its metadata.
            failed = [(tp, r) for tp, r in results if isinstance(r, KafkaError)]
            if failed:
                tp, error = failed[0]
                raise CloseConnection(f"acks=0 produce to {tp} failed: {error.name}")
            return None
        if acks == -1 and any(not isinstance(r, KafkaError) for _, r in results):
            manager = self.replica_manager
            acknowledged = manager.acknowledged_now(results)
            if acknowledged is not None:  # one in-sync replica: no task, no wait
                return _produce_body(results, acknowledged)

            async def await_acks() -> bodies.ProduceResponse:
                outcomes = await manager.wait_for_acks(results, request["timeout_ms"])
                return _produce_body(results, outcomes)

            return Deferred(await_acks)
        return _produce_body(results, {})

    def _produce_entries(
        self, topics: list[bodies.ProduceRequestTopic]
    ) -> list[tuple[TopicPartition, Records]]:
        """Produce's (partition, records) when it names several partitions, counted
        against the limit first."""
        check_partition_count(topics, self.max_partitions)
        return [
            (TopicPartition(topic["name"], p["index"]), p["records"])
            for topic in topics
            for p in topic["partitions"]
        ]

    def _append(
        self, acks: int, entries: list[tuple[TopicPartition, Records]]
    ) -> list[tuple[TopicPartition, AppendResult | KafkaError]]:
        """The appends of several partitions; each named twice answered INVALID_REQUEST."""
        twice = duplicate_partitions(tp for tp, _ in entries)
        if twice:
            entries = [(tp, records) for tp, records in entries if tp not in twice]
        results = self.replica_manager.append_records(acks, entries)
        results += [(tp, _named_twice(tp)) for tp in twice]
        return results

    def _produce_verified(
        self,
        verifier: TxnVerifier,
        request: bodies.ProduceRequest,
        entries: list[tuple[TopicPartition, Records]],
        needed: Unverified,
        add: bool,
        abortable: bool,
    ) -> Deferred[bodies.ProduceResponse]:
        """A transactional Produce some of whose batches would open a transaction: the
        coordinator is asked first (broker/replication/txn_verification.py; ``add``: to
        add the partitions); its connection reads no further request until the appends
        are made (``ordered``)."""
        manager = self.replica_manager
        transactional_id = request["transactional_id"]
        assert transactional_id is not None
        acks = request["acks"]
        ordered = trio.Event()

        async def verified() -> bodies.ProduceResponse:
            try:
                refused = await verify(
                    verifier,
                    manager.replicas.get_partition,
                    transactional_id,
                    needed,
                    add=add,
                    abortable=abortable,
                )
                # No await from here to the append: no marker can land in between.
                results = self._append(acks, [(tp, r) for tp, r in entries if tp not in refused])
            finally:
                ordered.set()
            results += list(refused.items())
            outcomes = {}
            if acks == -1 and any(not isinstance(r, KafkaError) for _, r in results):
                outcomes = await manager.wait_for_acks(results, request["timeout_ms"])
            return _produce_body(results, outcomes)

        return Deferred(verified, ordered)

    def _produce_in_turns(
        self, acks: int, entries: list[tuple[TopicPartition, Records]], timeout_ms: int
    ) -> Deferred[bodies.ProduceResponse]:
        """A Produce of many partitions, appended ``PARTITIONS_PER_TURN`` at a time with
        the other connections served between: its connection reads no further request
        until every append is made (``ordered``), so a pipelined next Produce still
        follows it, partition by partition."""
        manager = self.replica_manager
        ordered = trio.Event()
        twice = duplicate_partitions(tp for tp, _ in entries)

        async def in_turns() -> bodies.ProduceResponse | None:
            results: list[tuple[TopicPartition, AppendResult | KafkaError]] = []
            try:
                once = [(tp, records) for tp, records in entries if tp not in twice]
                for start in range(0, len(once), PARTITIONS_PER_TURN):
                    if start:
                        await trio.lowlevel.checkpoint()
                    chunk = once[start : start + PARTITIONS_PER_TURN]
                    results += manager.append_records(acks, chunk)
            finally:
                ordered.set()
            results += [(tp, _named_twice(tp)) for tp in twice]
            if acks == 0:
                failed = [(tp, r) for tp, r in results if isinstance(r, KafkaError)]
                if failed:
                    tp, error = failed[0]
                    raise CloseConnection(f"acks=0 produce to {tp} failed: {error.name}")
                return None
            outcomes = {}
            if acks == -1 and any(not isinstance(r, KafkaError) for _, r in results):
                outcomes = await manager.wait_for_acks(results, timeout_ms)
            return _produce_body(results, outcomes)

        return Deferred(in_turns, ordered)

    # -- offset for leader epoch -----------------------------------------------------------

    def handle_offset_for_leader_epoch(
        self, header: RequestHeader, request: bodies.OffsetForLeaderEpochRequest
    ) -> Answer[bodies.OffsetForLeaderEpochResponse]:
        """Where each asked-about epoch ends on this leader's log (KIP-101, KIP-279)."""
        self._check_replica(header, request["replica_id"])
        check_partition_count(request["topics"], self.max_partitions)
        topics: list[bodies.OffsetForLeaderEpochResponseTopic] = []
        for topic in request["topics"]:
            answers: list[bodies.OffsetForLeaderEpochResponseTopicPartition] = []
            for p in topic["partitions"]:
                tp = TopicPartition(topic["topic"], p["partition"])
                try:
                    partition = self.replica_manager.replicas.partition_or_error(tp)
                    epoch, end = partition.end_offset_for_leader_epoch(
                        p["leader_epoch"], current_leader_epoch=p["current_leader_epoch"]
                    )
                except KafkaError as exc:
                    code, epoch, end = exc.code, -1, -1
                else:
                    code = NONE
                answers.append(
                    {
                        "partition": tp.partition,
                        "error_code": code,
                        "leader_epoch": epoch,
                        "end_offset": end,
                    }
                )
            topics.append({"topic": topic["topic"], "partitions": answers})
        return {"throttle_time_ms": 0, "topics": topics}

    # -- fetch -----------------------------------------------------------------------------

    def handle_fetch(
        self, header: RequestHeader, request: bodies.FetchRequest
    ) -> Answer[bodies.FetchResponse]:
        self._check_replica(header, request["replica_id"])
        check_partition_count(request["topics"], self.max_partitions)
        named: Sequence[tuple[str, bodies.FetchRequestTopic]]
        ids: dict[str, bytes] = {}
        unknown_ids: list[bodies.FetchResponseTopic] = []
        if all(topic["topic"] for topic in request["topics"]):
            named = [(topic["topic"], topic) for topic in request["topics"]]
        else:  # v13+: by id alone
            named = self._topics_named_by_id(request["topics"], ids, unknown_ids)
        requests = [
            FetchPartition(
                TopicPartition(name, p["partition"]),
                p["fetch_offset"],
                p["partition_max_bytes"],
                p["current_leader_epoch"],
                p["log_start_offset"],
            )
            for name, topic in named
            for p in topic["partitions"]
        ]
        twice = duplicate_partitions(p.tp for p in requests)
        if twice:
            requests = [p for p in requests if p.tp not in twice]
        refused = [PartitionRead(tp, None, _named_twice(tp)) for tp in twice]
        fetch = FetchParams(
            replica_id=request["replica_id"],
            max_bytes=min(request["max_bytes"], self.fetch_max_bytes),
            min_bytes=request["min_bytes"],
            max_wait_ms=request["max_wait_ms"],
            partitions=requests,
            # Kafka's ClientMetadata: a consumer's Fetch v11+ may be served by followers.
            client_rack=request["rack_id"]
            if header.api_version >= FOLLOWER_FETCH_VERSION and request["replica_id"] < 0
            else None,
            read_committed=request["isolation_level"] == READ_COMMITTED
            and request["replica_id"] < 0,
        )
        manager = self.replica_manager
        metrics = self.metrics if fetch.replica_id < 0 else None  # Kafka's BytesOut: consumers
        if len(requests) > PARTITIONS_PER_TURN:

            async def in_turns() -> bodies.FetchResponse:
                found = await manager.fetch_messages_in_turns(fetch, PARTITIONS_PER_TURN)
                if not isinstance(found, list):
                    found = await manager.wait_for_fetch(fetch, found)
                await trio.lowlevel.checkpoint()  # the answer is built and encoded next
                return _fetch_body(found + refused, metrics, ids, unknown_ids)

            return Deferred(in_turns)
        found = manager.fetch_messages(fetch)
        if isinstance(found, list):
            return _fetch_body(found + refused, metrics, ids, unknown_ids)

        async def long_poll() -> bodies.FetchResponse:
            reads = await manager.wait_for_fetch(fetch, found)
            return _fetch_body(reads + refused, metrics, ids, unknown_ids)

        return Deferred(long_poll)

    def _topics_named_by_id(
        self,
        topics: list[bodies.FetchRequestTopic],
        ids: dict[str, bytes],
        unknown: list[bodies.FetchResponseTopic],
    ) -> list[tuple[str, bodies.FetchRequestTopic]]:
        """Fetch v13+'s topics, named by id alone, with their names; fills ``ids`` (name
        -> id, for the answer) and ``unknown`` (the answers for ids no topic here has:
        UNKNOWN_TOPIC_ID on every partition asked for, as Kafka)."""
        named: list[tuple[str, bodies.FetchRequestTopic]] = []
        for topic in topics:
            topic_id = topic["topic_id"]
            name = topic["topic"] or self.metadata_cache.topic_named_by(topic_id)
            if name is None:
                unknown.append(
                    {
                        "topic": "",
                        "topic_id": topic_id,
                        "partitions": [
                            {
                                "partition_index": p["partition"],
                                "error_code": UnknownTopicIdError.code,
                                "records": b"",
                            }
                            for p in topic["partitions"]
                        ],
                    }
                )
                continue
            ids[name] = topic_id
            named.append((name, topic))
        return named

    # -- list offsets ----------------------------------------------------------------------

    def handle_list_offsets(
        self, header: RequestHeader, request: bodies.ListOffsetsRequest
    ) -> Answer[bodies.ListOffsetsResponse]:
        """Each partition's offset for its timestamp; a request naming more than
        ``PARTITIONS_PER_TURN`` partitions is answered in turns, its connection reading
        no further request until every offset is read (a pipelined Produce must not
        move them meanwhile)."""
        check_partition_count(request["topics"], self.max_partitions)
        from_replica = request["replica_id"] >= 0
        read_committed = request["isolation_level"] == READ_COMMITTED
        named = [
            (TopicPartition(topic["name"], p["partition_index"]), p)
            for topic in request["topics"]
            for p in topic["partitions"]
        ]
        twice = duplicate_partitions(tp for tp, _ in named)
        manager = self.replica_manager

        def answer(
            tp: TopicPartition, p: bodies.ListOffsetsRequestTopicPartition
        ) -> bodies.ListOffsetsResponseTopicPartition:
            try:
                if tp in twice:
                    raise _named_twice(tp)
                ts, offset, epoch = manager.replicas.partition_or_error(tp).offset_for_timestamp(
                    p["timestamp"],
                    from_replica=from_replica,
                    current_leader_epoch=p["current_leader_epoch"],
                    read_committed=read_committed,
                )
            except KafkaError as exc:
                code, ts, offset, epoch = exc.code, -1, -1, -1
            else:
                code = NONE
            return {
                "partition_index": tp.partition,
                "error_code": code,
                "timestamp": ts,
                "offset": offset,
                "leader_epoch": epoch,
            }

        def body(
            answers: list[bodies.ListOffsetsResponseTopicPartition],
        ) -> bodies.ListOffsetsResponse:
            topics: list[bodies.ListOffsetsResponseTopic] = []
            start = 0
            for topic in request["topics"]:
                end = start + len(topic["partitions"])
                topics.append({"name": topic["name"], "partitions": answers[start:end]})
                start = end
            return {"throttle_time_ms": 0, "topics": topics}

        if len(named) <= PARTITIONS_PER_TURN:
            return body([answer(tp, p) for tp, p in named])
        ordered = trio.Event()

        async def in_turns() -> bodies.ListOffsetsResponse:
            answers: list[bodies.ListOffsetsResponseTopicPartition] = []
            try:
                for start in range(0, len(named), PARTITIONS_PER_TURN):
                    if start:
                        await trio.lowlevel.checkpoint()
                    chunk = named[start : start + PARTITIONS_PER_TURN]
                    answers += [answer(tp, p) for tp, p in chunk]
            finally:
                ordered.set()
            return body(answers)

        return Deferred(in_turns, ordered)

    # -- metadata and versions -------------------------------------------------------------

    def handle_metadata(
        self, header: RequestHeader, request: bodies.MetadataRequest
    ) -> Answer[bodies.MetadataResponse]:
        requested = request["topics"]
        if requested is not None and len(requested) > self.max_partitions:
            raise InvalidRequestError(
                f"request names {len(requested)} topics, more than request.max.partitions"
                f" ({self.max_partitions})"
            )
        if requested is None:
            return metadata_operations(
                self.metadata_cache.metadata_response(None), request, everything
            )
        names, unknown_ids = self._named_topics(requested)
        if names and request["allow_auto_topic_creation"]:
            self.topic_auto_creator.request(names)
        answer = self.metadata_cache.metadata_response(names)
        if unknown_ids:  # the memoised answer stays as it is
            answer = {**answer, "topics": [*answer["topics"], *unknown_ids]}
        return metadata_operations(answer, request, everything)

    def _named_topics(
        self, requested: list[bodies.MetadataRequestTopic]
    ) -> tuple[list[str], list[bodies.MetadataResponseTopic]]:
        """The names of the requested topics (v10+ may name one by id alone), and the
        answers for ids no topic here has (UNKNOWN_TOPIC_ID)."""
        names: list[str] = []
        unknown: list[bodies.MetadataResponseTopic] = []
        for topic in requested:
            name = topic["name"]
            if name is None:
                name = self.metadata_cache.topic_named_by(topic["topic_id"])
            if name is not None:
                names.append(name)
                continue
            unknown.append(
                {
                    "error_code": UnknownTopicIdError.code,
                    "name": None,
                    "topic_id": topic["topic_id"],
                    "is_internal": False,
                    "partitions": [],
                }
            )
        return names, unknown

    def handle_describe_cluster(
        self, header: RequestHeader, request: bodies.DescribeClusterRequest
    ) -> Answer[bodies.DescribeClusterResponse]:
        """The cluster id, controller and live brokers, from the metadata cache."""
        answer = self.metadata_cache.metadata_response(())
        return {
            "throttle_time_ms": 0,
            "error_code": NONE,
            "error_message": None,
            "cluster_id": answer["cluster_id"] or "",
            "controller_id": answer["controller_id"],
            "brokers": [_cluster_broker(b) for b in answer["brokers"]],
            "cluster_authorized_operations": cluster_operations(
                request["include_cluster_authorized_operations"], everything
            ),
        }

    def handle_api_versions(
        self, header: RequestHeader, request: bodies.ApiVersionsRequest
    ) -> Answer[bodies.ApiVersionsResponse]:
        return api_versions_body()


# -- helpers ---------------------------------------------------------------------------------


def _produce_body(
    results: Sequence[tuple[TopicPartition, AppendResult | KafkaError]],
    outcomes: dict[TopicPartition, KafkaError | None],
) -> bodies.ProduceResponse:
    """The Produce answer; ``outcomes`` (acks=all) replace the successes they cover."""
    if len(results) == 1:  # one partition (every send-and-wait): no grouping by topic
        tp, result = results[0]
        partitions = [_produce_answer(tp, result, outcomes)]
        return {"topics": [{"name": tp.topic, "partitions": partitions}], "throttle_time_ms": 0}
    responses: dict[str, list[bodies.ProduceResponseTopicPartition]] = {}
    for tp, result in results:
        responses.setdefault(tp.topic, []).append(_produce_answer(tp, result, outcomes))
    return {
        "topics": [{"name": name, "partitions": parts} for name, parts in responses.items()],
        "throttle_time_ms": 0,
    }


def _produce_answer(
    tp: TopicPartition,
    result: AppendResult | KafkaError,
    outcomes: dict[TopicPartition, KafkaError | None],
) -> bodies.ProduceResponseTopicPartition:
    error = result if isinstance(result, KafkaError) else outcomes.get(tp)
    if error is not None:
        answer: bodies.ProduceResponseTopicPartition = {
            "index": tp.partition,
            "error_code": error.code,
            "base_offset": -1,
            "log_append_time_ms": -1,
            "log_start_offset": -1,
            "error_message": error.message,
        }
        if isinstance(error, InvalidRecordError) and error.record_errors:
            answer["record_errors"] = [
                {"batch_index": index, "batch_index_error_message": why}
                for index, why in error.record_errors
            ]
        return answer
    assert isinstance(result, AppendResult)
    return {
        "index": tp.partition,
        "error_code": NONE,
        "base_offset": result.info.first_offset,
        "log_append_time_ms": result.log_append_time_ms,
        "log_start_offset": result.log_start_offset,
        "error_message": None,
    }


def _fetch_body(
    reads: Sequence[PartitionRead],
    metrics: BrokerMetrics | None,
    ids: dict[str, bytes],
    unknown_ids: list[bodies.FetchResponseTopic],
) -> bodies.FetchResponse:
    """The answer to a Fetch: ``ids`` (v13+) the id each topic was asked by, which
    every answered topic carries; ``unknown_ids`` the answers for ids no topic has."""
    topics: dict[str, list[bodies.FetchResponseTopicPartition]] = {}
    for read in reads:
        answer: bodies.FetchResponseTopicPartition
        if read.result is not None:
            r = read.result
            if metrics is not None:
                metrics.record_fetch(read.tp.topic, len(r.records))
            answer = {
                "partition_index": read.tp.partition,
                "error_code": NONE,
                "high_watermark": r.high_watermark,
                "last_stable_offset": r.last_stable_offset
                if r.last_stable_offset >= 0
                else r.high_watermark,
                "log_start_offset": r.log_start_offset,
                "records": r.records,
                "preferred_read_replica": read.preferred_read_replica,
            }
            if r.aborted is not None:
                answer["aborted_transactions"] = [
                    {"producer_id": a.producer_id, "first_offset": a.first_offset}
                    for a in r.aborted
                ]
        else:
            assert read.error is not None
            answer = {
                "partition_index": read.tp.partition,
                "error_code": read.error.code,
                "high_watermark": read.high_watermark,
                "last_stable_offset": read.high_watermark,
                "log_start_offset": read.log_start_offset,
                "records": b"",
            }
        topics.setdefault(read.tp.topic, []).append(answer)
    answered: list[bodies.FetchResponseTopic] = [
        {"topic": name, "partitions": parts} for name, parts in topics.items()
    ]
    if ids:
        for topic in answered:
            topic["topic_id"] = ids[topic["topic"]]
    return {"throttle_time_ms": 0, "error_code": NONE, "topics": answered + unknown_ids}


READ_COMMITTED = 1
"""Fetch's and ListOffsets' ``isolation_level`` for transactions' committed data only."""

FOLLOWER_FETCH_VERSION = 11
"""Fetch v11 brought rack_id and preferred_read_replica (KIP-392)."""

RequestTopic: TypeAlias = (
    bodies.ProduceRequestTopic
    | bodies.FetchRequestTopic
    | bodies.ListOffsetsRequestTopic
    | bodies.OffsetForLeaderEpochRequestTopic
)
"""A topic of a request that names partitions, as ``check_partition_count`` reads it."""


def _cluster_broker(b: bodies.MetadataResponseBroker) -> bodies.DescribeClusterResponseBroker:
    """A Metadata broker entry as DescribeCluster names it (``broker_id``), with its Kafka
    listener when it has one."""
    entry: bodies.DescribeClusterResponseBroker = {
        "broker_id": b["node_id"],
        "host": b["host"],
        "port": b["port"],
        "rack": b.get("rack"),
    }
    if "kafka_host" in b:
        entry["kafka_host"] = b["kafka_host"]
        entry["kafka_port"] = b["kafka_port"]
    return entry


def check_partition_count(topics: Sequence[RequestTopic], limit: int) -> None:
    """Refuse, before any work, a request naming more than ``limit`` partitions: a
    handler runs on the event loop, ~20 us a partition, while every client waits."""
    count = sum(len(topic["partitions"]) for topic in topics)
    if count > limit:
        raise InvalidRequestError(
            f"request names {count} partitions, more than request.max.partitions ({limit})"
        )


def duplicate_partitions(tps: Iterable[TopicPartition]) -> set[TopicPartition]:
    """The partitions named more than once. Kafka answers such a partition
    INVALID_REQUEST in ListOffsets; Produce and Fetch here do the same rather
    than let one entry silently win (a producer would lose the other batch unnoticed),
    and a request naming one partition 300,000 times costs one refusal per name."""
    seen: set[TopicPartition] = set()
    twice: set[TopicPartition] = set()
    for tp in tps:
        if tp in seen:
            twice.add(tp)
        seen.add(tp)
    return twice


def _named_twice(tp: TopicPartition) -> InvalidRequestError:
    return InvalidRequestError(f"{tp} is named more than once in the request")
