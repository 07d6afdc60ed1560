"""Admin APIs that need a login, through other people's admin clients, against `dev up
--secure` (SASL_SSL, SCRAM-SHA-512, ACLs on) logged in as its admin: confluent-kafka's
create_acls / describe_acls / delete_acls with every pattern type a filter has
(LITERAL, PREFIXED, MATCH, ANY), kafka-python's ACL calls; confluent-kafka's
alter_user_scram_credentials / describe_user_scram_credentials, after which the new user
logs in at once, and deleting it locks it out."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    KafkaAdminClient,
    ResourcePattern,
)
from kafka.admin import ResourceType as KafkaPythonResourceType

from tests.judges.conftest import judged_cluster
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

CONFLUENT = f"confluent-kafka {__import__('confluent_kafka').version()[0]}"
KAFKA_PYTHON = f"kafka-python {__import__('kafka').__version__}"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from judged_cluster(tmp_path_factory, "admin-secure", secure=True)


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.kafka_bootstrap, **cluster.client_properties})


def kafka_python_admin(cluster: LocalCluster) -> KafkaAdminClient:
    props = cluster.client_properties
    return KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap,
        security_protocol=props["security.protocol"],
        sasl_mechanism=props["sasl.mechanism"],
        sasl_plain_username=props["sasl.username"],
        sasl_plain_password=props["sasl.password"],
        ssl_cafile=props["ssl.ca.location"],
    )


def binding(
    name: str, pattern: ResourcePatternType, principal: str, op: AclOperation
) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, name, pattern, principal, "*", op, AclPermissionType.ALLOW
    )


def acl_filter(name: str | None, pattern: ResourcePatternType) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.TOPIC, name, pattern, None, None, AclOperation.ANY, AclPermissionType.ANY
    )


def keys(bindings: list[AclBinding]) -> set[tuple[str, str, str]]:
    return {(b.name, b.resource_pattern_type.name, b.principal) for b in bindings}


@pytest.mark.judge(
    CONFLUENT, "create_acls, describe_acls (LITERAL, PREFIXED, MATCH, ANY), delete_acls"
)
def test_confluent_kafka_creates_describes_and_deletes_acls(secure: LocalCluster) -> None:
    client = admin(secure)
    prefixed = binding("judged-acl-", ResourcePatternType.PREFIXED, "User:alice", AclOperation.READ)
    literal = binding("judged-acl-x", ResourcePatternType.LITERAL, "User:bob", AclOperation.WRITE)
    for future in client.create_acls([prefixed, literal], request_timeout=30).values():
        future.result()

    def described(name: str | None, pattern: ResourcePatternType) -> set[tuple[str, str, str]]:
        return keys(client.describe_acls(acl_filter(name, pattern), request_timeout=30).result())

    both = {("judged-acl-", "PREFIXED", "User:alice"), ("judged-acl-x", "LITERAL", "User:bob")}
    assert described("judged-acl-x", ResourcePatternType.MATCH) == both
    assert described("judged-acl-x", ResourcePatternType.ANY) == {
        ("judged-acl-x", "LITERAL", "User:bob")
    }
    assert described("judged-acl-", ResourcePatternType.PREFIXED) == {
        ("judged-acl-", "PREFIXED", "User:alice")
    }
    assert described("judged-acl-y", ResourcePatternType.LITERAL) == set()

    [removed] = client.delete_acls(
        [acl_filter("judged-acl-x", ResourcePatternType.MATCH)], request_timeout=30
    ).values()
    assert keys(removed.result()) == both
    assert described(None, ResourcePatternType.ANY) & both == set()


@pytest.mark.judge(KAFKA_PYTHON, "KafkaAdminClient create_acls, describe_acls, delete_acls")
def test_kafka_python_creates_describes_and_deletes_an_acl(secure: LocalCluster) -> None:
    client = kafka_python_admin(secure)
    pattern = ResourcePattern(KafkaPythonResourceType.TOPIC, "judged-kp-acl")
    acl = ACL("User:carol", "*", ACLOperation.READ, ACLPermissionType.ALLOW, pattern)
    any_filter = ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY, pattern)
    try:
        created = client.create_acls([acl])
        assert created["failed"] == [], created
        found, error = client.describe_acls(any_filter)
        assert error.errno == 0 and [a.principal for a in found] == ["User:carol"]
        [(_, matched, error)] = client.delete_acls([any_filter])
        assert error.errno == 0 and [a.principal for a in matched] == ["User:carol"]
        found, _ = client.describe_acls(any_filter)
        assert found == []
    finally:
        client.close()


def logs_in(cluster: LocalCluster, user: str, password: str) -> bool:
    """Whether ``user`` can log in (a metadata request over its own SASL session)."""
    login = {**cluster.client_properties, "sasl.username": user, "sasl.password": password}
    client = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap, **login})
    try:
        client.list_topics(timeout=5)
    except KafkaException:
        return False
    return True


@pytest.mark.judge(CONFLUENT, "alter/describe_user_scram_credentials; the user logs in at once")
def test_confluent_kafka_adds_a_scram_user_that_logs_in_at_once(secure: LocalCluster) -> None:
    client = admin(secure)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upsert = UserScramCredentialUpsertion(
        "judged-dave", info, b"dave-secret", b"judged-salt-of-dave"
    )
    for future in client.alter_user_scram_credentials([upsert], request_timeout=30).values():
        future.result()
    described = client.describe_user_scram_credentials(["judged-dave"], request_timeout=30)
    [(mechanism, iterations)] = [
        (i.mechanism, i.iterations)
        for i in described["judged-dave"].result().scram_credential_infos
    ]
    assert (mechanism, iterations) == (ScramMechanism.SCRAM_SHA_512, 8192)
    assert logs_in(secure, "judged-dave", "dave-secret")
    assert not logs_in(secure, "judged-dave", "wrong")

    deletion = UserScramCredentialDeletion("judged-dave", ScramMechanism.SCRAM_SHA_512)
    for future in client.alter_user_scram_credentials([deletion], request_timeout=30).values():
        future.result()
    deadline = time.monotonic() + 30
    while logs_in(secure, "judged-dave", "dave-secret"):  # other brokers follow the change
        assert time.monotonic() < deadline, "judged-dave can still log in"
    missing = client.describe_user_scram_credentials(["judged-dave"], request_timeout=30)
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND"):
        missing["judged-dave"].result()


@pytest.mark.judge(CONFLUENT, "a SCRAM user with a 4-byte salt (librdkafka's own) logs in")
def test_a_scram_user_with_a_short_salt_is_taken_and_logs_in(secure: LocalCluster) -> None:
    """Kafka takes a salt of any length; librdkafka's 0081_admin upserts b"salt"."""
    client = admin(secure)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10000)
    upsert = UserScramCredentialUpsertion("judged-erin", info, b"erin-secret", b"salt")
    for future in client.alter_user_scram_credentials([upsert], request_timeout=30).values():
        future.result()
    assert logs_in(secure, "judged-erin", "erin-secret")
    assert not logs_in(secure, "judged-erin", "salt")
