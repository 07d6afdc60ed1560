"""The security of each listener and of the broker's own connections, from its config.

Kafka's model: each listener has a name and a security protocol
(``listener.security.protocol.map``):

    PLAINTEXT       nothing: every client is User:ANONYMOUS (the hot path, untouched)
    SSL             TLS; with ``ssl.client.auth`` = required/requested, a client
                    certificate's subject is the principal (User:CN=...,O=...)
    SASL_PLAINTEXT  a SASL login (broker/security/sasl_gate.py) before any other request
    SASL_SSL        TLS, then the SASL login

The msgpack listener is named by the scheme of ``listeners`` (``SASL_SSL://:9092``),
the Kafka one is ``KAFKA`` (``KAFKA:SASL_SSL`` in the map). Both share the broker's
``ssl.*`` files and ``sasl.enabled.mechanisms`` (Kafka's per-listener overrides,
``listener.name.<l>.*``, are not read).

The broker's own connections to other brokers (replica fetchers, the controller's
channel, controlled shutdown) go to the inter-broker listener with the protocol of that
listener, the broker's CA and certificate, and the login of ``sasl.jaas.config`` under
``sasl.mechanism.inter.broker.protocol``: that login is the broker principal. On
every listener, secure or not, each such connection then proves the broker's id with
its identity key (protocol/broker_proof.py): what the controller fence believes.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.net.security import (
    BrokerProver,
    ClientSecurity,
    client_ssl_context,
    jaas_credentials,
)
from minibroker.protocol.errors import ConfigError

_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """One listener's protocol, TLS context (None without TLS) and SASL mechanisms
    (empty without SASL)."""

    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None
    mechanisms: tuple[str, ...]
    handshake_timeout_s: float

    @property
    def uses_sasl(self) -> bool:
        return bool(self.mechanisms)


def listener_security(config: BrokerConfig, name: str) -> ListenerSecurity:
    protocol = config.security_protocol(name)
    context = server_ssl_context(config) if protocol in ("SSL", "SASL_SSL") else None
    mechanisms = tuple(config.sasl_enabled_mechanisms) if protocol.startswith("SASL_") else ()
    if protocol.startswith("SASL_") and not mechanisms:
        raise ConfigError(f"sasl.enabled.mechanisms: listener {name} is {protocol}")
    return ListenerSecurity(
        name, protocol, context, mechanisms, config.ssl_handshake_timeout_ms / 1000
    )


def server_ssl_context(config: BrokerConfig) -> ssl.SSLContext:
    """The listeners' TLS context: the broker's certificate, and client certificates
    checked against ``ssl.ca.location`` as ``ssl.client.auth`` says."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(
            config.ssl_certificate_location or "",
            config.ssl_key_location,
            config.ssl_key_password,
        )
        if config.ssl_ca_location:
            context.load_verify_locations(config.ssl_ca_location)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl.certificate.location / ssl.key.location: {exc}") from exc
    context.verify_mode = _CLIENT_AUTH[config.ssl_client_auth]
    if context.verify_mode != ssl.CERT_NONE and not config.ssl_ca_location:
        raise ConfigError("ssl.ca.location: ssl.client.auth needs the CA of the clients")
    return context


def inter_broker_security(
    config: BrokerConfig, identity: BrokerProver | None = None
) -> ClientSecurity | None:
    """How this broker connects to the others' inter-broker listener: TLS and SASL as
    that listener asks, then the proof of its id with ``identity`` (a cluster member's
    key; protocol/broker_proof.py). None: plaintext, nothing to prove."""
    protocol = config.security_protocol(config.inter_broker_listener)
    if protocol == "PLAINTEXT":
        return None if identity is None else ClientSecurity(identity=identity)
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        context = client_ssl_context(
            ca_location=config.ssl_ca_location,
            certificate_location=config.ssl_certificate_location,
            key_location=config.ssl_key_location,
            key_password=config.ssl_key_password,
            check_hostname=config.ssl_endpoint_identification_algorithm == "https",
        )
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, context, identity=identity)
    username, password = jaas_credentials(config.sasl_jaas_config or "")
    if not username or password is None:
        raise ConfigError(
            "sasl.jaas.config: a SASL inter-broker listener needs the broker's login"
            ' (username="..." password="...")'
        )
    return ClientSecurity(
        protocol,
        context,
        config.sasl_mechanism_inter_broker_protocol,
        username,
        password,
        identity=identity,
    )
