"""Where the broker listens and how it is secured: endpoints, listener names and their
security protocols, TLS, SASL, and the ACL authorizer.

The msgpack listener is named by the scheme of ``listeners`` (a bare ``host:port`` is
PLAINTEXT), the Kafka-protocol one is always ``KAFKA``; ``listener.security.protocol.map``
gives each name its protocol. ``check_listeners`` refuses, at start-up and naming the
key, combinations that cannot work.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from minibroker.broker.config.config_keys import at_least, between, config_key, one_of
from minibroker.protocol.errors import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
KAFKA_LISTENER_NAME = "KAFKA"
"""The name of the Kafka-protocol listener (zk/model.py's KAFKA_LISTENER)."""


@dataclass(frozen=True)
class ListenerSettings:
    """The listener and security keys of ``BrokerConfig``."""

    __slots__ = ()  # BrokerConfig holds the slots

    listeners: str = config_key(
        "listeners",
        "PLAINTEXT://:9092",
        "Where to listen: PLAINTEXT://host:port or host:port; empty host = all interfaces, "
        "port 0 = any free port.",
    )
    advertised_listeners: str | None = config_key(
        "advertised.listeners", None, "Endpoint published to clients; default: listeners."
    )
    kafka_listeners: str | None = config_key(
        "kafka.listeners",
        None,
        "Where to serve Kafka's binary protocol (host:port, port 0 = any free port), beside "
        "the msgpack listener; unset = no Kafka listener.",
    )
    kafka_advertised_listeners: str | None = config_key(
        "kafka.advertised.listeners",
        None,
        "Kafka-protocol endpoint published to Kafka clients; default: kafka.listeners.",
    )
    inter_broker_listener_name: str | None = config_key(
        "inter.broker.listener.name",
        None,
        "The listener that carries controller requests (LeaderAndIsr, StopReplica, "
        "UpdateMetadata) and replication; refused on every other listener. Brokers "
        "speak msgpack to each other, so it must name the msgpack listener (the default).",
    )
    security_inter_broker_protocol: str | None = config_key(
        "security.inter.broker.protocol",
        None,
        "The inter-broker listener's security protocol, checked against "
        "listener.security.protocol.map when set.",
        lambda v: None if v is None else one_of(*SECURITY_PROTOCOLS)(v),
    )
    listener_security_protocol_map: str = config_key(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
        "KAFKA:PLAINTEXT",
        "NAME:PROTOCOL pairs: the security protocol of each listener name (the msgpack "
        "listener is named by the scheme of listeners, the Kafka one is KAFKA).",
    )
    sasl_enabled_mechanisms: list[str] = config_key(  # noqa: RUF009 - a default_factory for lists
        "sasl.enabled.mechanisms",
        ["SCRAM-SHA-256", "SCRAM-SHA-512"],
        "Mechanisms SASL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (PLAIN is"
        " checked against the users' SCRAM credentials).",
        lambda v: next((f"unknown mechanism {m}" for m in v if m not in SASL_MECHANISMS), None),
    )
    sasl_mechanism_inter_broker_protocol: str = config_key(
        "sasl.mechanism.inter.broker.protocol",
        "SCRAM-SHA-512",
        "Mechanism brokers and the controller log in with on a SASL inter-broker listener.",
        one_of(*SASL_MECHANISMS),
    )
    sasl_jaas_config: str | None = config_key(
        "sasl.jaas.config",
        None,
        "The broker's own SASL login, in Kafka's JAAS form (only username=\"...\" and"
        ' password="..." are read): the broker principal of inter-broker connections.',
    )
    # Kafka's SASL login keys for GSSAPI (Kerberos) and OAUTHBEARER token refresh. A
    # Kafka broker takes them as per-broker dynamic configs whether or not a listener
    # uses those mechanisms; minibroker serves neither, so it keeps and describes them
    # (broker/admin/broker_configs.py's SASL_LOGIN_KEYS) and nothing reads them.
    sasl_kerberos_service_name: str | None = config_key(
        "sasl.kerberos.service.name", None, "Kerberos principal name (GSSAPI: not served)."
    )
    sasl_kerberos_kinit_cmd: str = config_key(
        "sasl.kerberos.kinit.cmd", "/usr/bin/kinit", "Kerberos kinit path (GSSAPI: not served)."
    )
    sasl_kerberos_ticket_renew_window_factor: float = config_key(
        "sasl.kerberos.ticket.renew.window.factor",
        0.8,
        "Share of a Kerberos ticket's life before renewal (GSSAPI: not served).",
    )
    sasl_kerberos_ticket_renew_jitter: float = config_key(
        "sasl.kerberos.ticket.renew.jitter",
        0.05,
        "Random jitter added to the renewal time (GSSAPI: not served).",
    )
    sasl_kerberos_min_time_before_relogin: int = config_key(
        "sasl.kerberos.min.time.before.relogin",
        60000,
        "Login thread sleep between refresh attempts, ms (GSSAPI: not served).",
        kind="LONG",
    )
    sasl_kerberos_principal_to_local_rules: list[str] = config_key(  # noqa: RUF009
        "sasl.kerberos.principal.to.local.rules",
        ["DEFAULT"],
        "Rules mapping Kerberos principal names to short names (GSSAPI: not served).",
    )
    sasl_login_refresh_window_factor: float = config_key(
        "sasl.login.refresh.window.factor",
        0.8,
        "Share of a token's life before refresh (OAUTHBEARER: not served).",
        lambda v: None if 0.5 <= v <= 1.0 else "must be in [0.5, 1.0]",
    )
    sasl_login_refresh_window_jitter: float = config_key(
        "sasl.login.refresh.window.jitter",
        0.05,
        "Random jitter added to the refresh time (OAUTHBEARER: not served).",
        lambda v: None if 0.0 <= v <= 0.25 else "must be in [0.0, 0.25]",
    )
    sasl_login_refresh_min_period_seconds: int = config_key(
        "sasl.login.refresh.min.period.seconds",
        60,
        "Least wait between token refreshes, s (OAUTHBEARER: not served).",
        between(0, 900),
        kind="SHORT",
    )
    sasl_login_refresh_buffer_seconds: int = config_key(
        "sasl.login.refresh.buffer.seconds",
        300,
        "Time kept before a token's expiry when refreshing, s (OAUTHBEARER: not served).",
        between(0, 3600),
        kind="SHORT",
    )
    ssl_certificate_location: str | None = config_key(
        "ssl.certificate.location",
        None,
        "PEM certificate chain of SSL/SASL_SSL listeners (also the client certificate of"
        " inter-broker connections).",
    )
    ssl_key_location: str | None = config_key(
        "ssl.key.location", None, "PEM private key of ssl.certificate.location."
    )
    ssl_key_password: str | None = config_key(
        "ssl.key.password", None, "Password of an encrypted ssl.key.location."
    )
    ssl_ca_location: str | None = config_key(
        "ssl.ca.location",
        None,
        "PEM CA certificates trusted for client certificates and, on inter-broker"
        " connections, for the other brokers' certificates.",
    )
    ssl_client_auth: str = config_key(
        "ssl.client.auth",
        "none",
        "Client certificates on SSL listeners: none, requested, required (the principal is"
        " then the certificate's subject, e.g. User:CN=client,O=org).",
        one_of("none", "requested", "required"),
    )
    ssl_endpoint_identification_algorithm: str = config_key(
        "ssl.endpoint.identification.algorithm",
        "https",
        "https: inter-broker connections check the other broker's certificate names its"
        " host; empty: they do not.",
        one_of("https", ""),
    )
    ssl_handshake_timeout_ms: int = config_key(
        "ssl.handshake.timeout.ms",
        10000,
        "Close a connection whose TLS handshake is not done in this long (minibroker's own key).",
        at_least(1),
    )
    max_connections: int = config_key(
        "max.connections",
        -1,
        "Connections the broker holds over all listeners; a new one past it is closed at"
        " once. -1: three quarters of the process's open-file limit (Kafka: unbounded).",
        at_least(-1),
    )
    max_connections_per_ip: int = config_key(
        "max.connections.per.ip",
        2147483647,
        "Connections one client address may hold; a new one past it is closed at once.",
        at_least(0),
    )
    max_connections_per_ip_overrides: str = config_key(
        "max.connections.per.ip.overrides",
        "",
        "host:count pairs, comma-separated: per-address exceptions to max.connections.per.ip.",
    )
    max_connection_creation_rate: int = config_key(
        "max.connection.creation.rate",
        2147483647,
        "New connections a second each listener takes; faster ones wait their turn (KIP-612).",
        at_least(1),
    )
    connection_failed_authentication_delay_ms: int = config_key(
        "connection.failed.authentication.delay.ms",
        100,
        "How long a failed SASL login waits before its refusal and close (KIP-306).",
        at_least(0),
    )
    connections_max_reauth_ms: int = config_key(
        "connections.max.reauth.ms",
        0,
        "Above 0: how long a SASL login lasts on the Kafka listener (KIP-368). Clients are"
        " told at login (SaslAuthenticate v1+) and log in again on the same connection; a"
        " connection whose session ended is closed at its next request unless that starts"
        " a new login. 0: a login lasts as long as its connection. The msgpack listener's"
        " logins always do (minibroker's own clients do not re-authenticate), and the"
        " per-listener form (listener.name.<l>.<mechanism>.connections.max.reauth.ms) is"
        " not read.",
        at_least(0),
    )
    connection_failed_authentication_rate_per_ip: float = config_key(
        "connection.failed.authentication.rate.per.ip",
        1.0,
        "Failed SASL logins a second one client address may make, after a burst of 10;"
        " past it, its next login waits before its credential is checked (minibroker's"
        " own key; 0 = no limit).",
        at_least(0),
    )
    authorizer_class_name: str = config_key(
        "authorizer.class.name",
        "",
        "Empty: no authorization. Any other value turns on minibroker's ACL authorizer "
        "(Kafka's names kafka.security.authorizer.AclAuthorizer or "
        "kafka.security.auth.SimpleAclAuthorizer are the usual ones); ACLs live in "
        "ZooKeeper under /kafka-acl.",
    )
    super_users: str = config_key(
        "super.users",
        "",
        "Principals allowed everything, separated by semicolons (User:admin;User:broker).",
    )
    allow_everyone_if_no_acl_found: bool = config_key(
        "allow.everyone.if.no.acl.found",
        False,
        "With an authorizer: whether a resource no ACL names is open to everyone.",
    )

    @property
    def listen_address(self) -> tuple[str, int]:
        """(host, port) of ``listeners``; host "" means all interfaces."""
        return parse_endpoint(self.listeners, "listeners")

    @property
    def advertised_address(self) -> tuple[str, int]:
        """(host, port) given to clients; the port is 0 until the server binds."""
        if self.advertised_listeners:
            return parse_endpoint(self.advertised_listeners, "advertised.listeners")
        host, port = self.listen_address
        return (host if host not in ("", "0.0.0.0", "::") else socket.gethostname(), port)

    @property
    def listener_name(self) -> str:
        """The msgpack listener's name: the scheme of ``listeners`` (PLAINTEXT if none)."""
        return listener_name_of(self.listeners)

    @property
    def inter_broker_listener(self) -> str:
        """The listener controller requests and replication use (the msgpack one)."""
        return self.inter_broker_listener_name or self.listener_name

    def security_protocol(self, listener: str) -> str:
        """The security protocol of listener ``listener`` (listener.security.protocol.map)."""
        return security_protocol_map(self.listener_security_protocol_map).get(listener, "PLAINTEXT")

    @property
    def kafka_listen_address(self) -> tuple[str, int] | None:
        """(host, port) of ``kafka.listeners``, None without a Kafka listener."""
        if not self.kafka_listeners:
            return None
        return parse_endpoint(self.kafka_listeners, "kafka.listeners")

    @property
    def kafka_advertised_address(self) -> tuple[str, int] | None:
        """(host, port) Kafka clients are given; the port is 0 until the server binds."""
        if self.kafka_advertised_listeners:
            return parse_endpoint(self.kafka_advertised_listeners, "kafka.advertised.listeners")
        listen = self.kafka_listen_address
        if listen is None:
            return None
        host, port = listen
        if host in ("", "0.0.0.0", "::"):
            host = self.advertised_address[0]
        return host, port

    def check_listeners(self) -> None:
        """Fail at start-up, naming the key, on a listener that cannot work."""
        self.listen_address  # noqa: B018 - fail at start-up on a malformed listener
        if self.advertised_listeners:
            self.advertised_address  # noqa: B018
        self.kafka_advertised_address  # noqa: B018 - and on a malformed Kafka listener
        _check_listener_security(self)


def listener_name_of(text: str) -> str:
    """The listener name of ``NAME://host:port`` (PLAINTEXT for a bare host:port)."""
    spec = text.strip().split(",")[0]
    scheme, sep, _ = spec.partition("://")
    return scheme.upper() if sep else "PLAINTEXT"


def security_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` as a dict; ConfigError on a malformed pair."""
    mapping: dict[str, str] = {}
    for pair in text.split(","):
        if not pair.strip():
            continue
        name, sep, protocol = pair.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: bad pair {pair!r} (NAME:PROTOCOL, protocol"
                f" one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        mapping[name.strip().upper()] = protocol
    return mapping


def parse_endpoint(text: str, key: str) -> tuple[str, int]:
    """``NAME://host:port`` or ``host:port`` (IPv6 as ``[::1]:port``) -> (host, port)."""
    spec = text.strip().split(",")[0]
    if "://" in spec:
        scheme, _, spec = spec.partition("://")
        if not scheme.replace("_", "").isalnum():
            raise ConfigError(f"{key}: bad listener name {scheme!r}")
    host, sep, port_text = spec.rpartition(":")
    if not sep:
        raise ConfigError(f"{key}: expected host:port, got {text!r}")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"{key}: bad port {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key}: port {port} out of range")
    return host, port


def _check_listener_security(config: ListenerSettings) -> None:
    """Listener names and protocols that cannot work fail at start, naming the key."""
    protocols = security_protocol_map(config.listener_security_protocol_map)
    name = config.listener_name
    if name == KAFKA_LISTENER_NAME:
        raise ConfigError(f"listeners: {KAFKA_LISTENER_NAME} names the Kafka listener")
    if name not in protocols:
        raise ConfigError(f"listeners: listener {name} is not in listener.security.protocol.map")
    if config.kafka_listeners and "://" in config.kafka_listeners:
        kafka_name = listener_name_of(config.kafka_listeners)
        if kafka_name != KAFKA_LISTENER_NAME:
            raise ConfigError(f"kafka.listeners: the Kafka listener is named {KAFKA_LISTENER_NAME}")
    if config.inter_broker_listener != name:
        raise ConfigError(
            f"inter.broker.listener.name: brokers speak to each other on the msgpack listener"
            f" ({name}), not {config.inter_broker_listener}"
        )
    wanted = config.security_inter_broker_protocol
    if wanted is not None and protocols[name] != wanted:
        raise ConfigError(
            f"security.inter.broker.protocol: listener {name} is {protocols[name]}, not {wanted}"
        )
    used = {protocols[name]}
    if config.kafka_listeners:
        used.add(protocols.get(KAFKA_LISTENER_NAME, "PLAINTEXT"))
    if used & {"SSL", "SASL_SSL"} and not (
        config.ssl_certificate_location and config.ssl_key_location
    ):
        raise ConfigError("ssl.certificate.location: an SSL listener needs a certificate and key")
