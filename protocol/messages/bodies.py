"""Typed bodies of every message: generated from protocol/messages/ by
``python -m minibroker.protocol.messages.generate``; do not edit by hand.

``<Api>Request`` / ``<Api>Response`` are the bodies a handler reads and returns;
``<Api>RequestBody`` is a request as a sender builds it (fields with a default may be
left out: the encoders fill them); nested structs are named after their parent and
field. ``ROUTES`` ties each API key to its
pair, for broker/requests/dispatcher.py's typed registration.
"""

from __future__ import annotations

from typing import Final, Generic, Required, TypeAlias, TypedDict, TypeVar

Records: TypeAlias = bytes | bytearray | memoryview
"""RecordBatch v2 bytes: bytes from msgpack, a view of the frame or of a segment file."""

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")


class Route(Generic[RequestT, ResponseT]):
    """An API key with the body types of its request and response."""

    __slots__ = ("api_key",)

    def __init__(self, api_key: int) -> None:
        self.api_key = api_key


class ProduceRequestTopicPartition(TypedDict):
    index: int
    records: Records


class ProduceRequestTopic(TypedDict):
    name: str
    partitions: list[ProduceRequestTopicPartition]


class ProduceRequest(TypedDict):
    transactional_id: str | None
    transaction_version: int
    acks: int
    timeout_ms: int
    topics: list[ProduceRequestTopic]


class ProduceRequestBodyTopicPartition(TypedDict, total=False):
    index: Required[int]
    records: Required[Records]


class ProduceRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[ProduceRequestBodyTopicPartition]]


class ProduceRequestBody(TypedDict, total=False):
    transactional_id: str | None
    transaction_version: int
    acks: Required[int]
    timeout_ms: Required[int]
    topics: Required[list[ProduceRequestBodyTopic]]


class ProduceResponseTopicPartitionRecordError(TypedDict, total=False):
    batch_index: int
    batch_index_error_message: str | None


class ProduceResponseTopicPartitionCurrentLeader(TypedDict, total=False):
    leader_id: int
    leader_epoch: int


class ProduceResponseTopicPartition(TypedDict, total=False):
    index: Required[int]
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    record_errors: list[ProduceResponseTopicPartitionRecordError]
    error_message: str | None
    current_leader: ProduceResponseTopicPartitionCurrentLeader | None


class ProduceResponseTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[ProduceResponseTopicPartition]]


class ProduceResponse(TypedDict, total=False):
    topics: list[ProduceResponseTopic]
    throttle_time_ms: int


class FetchRequestReplicaState(TypedDict):
    replica_id: int
    replica_epoch: int


class FetchRequestTopicPartition(TypedDict):
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    replica_directory_id: bytes


class FetchRequestTopic(TypedDict):
    topic: str
    topic_id: bytes
    partitions: list[FetchRequestTopicPartition]


class FetchRequestForgottenTopicsData(TypedDict):
    topic: str
    topic_id: bytes
    partitions: list[int]


class FetchRequest(TypedDict):
    cluster_id: str | None
    replica_id: int
    replica_state: FetchRequestReplicaState | None
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchRequestTopic]
    forgotten_topics_data: list[FetchRequestForgottenTopicsData]
    rack_id: str


class FetchRequestBodyReplicaState(TypedDict, total=False):
    replica_id: Required[int]
    replica_epoch: Required[int]


class FetchRequestBodyTopicPartition(TypedDict, total=False):
    partition: Required[int]
    current_leader_epoch: int
    fetch_offset: Required[int]
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: Required[int]
    replica_directory_id: bytes


class FetchRequestBodyTopic(TypedDict, total=False):
    topic: Required[str]
    topic_id: bytes
    partitions: Required[list[FetchRequestBodyTopicPartition]]


class FetchRequestBodyForgottenTopicsData(TypedDict, total=False):
    topic: str
    topic_id: bytes
    partitions: list[int]


class FetchRequestBody(TypedDict, total=False):
    cluster_id: str | None
    replica_id: int
    replica_state: FetchRequestBodyReplicaState | None
    max_wait_ms: Required[int]
    min_bytes: Required[int]
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: Required[list[FetchRequestBodyTopic]]
    forgotten_topics_data: list[FetchRequestBodyForgottenTopicsData]
    rack_id: str


class FetchResponseTopicPartitionDivergingEpoch(TypedDict, total=False):
    epoch: int
    end_offset: int


class FetchResponseTopicPartitionCurrentLeader(TypedDict, total=False):
    leader_id: int
    leader_epoch: int


class FetchResponseTopicPartitionSnapshotId(TypedDict, total=False):
    end_offset: int
    epoch: int


class FetchResponseTopicPartitionAbortedTransaction(TypedDict, total=False):
    producer_id: int
    first_offset: int


class FetchResponseTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    diverging_epoch: FetchResponseTopicPartitionDivergingEpoch | None
    current_leader: FetchResponseTopicPartitionCurrentLeader | None
    snapshot_id: FetchResponseTopicPartitionSnapshotId | None
    aborted_transactions: list[FetchResponseTopicPartitionAbortedTransaction] | None
    preferred_read_replica: int
    records: Records


class FetchResponseTopic(TypedDict, total=False):
    topic: Required[str]
    topic_id: bytes
    partitions: Required[list[FetchResponseTopicPartition]]


class FetchResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    session_id: int
    topics: list[FetchResponseTopic]


class ListOffsetsRequestTopicPartition(TypedDict):
    partition_index: int
    current_leader_epoch: int
    timestamp: int


class ListOffsetsRequestTopic(TypedDict):
    name: str
    partitions: list[ListOffsetsRequestTopicPartition]


class ListOffsetsRequest(TypedDict):
    replica_id: int
    isolation_level: int
    topics: list[ListOffsetsRequestTopic]


class ListOffsetsRequestBodyTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    current_leader_epoch: int
    timestamp: Required[int]


class ListOffsetsRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[ListOffsetsRequestBodyTopicPartition]]


class ListOffsetsRequestBody(TypedDict, total=False):
    replica_id: int
    isolation_level: int
    topics: Required[list[ListOffsetsRequestBodyTopic]]


class ListOffsetsResponseTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    error_code: int
    timestamp: int
    offset: int
    leader_epoch: int


class ListOffsetsResponseTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[ListOffsetsResponseTopicPartition]]


class ListOffsetsResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: list[ListOffsetsResponseTopic]


class MetadataRequestTopic(TypedDict):
    topic_id: bytes
    name: str | None


class MetadataRequest(TypedDict):
    topics: list[MetadataRequestTopic] | None
    allow_auto_topic_creation: bool
    include_cluster_authorized_operations: bool
    include_topic_authorized_operations: bool


class MetadataRequestBodyTopic(TypedDict, total=False):
    topic_id: bytes
    name: Required[str | None]


class MetadataRequestBody(TypedDict, total=False):
    topics: list[MetadataRequestBodyTopic] | None
    allow_auto_topic_creation: bool
    include_cluster_authorized_operations: bool
    include_topic_authorized_operations: bool


class MetadataResponseBroker(TypedDict, total=False):
    node_id: Required[int]
    host: Required[str]
    port: Required[int]
    rack: str | None
    kafka_host: str | None
    kafka_port: int | None


class MetadataResponseTopicPartition(TypedDict, total=False):
    error_code: int
    partition_index: Required[int]
    leader_id: Required[int]
    leader_epoch: int
    replica_nodes: Required[list[int]]
    isr_nodes: Required[list[int]]
    offline_replicas: list[int]


class MetadataResponseTopic(TypedDict, total=False):
    error_code: int
    name: Required[str | None]
    topic_id: bytes
    is_internal: bool
    partitions: list[MetadataResponseTopicPartition]
    topic_authorized_operations: int


class MetadataResponse(TypedDict, total=False):
    throttle_time_ms: int
    brokers: list[MetadataResponseBroker]
    cluster_id: str | None
    controller_id: int
    topics: list[MetadataResponseTopic]
    cluster_authorized_operations: int


class LeaderAndIsrRequestPartitionState(TypedDict):
    topic_name: str
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]
    is_new: bool


class LeaderAndIsrRequestLiveLeader(TypedDict):
    id: int
    host: str
    port: int
    rack: str | None
    kafka_host: str | None
    kafka_port: int


class LeaderAndIsrRequestTopicId(TypedDict):
    topic_name: str
    topic_id: bytes


class LeaderAndIsrRequest(TypedDict):
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[LeaderAndIsrRequestPartitionState]
    live_leaders: list[LeaderAndIsrRequestLiveLeader]
    topic_ids: list[LeaderAndIsrRequestTopicId]


class LeaderAndIsrRequestBodyPartitionState(TypedDict, total=False):
    topic_name: Required[str]
    partition_index: Required[int]
    controller_epoch: Required[int]
    leader: Required[int]
    leader_epoch: Required[int]
    isr: Required[list[int]]
    zk_version: Required[int]
    replicas: Required[list[int]]
    adding_replicas: list[int]
    removing_replicas: list[int]
    is_new: bool


class LeaderAndIsrRequestBodyLiveLeader(TypedDict, total=False):
    id: Required[int]
    host: Required[str]
    port: Required[int]
    rack: str | None
    kafka_host: str | None
    kafka_port: int


class LeaderAndIsrRequestBodyTopicId(TypedDict, total=False):
    topic_name: Required[str]
    topic_id: Required[bytes]


class LeaderAndIsrRequestBody(TypedDict, total=False):
    controller_id: Required[int]
    controller_epoch: Required[int]
    broker_epoch: int
    partition_states: Required[list[LeaderAndIsrRequestBodyPartitionState]]
    live_leaders: list[LeaderAndIsrRequestBodyLiveLeader]
    topic_ids: list[LeaderAndIsrRequestBodyTopicId]


class LeaderAndIsrResponsePartitionError(TypedDict, total=False):
    topic_name: Required[str]
    partition_index: Required[int]
    error_code: int


class LeaderAndIsrResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    partition_errors: list[LeaderAndIsrResponsePartitionError]


class StopReplicaRequestPartitionState(TypedDict):
    topic_name: str
    partition_index: int
    leader_epoch: int
    delete_partition: bool


class StopReplicaRequest(TypedDict):
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[StopReplicaRequestPartitionState]


class StopReplicaRequestBodyPartitionState(TypedDict, total=False):
    topic_name: Required[str]
    partition_index: Required[int]
    leader_epoch: int
    delete_partition: bool


class StopReplicaRequestBody(TypedDict, total=False):
    controller_id: Required[int]
    controller_epoch: Required[int]
    broker_epoch: int
    partition_states: Required[list[StopReplicaRequestBodyPartitionState]]


class StopReplicaResponsePartitionError(TypedDict, total=False):
    topic_name: Required[str]
    partition_index: Required[int]
    error_code: int


class StopReplicaResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    partition_errors: list[StopReplicaResponsePartitionError]


class UpdateMetadataRequestPartitionState(TypedDict):
    topic_name: str
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    offline_replicas: list[int]


class UpdateMetadataRequestLiveBroker(TypedDict):
    id: int
    host: str
    port: int
    rack: str | None
    kafka_host: str | None
    kafka_port: int


class UpdateMetadataRequestTopicId(TypedDict):
    topic_name: str
    topic_id: bytes


class UpdateMetadataRequest(TypedDict):
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[UpdateMetadataRequestPartitionState]
    live_brokers: list[UpdateMetadataRequestLiveBroker]
    topic_ids: list[UpdateMetadataRequestTopicId]


class UpdateMetadataRequestBodyPartitionState(TypedDict, total=False):
    topic_name: Required[str]
    partition_index: Required[int]
    controller_epoch: Required[int]
    leader: Required[int]
    leader_epoch: Required[int]
    isr: Required[list[int]]
    zk_version: Required[int]
    replicas: Required[list[int]]
    offline_replicas: list[int]


class UpdateMetadataRequestBodyLiveBroker(TypedDict, total=False):
    id: Required[int]
    host: Required[str]
    port: Required[int]
    rack: str | None
    kafka_host: str | None
    kafka_port: int


class UpdateMetadataRequestBodyTopicId(TypedDict, total=False):
    topic_name: Required[str]
    topic_id: Required[bytes]


class UpdateMetadataRequestBody(TypedDict, total=False):
    controller_id: Required[int]
    controller_epoch: Required[int]
    broker_epoch: int
    partition_states: Required[list[UpdateMetadataRequestBodyPartitionState]]
    live_brokers: Required[list[UpdateMetadataRequestBodyLiveBroker]]
    topic_ids: list[UpdateMetadataRequestBodyTopicId]


class UpdateMetadataResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None


class ControlledShutdownRequest(TypedDict):
    broker_id: int
    broker_epoch: int


class ControlledShutdownRequestBody(TypedDict, total=False):
    broker_id: Required[int]
    broker_epoch: int


class ControlledShutdownResponseRemainingPartition(TypedDict, total=False):
    topic_name: Required[str]
    partition_index: Required[int]


class ControlledShutdownResponse(TypedDict, total=False):
    error_code: int
    remaining_partitions: list[ControlledShutdownResponseRemainingPartition]


class OffsetCommitRequestTopicPartition(TypedDict):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    committed_metadata: str | None


class OffsetCommitRequestTopic(TypedDict):
    name: str
    partitions: list[OffsetCommitRequestTopicPartition]


class OffsetCommitRequest(TypedDict):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    retention_time_ms: int
    topics: list[OffsetCommitRequestTopic]


class OffsetCommitRequestBodyTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    committed_offset: Required[int]
    committed_leader_epoch: int
    committed_metadata: str | None


class OffsetCommitRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[OffsetCommitRequestBodyTopicPartition]]


class OffsetCommitRequestBody(TypedDict, total=False):
    group_id: Required[str]
    generation_id: int
    member_id: str
    group_instance_id: str | None
    retention_time_ms: int
    topics: Required[list[OffsetCommitRequestBodyTopic]]


class OffsetCommitResponseTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    error_code: int


class OffsetCommitResponseTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[OffsetCommitResponseTopicPartition]]


class OffsetCommitResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: list[OffsetCommitResponseTopic]


class OffsetFetchRequestTopic(TypedDict):
    name: str
    partition_indexes: list[int]


class OffsetFetchRequestGroupTopic(TypedDict):
    name: str
    partition_indexes: list[int]


class OffsetFetchRequestGroup(TypedDict):
    group_id: str
    topics: list[OffsetFetchRequestGroupTopic] | None


class OffsetFetchRequest(TypedDict):
    group_id: str | None
    topics: list[OffsetFetchRequestTopic] | None
    groups: list[OffsetFetchRequestGroup] | None
    require_stable: bool


class OffsetFetchRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    partition_indexes: Required[list[int]]


class OffsetFetchRequestBodyGroupTopic(TypedDict, total=False):
    name: Required[str]
    partition_indexes: Required[list[int]]


class OffsetFetchRequestBodyGroup(TypedDict, total=False):
    group_id: Required[str]
    topics: list[OffsetFetchRequestBodyGroupTopic] | None


class OffsetFetchRequestBody(TypedDict, total=False):
    group_id: str | None
    topics: list[OffsetFetchRequestBodyTopic] | None
    groups: list[OffsetFetchRequestBodyGroup] | None
    require_stable: bool


class OffsetFetchResponseTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    committed_offset: Required[int]
    committed_leader_epoch: int
    metadata: str | None
    error_code: int


class OffsetFetchResponseTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[OffsetFetchResponseTopicPartition]]


class OffsetFetchResponseGroupTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    committed_offset: Required[int]
    committed_leader_epoch: int
    metadata: str | None
    error_code: int


class OffsetFetchResponseGroupTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[OffsetFetchResponseGroupTopicPartition]]


class OffsetFetchResponseGroup(TypedDict, total=False):
    group_id: Required[str]
    topics: Required[list[OffsetFetchResponseGroupTopic]]
    error_code: int


class OffsetFetchResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: list[OffsetFetchResponseTopic]
    error_code: int
    groups: list[OffsetFetchResponseGroup]


class FindCoordinatorRequest(TypedDict):
    key: str
    key_type: int
    coordinator_keys: list[str]


class FindCoordinatorRequestBody(TypedDict, total=False):
    key: str
    key_type: int
    coordinator_keys: list[str]


class FindCoordinatorResponseCoordinator(TypedDict, total=False):
    key: Required[str]
    node_id: Required[int]
    host: Required[str]
    port: Required[int]
    error_code: int
    error_message: str | None
    kafka_host: str | None
    kafka_port: int | None


class FindCoordinatorResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int
    coordinators: list[FindCoordinatorResponseCoordinator]


class JoinGroupRequestProtocol(TypedDict):
    name: str
    metadata: bytes


class JoinGroupRequest(TypedDict):
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[JoinGroupRequestProtocol]
    require_known_member_id: bool


class JoinGroupRequestBodyProtocol(TypedDict, total=False):
    name: Required[str]
    metadata: Required[bytes]


class JoinGroupRequestBody(TypedDict, total=False):
    group_id: Required[str]
    session_timeout_ms: Required[int]
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    protocol_type: Required[str]
    protocols: Required[list[JoinGroupRequestBodyProtocol]]
    require_known_member_id: bool


class JoinGroupResponseMember(TypedDict, total=False):
    member_id: Required[str]
    group_instance_id: str | None
    metadata: Required[bytes]


class JoinGroupResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    members: list[JoinGroupResponseMember]


class HeartbeatRequest(TypedDict):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


class HeartbeatRequestBody(TypedDict, total=False):
    group_id: Required[str]
    generation_id: Required[int]
    member_id: Required[str]
    group_instance_id: str | None


class HeartbeatResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int


class LeaveGroupRequestMember(TypedDict):
    member_id: str
    group_instance_id: str | None


class LeaveGroupRequest(TypedDict):
    group_id: str
    member_id: str
    members: list[LeaveGroupRequestMember]


class LeaveGroupRequestBodyMember(TypedDict, total=False):
    member_id: str
    group_instance_id: str | None


class LeaveGroupRequestBody(TypedDict, total=False):
    group_id: Required[str]
    member_id: str
    members: list[LeaveGroupRequestBodyMember]


class LeaveGroupResponseMember(TypedDict, total=False):
    member_id: Required[str]
    group_instance_id: str | None
    error_code: int


class LeaveGroupResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    members: list[LeaveGroupResponseMember]


class SyncGroupRequestAssignment(TypedDict):
    member_id: str
    assignment: bytes


class SyncGroupRequest(TypedDict):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: list[SyncGroupRequestAssignment]


class SyncGroupRequestBodyAssignment(TypedDict, total=False):
    member_id: Required[str]
    assignment: Required[bytes]


class SyncGroupRequestBody(TypedDict, total=False):
    group_id: Required[str]
    generation_id: Required[int]
    member_id: Required[str]
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: list[SyncGroupRequestBodyAssignment]


class SyncGroupResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes


class DescribeGroupsRequest(TypedDict):
    groups: list[str]
    include_authorized_operations: bool


class DescribeGroupsRequestBody(TypedDict, total=False):
    groups: Required[list[str]]
    include_authorized_operations: bool


class DescribeGroupsResponseGroupMember(TypedDict, total=False):
    member_id: Required[str]
    group_instance_id: str | None
    client_id: Required[str]
    client_host: Required[str]
    member_metadata: Required[bytes]
    member_assignment: Required[bytes]


class DescribeGroupsResponseGroup(TypedDict, total=False):
    error_code: int
    group_id: Required[str]
    group_state: Required[str]
    protocol_type: Required[str]
    protocol_data: Required[str]
    members: Required[list[DescribeGroupsResponseGroupMember]]
    authorized_operations: int


class DescribeGroupsResponse(TypedDict, total=False):
    throttle_time_ms: int
    groups: list[DescribeGroupsResponseGroup]


class ListGroupsRequest(TypedDict):
    states_filter: list[str]


class ListGroupsRequestBody(TypedDict, total=False):
    states_filter: list[str]


class ListGroupsResponseGroup(TypedDict, total=False):
    group_id: Required[str]
    protocol_type: Required[str]
    group_state: str


class ListGroupsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    groups: list[ListGroupsResponseGroup]


class SaslHandshakeRequest(TypedDict):
    mechanism: str


class SaslHandshakeRequestBody(TypedDict, total=False):
    mechanism: Required[str]


class SaslHandshakeResponse(TypedDict, total=False):
    error_code: int
    mechanisms: list[str]


class ApiVersionsRequest(TypedDict):
    client_software_name: str
    client_software_version: str


class ApiVersionsRequestBody(TypedDict, total=False):
    client_software_name: str
    client_software_version: str


class ApiVersionsResponseApiKey(TypedDict, total=False):
    api_key: Required[int]
    min_version: Required[int]
    max_version: Required[int]


class ApiVersionsResponseSupportedFeature(TypedDict, total=False):
    name: str
    min_version: int
    max_version: int


class ApiVersionsResponseFinalizedFeature(TypedDict, total=False):
    name: str
    max_version_level: int
    min_version_level: int


class ApiVersionsResponse(TypedDict, total=False):
    error_code: int
    api_keys: list[ApiVersionsResponseApiKey]
    throttle_time_ms: int
    supported_features: list[ApiVersionsResponseSupportedFeature]
    finalized_features_epoch: int
    finalized_features: list[ApiVersionsResponseFinalizedFeature]
    zk_migration_ready: bool


class CreateTopicsRequestTopicAssignment(TypedDict):
    partition_index: int
    broker_ids: list[int]


class CreateTopicsRequestTopicConfig(TypedDict):
    name: str
    value: str | None


class CreateTopicsRequestTopic(TypedDict):
    name: str
    num_partitions: int
    replication_factor: int
    assignments: list[CreateTopicsRequestTopicAssignment]
    configs: list[CreateTopicsRequestTopicConfig]


class CreateTopicsRequest(TypedDict):
    topics: list[CreateTopicsRequestTopic]
    timeout_ms: int
    validate_only: bool


class CreateTopicsRequestBodyTopicAssignment(TypedDict, total=False):
    partition_index: Required[int]
    broker_ids: Required[list[int]]


class CreateTopicsRequestBodyTopicConfig(TypedDict, total=False):
    name: Required[str]
    value: Required[str | None]


class CreateTopicsRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    num_partitions: int
    replication_factor: int
    assignments: list[CreateTopicsRequestBodyTopicAssignment]
    configs: list[CreateTopicsRequestBodyTopicConfig]


class CreateTopicsRequestBody(TypedDict, total=False):
    topics: Required[list[CreateTopicsRequestBodyTopic]]
    timeout_ms: int
    validate_only: bool


class CreateTopicsResponseTopicConfig(TypedDict, total=False):
    name: str
    value: str | None
    read_only: bool
    config_source: int
    is_sensitive: bool


class CreateTopicsResponseTopic(TypedDict, total=False):
    name: Required[str]
    topic_id: bytes
    error_code: int
    error_message: str | None
    topic_config_error_code: int
    num_partitions: int
    replication_factor: int
    configs: list[CreateTopicsResponseTopicConfig] | None


class CreateTopicsResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: list[CreateTopicsResponseTopic]


class DeleteTopicsRequestTopic(TypedDict):
    name: str | None
    topic_id: bytes


class DeleteTopicsRequest(TypedDict):
    topic_names: list[str]
    topics: list[DeleteTopicsRequestTopic]
    timeout_ms: int


class DeleteTopicsRequestBodyTopic(TypedDict, total=False):
    name: Required[str | None]
    topic_id: Required[bytes]


class DeleteTopicsRequestBody(TypedDict, total=False):
    topic_names: Required[list[str]]
    topics: list[DeleteTopicsRequestBodyTopic]
    timeout_ms: int


class DeleteTopicsResponseTopic(TypedDict, total=False):
    name: Required[str | None]
    topic_id: bytes
    error_code: int
    error_message: str | None


class DeleteTopicsResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: list[DeleteTopicsResponseTopic]


class DeleteRecordsRequestTopicPartition(TypedDict):
    partition_index: int
    offset: int


class DeleteRecordsRequestTopic(TypedDict):
    name: str
    partitions: list[DeleteRecordsRequestTopicPartition]


class DeleteRecordsRequest(TypedDict):
    topics: list[DeleteRecordsRequestTopic]
    timeout_ms: int


class DeleteRecordsRequestBodyTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    offset: Required[int]


class DeleteRecordsRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[DeleteRecordsRequestBodyTopicPartition]]


class DeleteRecordsRequestBody(TypedDict, total=False):
    topics: Required[list[DeleteRecordsRequestBodyTopic]]
    timeout_ms: int


class DeleteRecordsResponseTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    low_watermark: int
    error_code: int


class DeleteRecordsResponseTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[DeleteRecordsResponseTopicPartition]]


class DeleteRecordsResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: list[DeleteRecordsResponseTopic]


class InitProducerIdRequest(TypedDict):
    transactional_id: str | None
    transaction_timeout_ms: int
    producer_id: int
    producer_epoch: int


class InitProducerIdRequestBody(TypedDict, total=False):
    transactional_id: str | None
    transaction_timeout_ms: int
    producer_id: int
    producer_epoch: int


class InitProducerIdResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    producer_id: int
    producer_epoch: int


class OffsetForLeaderEpochRequestTopicPartition(TypedDict):
    partition: int
    current_leader_epoch: int
    leader_epoch: int


class OffsetForLeaderEpochRequestTopic(TypedDict):
    topic: str
    partitions: list[OffsetForLeaderEpochRequestTopicPartition]


class OffsetForLeaderEpochRequest(TypedDict):
    replica_id: int
    topics: list[OffsetForLeaderEpochRequestTopic]


class OffsetForLeaderEpochRequestBodyTopicPartition(TypedDict, total=False):
    partition: Required[int]
    current_leader_epoch: int
    leader_epoch: Required[int]


class OffsetForLeaderEpochRequestBodyTopic(TypedDict, total=False):
    topic: Required[str]
    partitions: Required[list[OffsetForLeaderEpochRequestBodyTopicPartition]]


class OffsetForLeaderEpochRequestBody(TypedDict, total=False):
    replica_id: int
    topics: Required[list[OffsetForLeaderEpochRequestBodyTopic]]


class OffsetForLeaderEpochResponseTopicPartition(TypedDict, total=False):
    error_code: int
    partition: Required[int]
    leader_epoch: int
    end_offset: int


class OffsetForLeaderEpochResponseTopic(TypedDict, total=False):
    topic: Required[str]
    partitions: Required[list[OffsetForLeaderEpochResponseTopicPartition]]


class OffsetForLeaderEpochResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: list[OffsetForLeaderEpochResponseTopic]


class AddPartitionsToTxnRequestTransactionTopic(TypedDict):
    name: str
    partitions: list[int]


class AddPartitionsToTxnRequestTransaction(TypedDict):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    verify_only: bool
    topics: list[AddPartitionsToTxnRequestTransactionTopic]


class AddPartitionsToTxnRequestTopic(TypedDict):
    name: str
    partitions: list[int]


class AddPartitionsToTxnRequest(TypedDict):
    transactions: list[AddPartitionsToTxnRequestTransaction]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: list[AddPartitionsToTxnRequestTopic]


class AddPartitionsToTxnRequestBodyTransactionTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[int]]


class AddPartitionsToTxnRequestBodyTransaction(TypedDict, total=False):
    transactional_id: Required[str]
    producer_id: Required[int]
    producer_epoch: Required[int]
    verify_only: bool
    topics: Required[list[AddPartitionsToTxnRequestBodyTransactionTopic]]


class AddPartitionsToTxnRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[int]]


class AddPartitionsToTxnRequestBody(TypedDict, total=False):
    transactions: list[AddPartitionsToTxnRequestBodyTransaction]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: list[AddPartitionsToTxnRequestBodyTopic]


class AddPartitionsToTxnResponseResultsByTransactionTopicResultResultsByPartition(
    TypedDict, total=False
):
    partition_index: Required[int]
    partition_error_code: int


class AddPartitionsToTxnResponseResultsByTransactionTopicResult(TypedDict, total=False):
    name: Required[str]
    results_by_partition: Required[
        list[AddPartitionsToTxnResponseResultsByTransactionTopicResultResultsByPartition]
    ]


class AddPartitionsToTxnResponseResultsByTransaction(TypedDict, total=False):
    transactional_id: Required[str]
    topic_results: Required[list[AddPartitionsToTxnResponseResultsByTransactionTopicResult]]


class AddPartitionsToTxnResponseResultResult(TypedDict, total=False):
    partition_index: Required[int]
    partition_error_code: int


class AddPartitionsToTxnResponseResult(TypedDict, total=False):
    name: Required[str]
    results: Required[list[AddPartitionsToTxnResponseResultResult]]


class AddPartitionsToTxnResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    results_by_transaction: list[AddPartitionsToTxnResponseResultsByTransaction]
    results: list[AddPartitionsToTxnResponseResult]


class AddOffsetsToTxnRequest(TypedDict):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


class AddOffsetsToTxnRequestBody(TypedDict, total=False):
    transactional_id: Required[str]
    producer_id: Required[int]
    producer_epoch: Required[int]
    group_id: Required[str]


class AddOffsetsToTxnResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int


class EndTxnRequest(TypedDict):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    transaction_version: int


class EndTxnRequestBody(TypedDict, total=False):
    transactional_id: Required[str]
    producer_id: Required[int]
    producer_epoch: Required[int]
    committed: Required[bool]
    transaction_version: int


class EndTxnResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    producer_id: int
    producer_epoch: int


class WriteTxnMarkersRequestMarkerTopic(TypedDict):
    name: str
    partition_indexes: list[int]


class WriteTxnMarkersRequestMarker(TypedDict):
    producer_id: int
    producer_epoch: int
    transaction_result: bool
    topics: list[WriteTxnMarkersRequestMarkerTopic]
    coordinator_epoch: int


class WriteTxnMarkersRequest(TypedDict):
    markers: list[WriteTxnMarkersRequestMarker]


class WriteTxnMarkersRequestBodyMarkerTopic(TypedDict, total=False):
    name: Required[str]
    partition_indexes: Required[list[int]]


class WriteTxnMarkersRequestBodyMarker(TypedDict, total=False):
    producer_id: Required[int]
    producer_epoch: Required[int]
    transaction_result: Required[bool]
    topics: Required[list[WriteTxnMarkersRequestBodyMarkerTopic]]
    coordinator_epoch: Required[int]


class WriteTxnMarkersRequestBody(TypedDict, total=False):
    markers: Required[list[WriteTxnMarkersRequestBodyMarker]]


class WriteTxnMarkersResponseMarkerTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    error_code: int


class WriteTxnMarkersResponseMarkerTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[WriteTxnMarkersResponseMarkerTopicPartition]]


class WriteTxnMarkersResponseMarker(TypedDict, total=False):
    producer_id: Required[int]
    topics: Required[list[WriteTxnMarkersResponseMarkerTopic]]


class WriteTxnMarkersResponse(TypedDict, total=False):
    markers: list[WriteTxnMarkersResponseMarker]


class TxnOffsetCommitRequestTopicPartition(TypedDict):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    committed_metadata: str | None


class TxnOffsetCommitRequestTopic(TypedDict):
    name: str
    partitions: list[TxnOffsetCommitRequestTopicPartition]


class TxnOffsetCommitRequest(TypedDict):
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    transaction_version: int
    topics: list[TxnOffsetCommitRequestTopic]


class TxnOffsetCommitRequestBodyTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    committed_offset: Required[int]
    committed_leader_epoch: int
    committed_metadata: str | None


class TxnOffsetCommitRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[TxnOffsetCommitRequestBodyTopicPartition]]


class TxnOffsetCommitRequestBody(TypedDict, total=False):
    transactional_id: Required[str]
    group_id: Required[str]
    producer_id: Required[int]
    producer_epoch: Required[int]
    generation_id: int
    member_id: str
    group_instance_id: str | None
    transaction_version: int
    topics: Required[list[TxnOffsetCommitRequestBodyTopic]]


class TxnOffsetCommitResponseTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    error_code: int


class TxnOffsetCommitResponseTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[TxnOffsetCommitResponseTopicPartition]]


class TxnOffsetCommitResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: list[TxnOffsetCommitResponseTopic]


class DescribeAclsRequest(TypedDict):
    resource_type_filter: int
    resource_name_filter: str | None
    pattern_type_filter: int
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int


class DescribeAclsRequestBody(TypedDict, total=False):
    resource_type_filter: Required[int]
    resource_name_filter: str | None
    pattern_type_filter: int
    principal_filter: str | None
    host_filter: str | None
    operation: Required[int]
    permission_type: Required[int]


class DescribeAclsResponseResourceAcl(TypedDict, total=False):
    principal: Required[str]
    host: Required[str]
    operation: Required[int]
    permission_type: Required[int]


class DescribeAclsResponseResource(TypedDict, total=False):
    resource_type: Required[int]
    resource_name: Required[str]
    pattern_type: int
    acls: Required[list[DescribeAclsResponseResourceAcl]]


class DescribeAclsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    resources: list[DescribeAclsResponseResource]


class CreateAclsRequestCreation(TypedDict):
    resource_type: int
    resource_name: str
    resource_pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


class CreateAclsRequest(TypedDict):
    creations: list[CreateAclsRequestCreation]


class CreateAclsRequestBodyCreation(TypedDict, total=False):
    resource_type: Required[int]
    resource_name: Required[str]
    resource_pattern_type: int
    principal: Required[str]
    host: Required[str]
    operation: Required[int]
    permission_type: Required[int]


class CreateAclsRequestBody(TypedDict, total=False):
    creations: Required[list[CreateAclsRequestBodyCreation]]


class CreateAclsResponseResult(TypedDict, total=False):
    error_code: int
    error_message: str | None


class CreateAclsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: list[CreateAclsResponseResult]


class DeleteAclsRequestFilter(TypedDict):
    resource_type_filter: int
    resource_name_filter: str | None
    pattern_type_filter: int
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int


class DeleteAclsRequest(TypedDict):
    filters: list[DeleteAclsRequestFilter]


class DeleteAclsRequestBodyFilter(TypedDict, total=False):
    resource_type_filter: Required[int]
    resource_name_filter: str | None
    pattern_type_filter: int
    principal_filter: str | None
    host_filter: str | None
    operation: Required[int]
    permission_type: Required[int]


class DeleteAclsRequestBody(TypedDict, total=False):
    filters: Required[list[DeleteAclsRequestBodyFilter]]


class DeleteAclsResponseFilterResultMatchingAcl(TypedDict, total=False):
    error_code: int
    error_message: str | None
    resource_type: Required[int]
    resource_name: Required[str]
    pattern_type: int
    principal: Required[str]
    host: Required[str]
    operation: Required[int]
    permission_type: Required[int]


class DeleteAclsResponseFilterResult(TypedDict, total=False):
    error_code: int
    error_message: str | None
    matching_acls: list[DeleteAclsResponseFilterResultMatchingAcl]


class DeleteAclsResponse(TypedDict, total=False):
    throttle_time_ms: int
    filter_results: list[DeleteAclsResponseFilterResult]


class DescribeConfigsRequestResource(TypedDict):
    resource_type: int
    resource_name: str
    configuration_keys: list[str] | None


class DescribeConfigsRequest(TypedDict):
    resources: list[DescribeConfigsRequestResource]
    include_synonyms: bool
    include_documentation: bool


class DescribeConfigsRequestBodyResource(TypedDict, total=False):
    resource_type: Required[int]
    resource_name: Required[str]
    configuration_keys: list[str] | None


class DescribeConfigsRequestBody(TypedDict, total=False):
    resources: Required[list[DescribeConfigsRequestBodyResource]]
    include_synonyms: bool
    include_documentation: bool


class DescribeConfigsResponseResultConfigSynonym(TypedDict, total=False):
    name: str
    value: str | None
    source: int


class DescribeConfigsResponseResultConfig(TypedDict, total=False):
    name: Required[str]
    value: Required[str | None]
    read_only: bool
    config_source: int
    is_sensitive: bool
    synonyms: list[DescribeConfigsResponseResultConfigSynonym]
    config_type: int
    documentation: str | None


class DescribeConfigsResponseResult(TypedDict, total=False):
    error_code: int
    error_message: str | None
    resource_type: Required[int]
    resource_name: Required[str]
    configs: list[DescribeConfigsResponseResultConfig]


class DescribeConfigsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: list[DescribeConfigsResponseResult]


class AlterConfigsRequestResourceConfig(TypedDict):
    name: str
    value: str | None


class AlterConfigsRequestResource(TypedDict):
    resource_type: int
    resource_name: str
    configs: list[AlterConfigsRequestResourceConfig]


class AlterConfigsRequest(TypedDict):
    resources: list[AlterConfigsRequestResource]
    validate_only: bool


class AlterConfigsRequestBodyResourceConfig(TypedDict, total=False):
    name: Required[str]
    value: Required[str | None]


class AlterConfigsRequestBodyResource(TypedDict, total=False):
    resource_type: Required[int]
    resource_name: Required[str]
    configs: Required[list[AlterConfigsRequestBodyResourceConfig]]


class AlterConfigsRequestBody(TypedDict, total=False):
    resources: Required[list[AlterConfigsRequestBodyResource]]
    validate_only: bool


class AlterConfigsResponseResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    resource_type: Required[int]
    resource_name: Required[str]


class AlterConfigsResponse(TypedDict, total=False):
    throttle_time_ms: int
    responses: list[AlterConfigsResponseResponse]


class AlterReplicaLogDirsRequestDirTopic(TypedDict):
    name: str
    partitions: list[int]


class AlterReplicaLogDirsRequestDir(TypedDict):
    path: str
    topics: list[AlterReplicaLogDirsRequestDirTopic]


class AlterReplicaLogDirsRequest(TypedDict):
    dirs: list[AlterReplicaLogDirsRequestDir]


class AlterReplicaLogDirsRequestBodyDirTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[int]]


class AlterReplicaLogDirsRequestBodyDir(TypedDict, total=False):
    path: Required[str]
    topics: Required[list[AlterReplicaLogDirsRequestBodyDirTopic]]


class AlterReplicaLogDirsRequestBody(TypedDict, total=False):
    dirs: Required[list[AlterReplicaLogDirsRequestBodyDir]]


class AlterReplicaLogDirsResponseResultPartition(TypedDict, total=False):
    partition_index: Required[int]
    error_code: int


class AlterReplicaLogDirsResponseResult(TypedDict, total=False):
    topic_name: Required[str]
    partitions: Required[list[AlterReplicaLogDirsResponseResultPartition]]


class AlterReplicaLogDirsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: list[AlterReplicaLogDirsResponseResult]


class DescribeLogDirsRequestTopic(TypedDict):
    topic: str
    partitions: list[int]


class DescribeLogDirsRequest(TypedDict):
    topics: list[DescribeLogDirsRequestTopic] | None


class DescribeLogDirsRequestBodyTopic(TypedDict, total=False):
    topic: Required[str]
    partitions: Required[list[int]]


class DescribeLogDirsRequestBody(TypedDict, total=False):
    topics: list[DescribeLogDirsRequestBodyTopic] | None


class DescribeLogDirsResponseResultTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    partition_size: int
    offset_lag: int
    is_future: bool
    dirty_ratio: float


class DescribeLogDirsResponseResultTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[DescribeLogDirsResponseResultTopicPartition]]


class DescribeLogDirsResponseResult(TypedDict, total=False):
    error_code: int
    log_dir: Required[str]
    topics: list[DescribeLogDirsResponseResultTopic]
    total_bytes: int
    usable_bytes: int


class DescribeLogDirsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    results: list[DescribeLogDirsResponseResult]


class SaslAuthenticateRequest(TypedDict):
    auth_bytes: bytes


class SaslAuthenticateRequestBody(TypedDict, total=False):
    auth_bytes: Required[bytes]


class SaslAuthenticateResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int


class CreatePartitionsRequestTopicAssignment(TypedDict):
    broker_ids: list[int]


class CreatePartitionsRequestTopic(TypedDict):
    name: str
    count: int
    assignments: list[CreatePartitionsRequestTopicAssignment] | None


class CreatePartitionsRequest(TypedDict):
    topics: list[CreatePartitionsRequestTopic]
    timeout_ms: int
    validate_only: bool


class CreatePartitionsRequestBodyTopicAssignment(TypedDict, total=False):
    broker_ids: Required[list[int]]


class CreatePartitionsRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    count: Required[int]
    assignments: list[CreatePartitionsRequestBodyTopicAssignment] | None


class CreatePartitionsRequestBody(TypedDict, total=False):
    topics: Required[list[CreatePartitionsRequestBodyTopic]]
    timeout_ms: int
    validate_only: bool


class CreatePartitionsResponseResult(TypedDict, total=False):
    name: Required[str]
    error_code: int
    error_message: str | None


class CreatePartitionsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: list[CreatePartitionsResponseResult]


class DeleteGroupsRequest(TypedDict):
    groups_names: list[str]


class DeleteGroupsRequestBody(TypedDict, total=False):
    groups_names: Required[list[str]]


class DeleteGroupsResponseResult(TypedDict, total=False):
    group_id: Required[str]
    error_code: int


class DeleteGroupsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: list[DeleteGroupsResponseResult]


class ElectLeadersRequestTopicPartition(TypedDict):
    topic: str
    partitions: list[int]


class ElectLeadersRequest(TypedDict):
    election_type: int
    topic_partitions: list[ElectLeadersRequestTopicPartition] | None
    timeout_ms: int


class ElectLeadersRequestBodyTopicPartition(TypedDict, total=False):
    topic: Required[str]
    partitions: Required[list[int]]


class ElectLeadersRequestBody(TypedDict, total=False):
    election_type: int
    topic_partitions: list[ElectLeadersRequestBodyTopicPartition] | None
    timeout_ms: int


class ElectLeadersResponseReplicaElectionResultPartitionResult(TypedDict, total=False):
    partition_id: Required[int]
    error_code: int
    error_message: str | None


class ElectLeadersResponseReplicaElectionResult(TypedDict, total=False):
    topic: Required[str]
    partition_result: Required[list[ElectLeadersResponseReplicaElectionResultPartitionResult]]


class ElectLeadersResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    replica_election_results: list[ElectLeadersResponseReplicaElectionResult]


class IncrementalAlterConfigsRequestResourceConfig(TypedDict):
    name: str
    config_operation: int
    value: str | None


class IncrementalAlterConfigsRequestResource(TypedDict):
    resource_type: int
    resource_name: str
    configs: list[IncrementalAlterConfigsRequestResourceConfig]


class IncrementalAlterConfigsRequest(TypedDict):
    resources: list[IncrementalAlterConfigsRequestResource]
    validate_only: bool


class IncrementalAlterConfigsRequestBodyResourceConfig(TypedDict, total=False):
    name: Required[str]
    config_operation: Required[int]
    value: Required[str | None]


class IncrementalAlterConfigsRequestBodyResource(TypedDict, total=False):
    resource_type: Required[int]
    resource_name: Required[str]
    configs: Required[list[IncrementalAlterConfigsRequestBodyResourceConfig]]


class IncrementalAlterConfigsRequestBody(TypedDict, total=False):
    resources: Required[list[IncrementalAlterConfigsRequestBodyResource]]
    validate_only: bool


class IncrementalAlterConfigsResponseResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    resource_type: Required[int]
    resource_name: Required[str]


class IncrementalAlterConfigsResponse(TypedDict, total=False):
    throttle_time_ms: int
    responses: list[IncrementalAlterConfigsResponseResponse]


class AlterPartitionReassignmentsRequestTopicPartition(TypedDict):
    partition_index: int
    replicas: list[int] | None


class AlterPartitionReassignmentsRequestTopic(TypedDict):
    name: str
    partitions: list[AlterPartitionReassignmentsRequestTopicPartition]


class AlterPartitionReassignmentsRequest(TypedDict):
    timeout_ms: int
    topics: list[AlterPartitionReassignmentsRequestTopic]


class AlterPartitionReassignmentsRequestBodyTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    replicas: Required[list[int] | None]


class AlterPartitionReassignmentsRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[AlterPartitionReassignmentsRequestBodyTopicPartition]]


class AlterPartitionReassignmentsRequestBody(TypedDict, total=False):
    timeout_ms: int
    topics: Required[list[AlterPartitionReassignmentsRequestBodyTopic]]


class AlterPartitionReassignmentsResponseTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    error_code: int
    error_message: str | None


class AlterPartitionReassignmentsResponseTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[AlterPartitionReassignmentsResponseTopicPartition]]


class AlterPartitionReassignmentsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    topics: list[AlterPartitionReassignmentsResponseTopic]


class ListPartitionReassignmentsRequestTopic(TypedDict):
    name: str
    partition_indexes: list[int]


class ListPartitionReassignmentsRequest(TypedDict):
    timeout_ms: int
    topics: list[ListPartitionReassignmentsRequestTopic] | None


class ListPartitionReassignmentsRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    partition_indexes: Required[list[int]]


class ListPartitionReassignmentsRequestBody(TypedDict, total=False):
    timeout_ms: int
    topics: list[ListPartitionReassignmentsRequestBodyTopic] | None


class ListPartitionReassignmentsResponseTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    replicas: Required[list[int]]
    adding_replicas: list[int]
    removing_replicas: list[int]


class ListPartitionReassignmentsResponseTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[ListPartitionReassignmentsResponseTopicPartition]]


class ListPartitionReassignmentsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    topics: list[ListPartitionReassignmentsResponseTopic]


class OffsetDeleteRequestTopicPartition(TypedDict):
    partition_index: int


class OffsetDeleteRequestTopic(TypedDict):
    name: str
    partitions: list[OffsetDeleteRequestTopicPartition]


class OffsetDeleteRequest(TypedDict):
    group_id: str
    topics: list[OffsetDeleteRequestTopic]


class OffsetDeleteRequestBodyTopicPartition(TypedDict, total=False):
    partition_index: Required[int]


class OffsetDeleteRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[OffsetDeleteRequestBodyTopicPartition]]


class OffsetDeleteRequestBody(TypedDict, total=False):
    group_id: Required[str]
    topics: Required[list[OffsetDeleteRequestBodyTopic]]


class OffsetDeleteResponseTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    error_code: int


class OffsetDeleteResponseTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[OffsetDeleteResponseTopicPartition]]


class OffsetDeleteResponse(TypedDict, total=False):
    error_code: int
    throttle_time_ms: int
    topics: list[OffsetDeleteResponseTopic]


class DescribeClientQuotasRequestComponent(TypedDict):
    entity_type: str
    match_type: int
    match: str | None


class DescribeClientQuotasRequest(TypedDict):
    components: list[DescribeClientQuotasRequestComponent]
    strict: bool


class DescribeClientQuotasRequestBodyComponent(TypedDict, total=False):
    entity_type: Required[str]
    match_type: Required[int]
    match: str | None


class DescribeClientQuotasRequestBody(TypedDict, total=False):
    components: Required[list[DescribeClientQuotasRequestBodyComponent]]
    strict: bool


class DescribeClientQuotasResponseEntryEntity(TypedDict, total=False):
    entity_type: Required[str]
    entity_name: str | None


class DescribeClientQuotasResponseEntryValue(TypedDict, total=False):
    key: str
    value: float


class DescribeClientQuotasResponseEntry(TypedDict, total=False):
    entity: list[DescribeClientQuotasResponseEntryEntity]
    values: list[DescribeClientQuotasResponseEntryValue]


class DescribeClientQuotasResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    entries: list[DescribeClientQuotasResponseEntry] | None


class AlterClientQuotasRequestEntryEntity(TypedDict):
    entity_type: str
    entity_name: str | None


class AlterClientQuotasRequestEntryOp(TypedDict):
    key: str
    value: float
    remove: bool


class AlterClientQuotasRequestEntry(TypedDict):
    entity: list[AlterClientQuotasRequestEntryEntity]
    ops: list[AlterClientQuotasRequestEntryOp]


class AlterClientQuotasRequest(TypedDict):
    entries: list[AlterClientQuotasRequestEntry]
    validate_only: bool


class AlterClientQuotasRequestBodyEntryEntity(TypedDict, total=False):
    entity_type: Required[str]
    entity_name: str | None


class AlterClientQuotasRequestBodyEntryOp(TypedDict, total=False):
    key: Required[str]
    value: float
    remove: bool


class AlterClientQuotasRequestBodyEntry(TypedDict, total=False):
    entity: Required[list[AlterClientQuotasRequestBodyEntryEntity]]
    ops: Required[list[AlterClientQuotasRequestBodyEntryOp]]


class AlterClientQuotasRequestBody(TypedDict, total=False):
    entries: Required[list[AlterClientQuotasRequestBodyEntry]]
    validate_only: bool


class AlterClientQuotasResponseEntryEntity(TypedDict, total=False):
    entity_type: Required[str]
    entity_name: str | None


class AlterClientQuotasResponseEntry(TypedDict, total=False):
    error_code: int
    error_message: str | None
    entity: list[AlterClientQuotasResponseEntryEntity]


class AlterClientQuotasResponse(TypedDict, total=False):
    throttle_time_ms: int
    entries: list[AlterClientQuotasResponseEntry]


class DescribeUserScramCredentialsRequestUser(TypedDict):
    name: str


class DescribeUserScramCredentialsRequest(TypedDict):
    users: list[DescribeUserScramCredentialsRequestUser] | None


class DescribeUserScramCredentialsRequestBodyUser(TypedDict, total=False):
    name: Required[str]


class DescribeUserScramCredentialsRequestBody(TypedDict, total=False):
    users: list[DescribeUserScramCredentialsRequestBodyUser] | None


class DescribeUserScramCredentialsResponseResultCredentialInfo(TypedDict, total=False):
    mechanism: int
    iterations: int


class DescribeUserScramCredentialsResponseResult(TypedDict, total=False):
    user: Required[str]
    error_code: int
    error_message: str | None
    credential_infos: list[DescribeUserScramCredentialsResponseResultCredentialInfo]


class DescribeUserScramCredentialsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    results: list[DescribeUserScramCredentialsResponseResult]


class AlterUserScramCredentialsRequestDeletion(TypedDict):
    name: str
    mechanism: int


class AlterUserScramCredentialsRequestUpsertion(TypedDict):
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


class AlterUserScramCredentialsRequest(TypedDict):
    deletions: list[AlterUserScramCredentialsRequestDeletion]
    upsertions: list[AlterUserScramCredentialsRequestUpsertion]


class AlterUserScramCredentialsRequestBodyDeletion(TypedDict, total=False):
    name: Required[str]
    mechanism: Required[int]


class AlterUserScramCredentialsRequestBodyUpsertion(TypedDict, total=False):
    name: Required[str]
    mechanism: Required[int]
    iterations: Required[int]
    salt: Required[bytes]
    salted_password: Required[bytes]


class AlterUserScramCredentialsRequestBody(TypedDict, total=False):
    deletions: list[AlterUserScramCredentialsRequestBodyDeletion]
    upsertions: list[AlterUserScramCredentialsRequestBodyUpsertion]


class AlterUserScramCredentialsResponseResult(TypedDict, total=False):
    user: Required[str]
    error_code: int
    error_message: str | None


class AlterUserScramCredentialsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: list[AlterUserScramCredentialsResponseResult]


class DescribeClusterRequest(TypedDict):
    include_cluster_authorized_operations: bool
    endpoint_type: int


class DescribeClusterRequestBody(TypedDict, total=False):
    include_cluster_authorized_operations: bool
    endpoint_type: int


class DescribeClusterResponseBroker(TypedDict, total=False):
    broker_id: Required[int]
    host: Required[str]
    port: Required[int]
    rack: str | None
    kafka_host: str | None
    kafka_port: int | None


class DescribeClusterResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    endpoint_type: int
    cluster_id: str
    controller_id: int
    brokers: list[DescribeClusterResponseBroker]
    cluster_authorized_operations: int


class DescribeProducersRequestTopic(TypedDict):
    name: str
    partition_indexes: list[int]


class DescribeProducersRequest(TypedDict):
    topics: list[DescribeProducersRequestTopic]


class DescribeProducersRequestBodyTopic(TypedDict, total=False):
    name: Required[str]
    partition_indexes: Required[list[int]]


class DescribeProducersRequestBody(TypedDict, total=False):
    topics: Required[list[DescribeProducersRequestBodyTopic]]


class DescribeProducersResponseTopicPartitionActiveProducer(TypedDict, total=False):
    producer_id: Required[int]
    producer_epoch: Required[int]
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class DescribeProducersResponseTopicPartition(TypedDict, total=False):
    partition_index: Required[int]
    error_code: int
    error_message: str | None
    active_producers: list[DescribeProducersResponseTopicPartitionActiveProducer]


class DescribeProducersResponseTopic(TypedDict, total=False):
    name: Required[str]
    partitions: Required[list[DescribeProducersResponseTopicPartition]]


class DescribeProducersResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: list[DescribeProducersResponseTopic]


class DescribeTransactionsRequest(TypedDict):
    transactional_ids: list[str]


class DescribeTransactionsRequestBody(TypedDict, total=False):
    transactional_ids: Required[list[str]]


class DescribeTransactionsResponseTransactionStateTopic(TypedDict, total=False):
    topic: Required[str]
    partitions: list[int]


class DescribeTransactionsResponseTransactionState(TypedDict, total=False):
    error_code: int
    transactional_id: Required[str]
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    topics: list[DescribeTransactionsResponseTransactionStateTopic]


class DescribeTransactionsResponse(TypedDict, total=False):
    throttle_time_ms: int
    transaction_states: list[DescribeTransactionsResponseTransactionState]


class ListTransactionsRequest(TypedDict):
    state_filters: list[str]
    producer_id_filters: list[int]
    duration_filter: int


class ListTransactionsRequestBody(TypedDict, total=False):
    state_filters: list[str]
    producer_id_filters: list[int]
    duration_filter: int


class ListTransactionsResponseTransactionState(TypedDict, total=False):
    transactional_id: Required[str]
    producer_id: int
    transaction_state: str


class ListTransactionsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    unknown_state_filters: list[str]
    transaction_states: list[ListTransactionsResponseTransactionState]


class BrokerChallengeRequest(TypedDict):
    pass


class BrokerChallengeRequestBody(TypedDict, total=False):
    pass


class BrokerChallengeResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    nonce: bytes
    broker_id: int


class BrokerProofRequest(TypedDict):
    broker_id: int
    signature: bytes


class BrokerProofRequestBody(TypedDict, total=False):
    broker_id: Required[int]
    signature: Required[bytes]


class BrokerProofResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None


PRODUCE: Final[Route[ProduceRequest, ProduceResponse]] = Route(0)
FETCH: Final[Route[FetchRequest, FetchResponse]] = Route(1)
LIST_OFFSETS: Final[Route[ListOffsetsRequest, ListOffsetsResponse]] = Route(2)
METADATA: Final[Route[MetadataRequest, MetadataResponse]] = Route(3)
LEADER_AND_ISR: Final[Route[LeaderAndIsrRequest, LeaderAndIsrResponse]] = Route(4)
STOP_REPLICA: Final[Route[StopReplicaRequest, StopReplicaResponse]] = Route(5)
UPDATE_METADATA: Final[Route[UpdateMetadataRequest, UpdateMetadataResponse]] = Route(6)
CONTROLLED_SHUTDOWN: Final[Route[ControlledShutdownRequest, ControlledShutdownResponse]] = Route(7)
OFFSET_COMMIT: Final[Route[OffsetCommitRequest, OffsetCommitResponse]] = Route(8)
OFFSET_FETCH: Final[Route[OffsetFetchRequest, OffsetFetchResponse]] = Route(9)
FIND_COORDINATOR: Final[Route[FindCoordinatorRequest, FindCoordinatorResponse]] = Route(10)
JOIN_GROUP: Final[Route[JoinGroupRequest, JoinGroupResponse]] = Route(11)
HEARTBEAT: Final[Route[HeartbeatRequest, HeartbeatResponse]] = Route(12)
LEAVE_GROUP: Final[Route[LeaveGroupRequest, LeaveGroupResponse]] = Route(13)
SYNC_GROUP: Final[Route[SyncGroupRequest, SyncGroupResponse]] = Route(14)
DESCRIBE_GROUPS: Final[Route[DescribeGroupsRequest, DescribeGroupsResponse]] = Route(15)
LIST_GROUPS: Final[Route[ListGroupsRequest, ListGroupsResponse]] = Route(16)
SASL_HANDSHAKE: Final[Route[SaslHandshakeRequest, SaslHandshakeResponse]] = Route(17)
API_VERSIONS: Final[Route[ApiVersionsRequest, ApiVersionsResponse]] = Route(18)
CREATE_TOPICS: Final[Route[CreateTopicsRequest, CreateTopicsResponse]] = Route(19)
DELETE_TOPICS: Final[Route[DeleteTopicsRequest, DeleteTopicsResponse]] = Route(20)
DELETE_RECORDS: Final[Route[DeleteRecordsRequest, DeleteRecordsResponse]] = Route(21)
INIT_PRODUCER_ID: Final[Route[InitProducerIdRequest, InitProducerIdResponse]] = Route(22)
OFFSET_FOR_LEADER_EPOCH: Final[Route[OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse]] = (
    Route(23)
)
ADD_PARTITIONS_TO_TXN: Final[Route[AddPartitionsToTxnRequest, AddPartitionsToTxnResponse]] = Route(
    24
)
ADD_OFFSETS_TO_TXN: Final[Route[AddOffsetsToTxnRequest, AddOffsetsToTxnResponse]] = Route(25)
END_TXN: Final[Route[EndTxnRequest, EndTxnResponse]] = Route(26)
WRITE_TXN_MARKERS: Final[Route[WriteTxnMarkersRequest, WriteTxnMarkersResponse]] = Route(27)
TXN_OFFSET_COMMIT: Final[Route[TxnOffsetCommitRequest, TxnOffsetCommitResponse]] = Route(28)
DESCRIBE_ACLS: Final[Route[DescribeAclsRequest, DescribeAclsResponse]] = Route(29)
CREATE_ACLS: Final[Route[CreateAclsRequest, CreateAclsResponse]] = Route(30)
DELETE_ACLS: Final[Route[DeleteAclsRequest, DeleteAclsResponse]] = Route(31)
DESCRIBE_CONFIGS: Final[Route[DescribeConfigsRequest, DescribeConfigsResponse]] = Route(32)
ALTER_CONFIGS: Final[Route[AlterConfigsRequest, AlterConfigsResponse]] = Route(33)
ALTER_REPLICA_LOG_DIRS: Final[Route[AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse]] = (
    Route(34)
)
DESCRIBE_LOG_DIRS: Final[Route[DescribeLogDirsRequest, DescribeLogDirsResponse]] = Route(35)
SASL_AUTHENTICATE: Final[Route[SaslAuthenticateRequest, SaslAuthenticateResponse]] = Route(36)
CREATE_PARTITIONS: Final[Route[CreatePartitionsRequest, CreatePartitionsResponse]] = Route(37)
DELETE_GROUPS: Final[Route[DeleteGroupsRequest, DeleteGroupsResponse]] = Route(42)
ELECT_LEADERS: Final[Route[ElectLeadersRequest, ElectLeadersResponse]] = Route(43)
INCREMENTAL_ALTER_CONFIGS: Final[
    Route[IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse]
] = Route(44)
ALTER_PARTITION_REASSIGNMENTS: Final[
    Route[AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse]
] = Route(45)
LIST_PARTITION_REASSIGNMENTS: Final[
    Route[ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse]
] = Route(46)
OFFSET_DELETE: Final[Route[OffsetDeleteRequest, OffsetDeleteResponse]] = Route(47)
DESCRIBE_CLIENT_QUOTAS: Final[Route[DescribeClientQuotasRequest, DescribeClientQuotasResponse]] = (
    Route(48)
)
ALTER_CLIENT_QUOTAS: Final[Route[AlterClientQuotasRequest, AlterClientQuotasResponse]] = Route(49)
DESCRIBE_USER_SCRAM_CREDENTIALS: Final[
    Route[DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse]
] = Route(50)
ALTER_USER_SCRAM_CREDENTIALS: Final[
    Route[AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse]
] = Route(51)
DESCRIBE_CLUSTER: Final[Route[DescribeClusterRequest, DescribeClusterResponse]] = Route(60)
DESCRIBE_PRODUCERS: Final[Route[DescribeProducersRequest, DescribeProducersResponse]] = Route(61)
DESCRIBE_TRANSACTIONS: Final[Route[DescribeTransactionsRequest, DescribeTransactionsResponse]] = (
    Route(65)
)
LIST_TRANSACTIONS: Final[Route[ListTransactionsRequest, ListTransactionsResponse]] = Route(66)
BROKER_CHALLENGE: Final[Route[BrokerChallengeRequest, BrokerChallengeResponse]] = Route(1000)
BROKER_PROOF: Final[Route[BrokerProofRequest, BrokerProofResponse]] = Route(1001)
