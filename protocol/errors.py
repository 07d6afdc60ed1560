"""Errors: Kafka's wire error codes, and our own exceptions for local misuse.

Wire errors are one class per Kafka error code, with Kafka's number and name
(org.apache.kafka.common.protocol.Errors) and whether a client may retry. They are
raised inside the broker and client and turned into (or from) a response's
``error_code`` at exactly one place each: ``error_for_code`` (the client's
``client.errors.wire_error`` builds on it).

Local misuse (a bad config value, a CLI mistake, a file that is not ours) raises
``MinibrokerError`` subclasses; those never travel on the wire.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

NONE = 0
"""The error code of success."""


class MinibrokerError(Exception):
    """Base class of local errors: bad configuration, bad arguments, bad files."""


class UsageError(MinibrokerError, ValueError):
    """Command-line arguments that make no sense together, which argparse cannot check:
    one line for the user and exit code 2 (the ``minibroker`` commands, the analytics
    job). A ValueError too, as bad arguments are."""


class ConfigError(MinibrokerError):
    """A configuration key is unknown or its value is invalid (the message names it)."""


class KafkaError(Exception):
    """Base class of errors that travel on the wire as a Kafka error code.

    The base class itself is UNKNOWN_SERVER_ERROR (-1): what a broker answers when a
    request fails in a way no specific code describes.
    """

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.name)
        self.message = message or self.name


class OffsetOutOfRangeError(KafkaError):
    code = 1
    name = "OFFSET_OUT_OF_RANGE"


class CorruptMessageError(KafkaError):
    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True


class UnknownTopicOrPartitionError(KafkaError):
    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True


class InvalidFetchSizeError(KafkaError):
    code = 4
    name = "INVALID_FETCH_SIZE"


class LeaderNotAvailableError(KafkaError):
    code = 5
    name = "LEADER_NOT_AVAILABLE"
    retriable = True


class NotLeaderOrFollowerError(KafkaError):
    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True


class RequestTimedOutError(KafkaError):
    code = 7
    name = "REQUEST_TIMED_OUT"
    retriable = True


class BrokerNotAvailableError(KafkaError):
    code = 8
    name = "BROKER_NOT_AVAILABLE"


class ReplicaNotAvailableError(KafkaError):
    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    retriable = True


class MessageTooLargeError(KafkaError):
    code = 10
    name = "MESSAGE_TOO_LARGE"


class StaleControllerEpochError(KafkaError):
    code = 11
    name = "STALE_CONTROLLER_EPOCH"


class NetworkError(KafkaError):
    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True


class CoordinatorNotAvailableError(KafkaError):
    """InitProducerId could not allocate a producer id now (ZooKeeper unreachable), or
    a group's coordinator partition has no leader (or ``__consumer_offsets`` is being
    created)."""

    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True


class InvalidTopicError(KafkaError):
    code = 17
    name = "INVALID_TOPIC_EXCEPTION"


class RecordListTooLargeError(KafkaError):
    code = 18
    name = "RECORD_LIST_TOO_LARGE"


class NotEnoughReplicasError(KafkaError):
    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    retriable = True


class NotEnoughReplicasAfterAppendError(KafkaError):
    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True


class InvalidRequiredAcksError(KafkaError):
    code = 21
    name = "INVALID_REQUIRED_ACKS"


class InvalidTimestampError(KafkaError):
    code = 32
    name = "INVALID_TIMESTAMP"


class UnsupportedVersionError(KafkaError):
    code = 35
    name = "UNSUPPORTED_VERSION"


class TopicAlreadyExistsError(KafkaError):
    code = 36
    name = "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(KafkaError):
    code = 37
    name = "INVALID_PARTITIONS"


class InvalidReplicationFactorError(KafkaError):
    code = 38
    name = "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(KafkaError):
    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(KafkaError):
    code = 40
    name = "INVALID_CONFIG"


class NotControllerError(KafkaError):
    code = 41
    name = "NOT_CONTROLLER"
    retriable = True


class InvalidRequestError(KafkaError):
    code = 42
    name = "INVALID_REQUEST"


class PolicyViolationError(KafkaError):
    """The request breaks a topic's policy (DeleteRecords on a compacted-only topic)."""

    code = 44
    name = "POLICY_VIOLATION"


class OutOfOrderSequenceNumberError(KafkaError):
    """The broker received a producer sequence number that does not follow its last."""

    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceNumberError(KafkaError):
    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(KafkaError):
    """A produce carries an epoch older than the one the partition last saw."""

    code = 47
    name = "INVALID_PRODUCER_EPOCH"


class KafkaStorageError(KafkaError):
    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True


class LogDirNotFoundError(KafkaError):
    code = 57
    name = "LOG_DIR_NOT_FOUND"


class UnknownProducerIdError(KafkaError):
    """The partition has no state for the producer (expired) and the sequence is not 0."""

    code = 59
    name = "UNKNOWN_PRODUCER_ID"


class ReassignmentInProgressError(KafkaError):
    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"


class TopicDeletionDisabledError(KafkaError):
    code = 73
    name = "TOPIC_DELETION_DISABLED"


class FencedLeaderEpochError(KafkaError):
    code = 74
    name = "FENCED_LEADER_EPOCH"
    retriable = True


class UnknownLeaderEpochError(KafkaError):
    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    retriable = True


class TopicAuthorizationFailedError(KafkaError):
    """The principal may not do the operation on the topic (ACLs)."""

    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(KafkaError):
    """The principal may not do the operation on the group (ACLs)."""

    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"


class SecurityDisabledError(KafkaError):
    """An ACL request to a broker without an authorizer."""

    code = 54
    name = "SECURITY_DISABLED"


class TransactionalIdAuthorizationFailedError(KafkaError):
    """The principal may not use the transactional id (WRITE or DESCRIBE on its
    TransactionalId resource, ACLs)."""

    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class ClusterAuthorizationFailedError(KafkaError):
    """A cluster action (a controller request) where it is not allowed."""

    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"


class StaleBrokerEpochError(KafkaError):
    """A controller request addressed to an earlier registration of this broker."""

    code = 77
    name = "STALE_BROKER_EPOCH"


class PreferredLeaderNotAvailableError(KafkaError):
    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True


class EligibleLeadersNotAvailableError(KafkaError):
    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True


class ElectionNotNeededError(KafkaError):
    code = 84
    name = "ELECTION_NOT_NEEDED"


class NoReassignmentInProgressError(KafkaError):
    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"


class InvalidRecordError(KafkaError):
    code = 87
    name = "INVALID_RECORD"

    def __init__(self, message: str = "", record_errors: Sequence[tuple[int, str]] = ()) -> None:
        """``record_errors``: (index in its batch, why) of each record at fault, which
        Produce v8+ answers (KIP-467) so a client fails only those and retries the rest."""
        super().__init__(message)
        self.record_errors = tuple(record_errors)


class ProducerFencedError(KafkaError):
    """A newer producer with the same id took over (InitProducerId with an old epoch)."""

    code = 90
    name = "PRODUCER_FENCED"


# -- the transaction coordinator's errors (transaction/) ------------------------------------


class InvalidTxnStateError(KafkaError):
    """The request does not fit the transaction's state (e.g. EndTxn with none open)."""

    code = 48
    name = "INVALID_TXN_STATE"


class TransactionAbortableError(KafkaError):
    """The transaction cannot go on but the producer can abort it and continue (KIP-890,
    KIP-1050): a write to a partition its ongoing transaction does not hold. Answered to
    clients whose request version knows it (Produce v11+, TxnOffsetCommit v4+); older
    ones get INVALID_TXN_STATE for the same case."""

    code = 120
    name = "TRANSACTION_ABORTABLE"


class InvalidProducerIdMappingError(KafkaError):
    """The producer id is not the one the coordinator gave this transactional id."""

    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(KafkaError):
    """The transaction timeout is above ``transaction.max.timeout.ms`` (or not positive)."""

    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(KafkaError):
    """The previous transaction is still being completed: retry shortly."""

    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    retriable = True


class TransactionCoordinatorFencedError(KafkaError):
    """A marker from a coordinator older than one this partition heard from."""

    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"


class OperationNotAttemptedError(KafkaError):
    """Another item of the same request failed, so this one was not tried."""

    code = 55
    name = "OPERATION_NOT_ATTEMPTED"


class TransactionalIdNotFoundError(KafkaError):
    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"


# -- the group coordinator's errors (coordinator/) -------------------------------------------


class OffsetMetadataTooLargeError(KafkaError):
    """A commit's metadata string is longer than ``offset.metadata.max.bytes``."""

    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"


class CoordinatorLoadInProgressError(KafkaError):
    """This broker just became the group's coordinator and is still reading its
    ``__consumer_offsets`` partition."""

    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True


class NotCoordinatorError(KafkaError):
    """This broker does not lead the group's ``__consumer_offsets`` partition (any more)."""

    code = 16
    name = "NOT_COORDINATOR"
    retriable = True


class IllegalGenerationError(KafkaError):
    """The request names a group generation that is not the current one."""

    code = 22
    name = "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(KafkaError):
    """The member's protocol type or protocols share nothing with the group's."""

    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(KafkaError):
    code = 24
    name = "INVALID_GROUP_ID"


class UnknownMemberIdError(KafkaError):
    """The member id is not (or no longer) a member of the group: rejoin with ""."""

    code = 25
    name = "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(KafkaError):
    """The session timeout is outside group.min/max.session.timeout.ms."""

    code = 26
    name = "INVALID_SESSION_TIMEOUT"


class RebalanceInProgressError(KafkaError):
    """The group is rebalancing: the member must rejoin."""

    code = 27
    name = "REBALANCE_IN_PROGRESS"


class InvalidCommitOffsetSizeError(KafkaError):
    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"


class NonEmptyGroupError(KafkaError):
    """DeleteGroups of a group that still has members."""

    code = 68
    name = "NON_EMPTY_GROUP"


class GroupIdNotFoundError(KafkaError):
    code = 69
    name = "GROUP_ID_NOT_FOUND"


class MemberIdRequiredError(KafkaError):
    """The first JoinGroup of a dynamic member: the answer carries the member id to
    join with (so a client that dies mid-join leaves no member behind)."""

    code = 79
    name = "MEMBER_ID_REQUIRED"


class GroupMaxSizeReachedError(KafkaError):
    code = 81
    name = "GROUP_MAX_SIZE_REACHED"


class FencedInstanceIdError(KafkaError):
    """A newer member took over this static member's ``group.instance.id``."""

    code = 82
    name = "FENCED_INSTANCE_ID"


class GroupSubscribedToTopicError(KafkaError):
    """OffsetDelete of a topic a member of the group still consumes."""

    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"


class UnstableOffsetCommitError(KafkaError):
    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True


class ResourceNotFoundError(KafkaError):
    """The admin request names something that does not exist (a SCRAM credential)."""

    code = 91
    name = "RESOURCE_NOT_FOUND"


class DuplicateResourceError(KafkaError):
    """The admin request names one thing twice (a user and mechanism)."""

    code = 92
    name = "DUPLICATE_RESOURCE"


class UnacceptableCredentialError(KafkaError):
    """A SCRAM credential the broker will not store (empty user, iterations out of range)."""

    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"


class UnknownTopicIdError(KafkaError):
    """No topic has the id a request named (KIP-516): deleted, or not yet known here."""

    code = 100
    name = "UNKNOWN_TOPIC_ID"
    retriable = True


class UnsupportedSaslMechanismError(KafkaError):
    """SaslHandshake named a mechanism the listener does not enable."""

    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslStateError(KafkaError):
    """A request out of order for the connection's SASL exchange (any request before
    authentication, a second handshake)."""

    code = 34
    name = "ILLEGAL_SASL_STATE"


class SaslAuthenticationFailedError(KafkaError):
    """Wrong credentials or a broken SASL exchange (never says which)."""

    code = 58
    name = "SASL_AUTHENTICATION_FAILED"


_BY_CODE: dict[int, type[KafkaError]] = {cls.code: cls for cls in KafkaError.__subclasses__()}
_BY_CODE[KafkaError.code] = KafkaError


def error_for_code(code: int) -> type[KafkaError]:
    """The error class for a wire code; unknown codes map to the generic KafkaError."""
    return _BY_CODE.get(code, KafkaError)
