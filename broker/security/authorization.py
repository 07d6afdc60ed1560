"""Which operation on which resource each API needs: one table, applied by the dispatcher.

How this works. ``RULES`` maps an API key to a rule. The dispatcher (broker/
dispatcher.py) hands every request to ``RequestAuthorization.run`` instead of calling
the handler itself; the rule of its API key asks the ``AclAuthorizer`` about the
request's session (``header.session``: principal and client host) and then either

- refuses the request as a whole by raising the error (the dispatcher answers it as any
  handler's error, and the handler never runs, so nothing changes): CLUSTER_... for
  cluster operations, GROUP_... for a group; or
- passes the handler a copy of the body without the topics (groups, config resources)
  the principal may not touch, and adds those back to the handler's answer with
  TOPIC_AUTHORIZATION_FAILED (GROUP_..., CLUSTER_...) where Kafka answers per item; or
- passes the request unchanged.

So handlers contain no authorization code at all, and a handler added later needs one
line here (the test of this table fails for an API key that has none; until it has
one, only principals with ClusterAction may call it). The operations
are Kafka's (KafkaApis): Produce WRITE on each topic, Fetch READ (a follower's Fetch
CLUSTER_ACTION), Metadata DESCRIBE - topics the principal may not describe are left out
of an all-topics answer and refused when named; auto-creation needs CREATE -, the
controller's requests CLUSTER_ACTION, the admin APIs ALTER / DESCRIBE on the cluster or
the named operation on the named topic, group APIs READ / DESCRIBE / DELETE on the
group.

Without ``authorizer.class.name`` no ``RequestAuthorization`` is installed and the
dispatcher calls handlers directly: authorization costs nothing when it is off.

The parts: the asking session and the building blocks of rules
(broker/security/authorization_rules.py), the rules of the broker's own APIs
(broker/security/authorization_broker_rules.py), of the group coordinator's
(broker/security/authorization_group_rules.py) and of transactions
(broker/security/authorization_txn_rules.py); this module holds the table and runs it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from minibroker.broker.requests.dispatcher import Deferred, Handler, HandlerResult
from minibroker.broker.security.authorization_broker_rules import (
    configs,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    fetch,
    metadata,
    offset_for_leader_epoch,
)
from minibroker.broker.security.authorization_group_rules import (
    describe_groups,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
)
from minibroker.broker.security.authorization_rules import (
    Asker,
    AuthorizationContext,
    Rule,
    no_check,
    on_cluster,
    on_group,
    per_group,
    per_topic,
)
from minibroker.broker.security.authorization_txn_rules import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_producers,
    describe_transactions,
    end_txn,
    find_coordinator,
    init_producer_id,
    list_transactions,
    produce,
    txn_offset_commit,
)
from minibroker.protocol.acls import Operation
from minibroker.protocol.api import ApiKey, Body, RequestHeader


class RequestAuthorization:
    """Runs a request's handler under its API key's rule (the module docstring); the
    rules read the authorizer and the broker's view through ``context``."""

    def __init__(self, context: AuthorizationContext) -> None:
        self.context = context

    def run(self, header: RequestHeader, body: Body, handler: Handler) -> HandlerResult:
        rule = RULES.get(header.api_key, UNLISTED)
        allowed, complete = rule(Asker(self.context, header), body)
        result = handler(header, allowed)
        if complete is None:
            return result
        if isinstance(result, Deferred):
            waiting = result

            async def completed() -> Body | None:
                answer = await waiting.wait()
                return None if answer is None else complete(answer)

            return Deferred(completed)
        return None if result is None else complete(result)


# -- the table ---------------------------------------------------------------------------------

UNLISTED_RULE: Final = on_cluster(Operation.CLUSTER_ACTION)

RULES: Final[dict[int, Rule]] = {
    ApiKey.PRODUCE: produce,  # and WRITE on its transactional id
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: per_topic(Operation.DESCRIBE),
    ApiKey.METADATA: metadata,
    ApiKey.LEADER_AND_ISR: on_cluster(Operation.CLUSTER_ACTION),
    ApiKey.STOP_REPLICA: on_cluster(Operation.CLUSTER_ACTION),
    ApiKey.UPDATE_METADATA: on_cluster(Operation.CLUSTER_ACTION),
    ApiKey.CONTROLLED_SHUTDOWN: on_cluster(Operation.CLUSTER_ACTION),
    ApiKey.API_VERSIONS: no_check,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.CREATE_PARTITIONS: create_partitions,
    ApiKey.DELETE_RECORDS: per_topic(Operation.DELETE, extra={"low_watermark": -1}),
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    ApiKey.DESCRIBE_ACLS: on_cluster(Operation.DESCRIBE),
    ApiKey.CREATE_ACLS: on_cluster(Operation.ALTER),
    ApiKey.DELETE_ACLS: on_cluster(Operation.ALTER),
    ApiKey.DESCRIBE_CONFIGS: configs(Operation.DESCRIBE_CONFIGS, "results"),
    ApiKey.ALTER_CONFIGS: configs(Operation.ALTER_CONFIGS, "responses"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: configs(Operation.ALTER_CONFIGS, "responses"),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: on_cluster(Operation.DESCRIBE),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: on_cluster(Operation.DESCRIBE_CONFIGS),
    ApiKey.ALTER_CLIENT_QUOTAS: on_cluster(Operation.ALTER_CONFIGS),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: on_cluster(Operation.ALTER),
    ApiKey.ALTER_REPLICA_LOG_DIRS: on_cluster(Operation.ALTER),
    ApiKey.DESCRIBE_LOG_DIRS: on_cluster(Operation.DESCRIBE),
    ApiKey.ELECT_LEADERS: on_cluster(Operation.ALTER),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: on_cluster(Operation.ALTER),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: on_cluster(Operation.DESCRIBE),
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
    # A broker's identity proof: brokers only, as the controller's requests.
    ApiKey.BROKER_CHALLENGE: on_cluster(Operation.CLUSTER_ACTION),
    ApiKey.BROKER_PROOF: on_cluster(Operation.CLUSTER_ACTION),
    # Transactions: WRITE / DESCRIBE on the TransactionalId (authorization_txn_rules.py).
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
    ApiKey.END_TXN: end_txn,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit,
    ApiKey.WRITE_TXN_MARKERS: on_cluster(Operation.CLUSTER_ACTION),
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions,
    ApiKey.LIST_TRANSACTIONS: list_transactions,
    ApiKey.DESCRIBE_PRODUCERS: describe_producers,
    # SASL: authentication comes before any authorization.
    17: no_check,  # SaslHandshake
    36: no_check,  # SaslAuthenticate
    # Group coordinator APIs, by Kafka's key numbers and field names.
    8: offset_commit,  # OffsetCommit
    9: offset_fetch,  # OffsetFetch
    10: find_coordinator,  # FindCoordinator (groups', transactional ids')
    11: on_group(Operation.READ),  # JoinGroup
    12: on_group(Operation.READ),  # Heartbeat
    13: on_group(Operation.READ),  # LeaveGroup
    14: on_group(Operation.READ),  # SyncGroup
    15: describe_groups,  # DescribeGroups
    16: list_groups,  # ListGroups
    42: per_group(Operation.DELETE, "groups_names", "results"),  # DeleteGroups
    47: offset_delete,  # OffsetDelete
}
"""API key -> rule. Keys by number where another package declares the API."""

UNLISTED: Final = UNLISTED_RULE
"""The rule of an API missing from the table: brokers and super users only (closed by
default; the table's unit test names the missing key)."""


def rules_missing(api_keys: Iterable[int]) -> list[int]:
    """The API keys among ``api_keys`` that have no rule (the table's test uses it)."""
    return sorted(int(k) for k in api_keys if int(k) not in RULES)
