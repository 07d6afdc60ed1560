"""``dev up --secure``: a dev cluster whose listeners are SASL_SSL, with ACLs on.

What it sets up, under ``<data-dir>/secrets`` (kept, and reused by the next
``dev up --secure``):

- a local CA (``ca.pem``) and one broker certificate for localhost / 127.0.0.1
  (client/cli/dev_certs.py);
- two SCRAM users written to ZooKeeper before any broker starts: ``broker`` (the
  brokers' own login on the inter-broker listener) and ``admin`` (a super user), with
  random passwords kept in ``secrets/*.password`` (0600);
- the broker properties: ``listeners=SASL_SSL://...``, ``KAFKA:SASL_SSL`` for the Kafka
  listener, SCRAM-SHA-256/512 and PLAIN, the certificate, the broker's login, and the
  ACL authorizer with ``super.users=User:admin`` and an ACL allowing ``User:broker``
  ClusterAction on the cluster (what controller requests and replica fetches need);
- ``<data-dir>/client.properties``: the admin's login with Kafka's client property
  names, read by ``--command-config`` and by Kafka clients (librdkafka takes it as is:
  ``kcat -F client.properties``).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from minibroker.client.cli.dev_certs import LocalCa, issue, make_ca
from minibroker.client.security import client_security, read_command_config
from minibroker.net.security import ClientSecurity
from minibroker.protocol.acls import (
    CLUSTER_NAME,
    AccessControlEntry,
    Operation,
    Permission,
    ResourcePattern,
    ResourceType,
)
from minibroker.protocol.sasl import (
    SCRAM_MECHANISMS,
    format_scram_credential,
    make_scram_credential,
)
from minibroker.zk.acls import update_acls
from minibroker.zk.client import open_zk_client
from minibroker.zk.scram_users import set_scram_credential

SECRETS_DIR = "secrets"
CLIENT_PROPERTIES = "client.properties"
BROKER_USER = "broker"
ADMIN_USER = "admin"
CLIENT_MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True, slots=True)
class SecureCluster:
    settings: list[str]
    """Every broker's extra ``--set KEY=VALUE``."""
    client_properties: Path
    passwords: dict[str, str]

    @property
    def security(self) -> ClientSecurity | None:
        return client_security(read_command_config(self.client_properties))


def _password(directory: Path, user: str) -> str:
    path = directory / f"{user}.password"
    if path.exists():
        return path.read_text().strip()
    password = secrets.token_urlsafe(18)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(password + "\n")
    return password


def prepare(data_dir: Path) -> SecureCluster:
    """Certificates, passwords, broker settings and client.properties (no I/O beyond
    files: the users go to ZooKeeper in ``create_users``)."""
    directory = data_dir / SECRETS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    ca = LocalCa(directory / "ca.pem", directory / "ca-key.pem")
    if not (ca.certificate.exists() and ca.key.exists()):
        ca = make_ca(directory)
    broker_cert = directory / f"{BROKER_USER}.pem"
    broker_key = directory / f"{BROKER_USER}-key.pem"
    if not (broker_cert.exists() and broker_key.exists()):
        issued = issue(ca, directory, BROKER_USER)
        broker_cert, broker_key = issued.certificate, issued.key
    passwords = {user: _password(directory, user) for user in (BROKER_USER, ADMIN_USER)}
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{BROKER_USER}" password="{passwords[BROKER_USER]}";'
    )
    settings = [
        "listener.security.protocol.map=SASL_SSL:SASL_SSL,KAFKA:SASL_SSL",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
        f"sasl.jaas.config={jaas}",
        f"ssl.certificate.location={broker_cert}",
        f"ssl.key.location={broker_key}",
        f"ssl.ca.location={ca.certificate}",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        f"super.users=User:{ADMIN_USER}",
    ]
    client_properties = data_dir / CLIENT_PROPERTIES
    text = (
        "# the dev cluster's admin login (minibroker --command-config, librdkafka, kcat -F)\n"
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={CLIENT_MECHANISM}\n"
        f"sasl.username={ADMIN_USER}\n"
        f"sasl.password={passwords[ADMIN_USER]}\n"
        f"ssl.ca.location={ca.certificate}\n"
    )
    fd = os.open(client_properties, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return SecureCluster(settings, client_properties, passwords)


async def create_users(zookeeper: str, cluster: SecureCluster) -> None:
    """The SCRAM users and the brokers' ACL, written before any broker starts."""
    async with open_zk_client(zookeeper) as zk:
        for user, password in cluster.passwords.items():
            for mechanism in SCRAM_MECHANISMS:
                credential = make_scram_credential(mechanism, password)
                await set_scram_credential(zk, user, mechanism, format_scram_credential(credential))
        brokers = AccessControlEntry(
            f"User:{BROKER_USER}", "*", Operation.CLUSTER_ACTION, Permission.ALLOW
        )
        await update_acls(
            zk,
            ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME),
            lambda entries: entries | {brokers},
        )


def listen_scheme(secure: bool) -> str:
    """The msgpack listener's name in ``--listen``."""
    return "SASL_SSL://" if secure else ""
