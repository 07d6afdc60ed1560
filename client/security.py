"""The security options every client (Admin, Producer, Consumer, the CLI) accepts.

Either a mapping of Kafka's client property names (``config={"security.protocol":
"SASL_SSL", ...}``, what ``--command-config FILE`` holds) or the same as keyword
arguments with underscores (``security_protocol="SASL_SSL", sasl_username=...``), or a
ready ``ClientSecurity``; keyword arguments win over the mapping. See net/security.py
for the names and what each does.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from minibroker.broker.config.properties import parse_properties
from minibroker.net.security import ClientSecurity
from minibroker.protocol.errors import ConfigError


class SecurityOptions(TypedDict, total=False):
    """Kafka's client security properties as keyword arguments."""

    security_protocol: str
    sasl_mechanism: str
    sasl_username: str
    sasl_password: str
    ssl_ca_location: str
    ssl_certificate_location: str
    ssl_key_location: str
    ssl_key_password: str
    ssl_endpoint_identification_algorithm: str


def client_security(
    config: Mapping[str, str] | ClientSecurity | None = None, **options: str
) -> ClientSecurity | None:
    """The ClientSecurity the options describe; None for plaintext without options."""
    if isinstance(config, ClientSecurity):
        if options:
            raise ConfigError("give either a ClientSecurity or security options, not both")
        return config
    props = dict(config or {})
    props.update({key.replace("_", "."): value for key, value in options.items()})
    if not props:
        return None
    return ClientSecurity.from_properties(props)


def read_command_config(path: str | Path) -> dict[str, str]:
    """A ``--command-config`` file: Java properties with Kafka's client names."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return parse_properties(text)
