"""How a client connection secures itself: TLS and a SASL login, from Kafka's client
property names.

``ClientSecurity.from_properties`` reads what ``--command-config FILE`` and Kafka's own
clients read (librdkafka and the Java client share these names):

    security.protocol     PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl.mechanism        PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl.username         (librdkafka's name; the Java client's sasl.jaas.config is read
    sasl.password          too: username="..." password="...")
    ssl.ca.location       PEM CA certificates the broker's certificate must chain to
                          (default: the system's trust store)
    ssl.certificate.location, ssl.key.location, ssl.key.password
                          a client certificate, for brokers with ssl.client.auth
    ssl.endpoint.identification.algorithm
                          https (default): the certificate must name the host; none/empty:
                          it need not

Unknown keys are ignored (a Kafka client's file has many that do not concern us).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from minibroker.protocol.errors import ConfigError
from minibroker.protocol.sasl import MECHANISMS

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class BrokerProver(Protocol):
    """A broker's identity, as a connection proves it (broker/security/identity_key.py)."""

    broker_id: int

    def sign(self, payload: bytes) -> bytes: ...


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """What a Connection does after TCP connect: a TLS handshake when ``ssl_context`` is
    set, then a SASL login when ``mechanism`` is, then, for a broker's own connections
    to other brokers, the proof of its id when ``identity`` is
    (protocol/broker_proof.py)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""
    identity: BrokerProver | None = None

    @property
    def uses_ssl(self) -> bool:
        return self.ssl_context is not None

    @property
    def uses_sasl(self) -> bool:
        return self.mechanism is not None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """Kafka's client properties (see the module docstring); ConfigError names the
        key that is wrong."""
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"security.protocol: must be one of {', '.join(SECURITY_PROTOCOLS)}"
                f" (got {protocol!r})"
            )
        context = None
        if protocol in ("SSL", "SASL_SSL"):
            context = client_ssl_context(
                ca_location=props.get("ssl.ca.location") or None,
                certificate_location=props.get("ssl.certificate.location") or None,
                key_location=props.get("ssl.key.location") or None,
                key_password=props.get("ssl.key.password") or None,
                check_hostname=props.get("ssl.endpoint.identification.algorithm", "https")
                .strip()
                .lower()
                == "https",
            )
        if not protocol.startswith("SASL_"):
            return cls(protocol, context)
        mechanism = props.get("sasl.mechanism", "").strip().upper()
        if mechanism not in MECHANISMS:
            raise ConfigError(
                f"sasl.mechanism: must be one of {', '.join(MECHANISMS)} (got {mechanism!r})"
            )
        username, password = props.get("sasl.username"), props.get("sasl.password")
        if username is None and props.get("sasl.jaas.config"):
            username, password = jaas_credentials(props["sasl.jaas.config"])
        if not username or password is None:
            raise ConfigError("sasl.username: a SASL login needs sasl.username and sasl.password")
        return cls(protocol, context, mechanism, username, password)


def jaas_credentials(text: str) -> tuple[str | None, str | None]:
    """(username, password) of a JAAS login line such as Kafka's
    ``...ScramLoginModule required username="admin" password="secret";``."""
    options = {
        key: value.replace('\\"', '"').replace("\\\\", "\\")
        for key, value in _JAAS_OPTION.findall(text)
    }
    return options.get("username"), options.get("password")


def client_ssl_context(
    *,
    ca_location: str | None = None,
    certificate_location: str | None = None,
    key_location: str | None = None,
    key_password: str | None = None,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A TLS client context: the broker's certificate checked against ``ca_location``
    (else the system's CAs), a client certificate when given."""
    try:
        context = ssl.create_default_context(cafile=ca_location)
        context.check_hostname = check_hostname
        if certificate_location:
            context.load_cert_chain(certificate_location, key_location, key_password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl.ca.location / ssl.certificate.location: {exc}") from exc
    return context
