"""Kafka's tools (3.9.2) against `dev up --secure` (SASL_SSL, SCRAM-SHA-512, ACLs on),
logged in as the cluster's admin with Java client properties: kafka-acls adds, lists
and removes ACLs (CreateAcls, DescribeAcls, DeleteAcls) as an operator types them, and
kafka-topics works over the same login."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.judges.conftest import judged_cluster
from tests.support.cluster import LocalCluster
from tests.support.judges import KAFKA_VERSION, ToolResult, ToolSession, java_client_config

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

TOOLS = f"Kafka tools {KAFKA_VERSION}"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from judged_cluster(tmp_path_factory, "secure-judged", secure=True)


def ok(result: ToolResult) -> ToolResult:
    assert result.exit == 0, (result.stdout[-2000:], result.stderr[-2000:])
    return result


@pytest.mark.judge(TOOLS, "kafka-acls --add/--list/--remove on SASL_SSL (SCRAM), kafka-topics")
def test_kafka_acls_adds_lists_and_removes_acls_over_sasl_ssl(secure: LocalCluster) -> None:
    tools = ToolSession(secure.kafka_bootstrap, command_config=java_client_config(secure))
    tools.create_topic("payments", 1)
    tools.add(
        "add",
        "kafka-acls",
        *("--add", "--allow-principal", "User:alice", "--operation", "Read"),
        *("--operation", "Describe", "--topic", "payments"),
    )
    tools.add(
        "add-prefixed",
        "kafka-acls",
        *("--add", "--deny-principal", "User:mallory", "--operation", "Write"),
        *("--topic", "pay", "--resource-pattern-type", "prefixed"),
    )
    tools.add("list", "kafka-acls", "--list", "--topic", "payments")
    tools.add(
        "remove",
        "kafka-acls",
        *("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read"),
        *("--topic", "payments"),
    )
    tools.add("list-after", "kafka-acls", "--list", "--topic", "payments")
    tools.add(
        "list-matching",
        "kafka-acls",
        *("--list", "--topic", "payments", "--resource-pattern-type", "match"),
    )
    results = tools.run()

    assert ok(results["payments"]).lines == ["Created topic payments."]
    added = ok(results["add"]).stdout
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=payments," in added
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in added
    listed = ok(results["list"]).stdout
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=payments" in listed
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed
    assert "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed
    ok(results["remove"])
    after = ok(results["list-after"]).stdout
    assert "operation=READ" not in after and "operation=DESCRIBE" in after
    matching = ok(results["list-matching"]).stdout
    assert "name=pay, patternType=PREFIXED" in matching
    assert "(principal=User:mallory, host=*, operation=WRITE, permissionType=DENY)" in matching


@pytest.mark.judge(TOOLS, "kafka-configs --alter --add-config SCRAM-SHA-512=[...] of a user")
def test_kafka_configs_adds_a_scram_user_who_then_logs_in(secure: LocalCluster) -> None:
    admin = ToolSession(secure.kafka_bootstrap, command_config=java_client_config(secure))
    user = ("--entity-type", "users", "--entity-name", "erin")
    admin.add(
        "add-user",
        "kafka-configs",
        *("--alter", *user, "--add-config", "SCRAM-SHA-512=[iterations=8192,password=erin-pw]"),
    )
    admin.add("describe-user", "kafka-configs", "--describe", *user)
    results = admin.run()
    ok(results["add-user"])
    assert (
        "SCRAM credential configs for user-principal 'erin' are SCRAM-SHA-512=iterations=8192"
        in ok(results["describe-user"]).stdout
    )
    erin = ToolSession(
        secure.kafka_bootstrap,
        command_config=java_client_config(secure, username="erin", password="erin-pw"),
    )
    erin.add("list-as-erin", "kafka-topics", "--list")
    ok(erin.run()["list-as-erin"])  # logged in (ACLs show erin no topics)
    admin.add("delete-user", "kafka-configs", "--alter", *user, "--delete-config", "SCRAM-SHA-512")
    ok(admin.run()["delete-user"])
