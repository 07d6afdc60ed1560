"""What a listener that hung up on a plaintext client wants: TLS, a SASL login, or
neither (then it is probably not a msgpack listener at all).

A TLS listener closes a connection whose first bytes are no TLS handshake, without a
word; a SASL listener answers requests before the login with ILLEGAL_SASL_STATE. Only
when a client without TLS has been hung up on does ``listener_wants`` look closer, on a
connection of its own: a TLS handshake that trusts any certificate (nothing of value is
sent: the probe asks for no topic) and then a Metadata request, which a SASL listener
refuses. The answer becomes part of the client's error, naming the client properties
(``--command-config`` in the CLI) that give what the listener wants.
"""

from __future__ import annotations

import ssl

import trio

from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import IllegalSaslStateError, KafkaError, NetworkError

PROBE_TIMEOUT_S = 3.0
"""A TLS handshake and one Metadata answer on a listener that just took a connection."""

WANTS_TLS = (
    "the listener wants TLS: set security.protocol=SSL and ssl.ca.location "
    "(in the CLI: --command-config FILE)"
)
WANTS_TLS_AND_SASL = (
    "the listener wants TLS and a SASL login: set security.protocol=SASL_SSL, "
    "sasl.mechanism, sasl.username, sasl.password and ssl.ca.location "
    "(in the CLI: --command-config FILE)"
)
WANTS_SASL = (
    "the listener wants a SASL login first: set security.protocol=SASL_PLAINTEXT "
    "(SASL_SSL with TLS), sasl.mechanism, sasl.username and sasl.password "
    "(in the CLI: --command-config FILE)"
)
NOT_MSGPACK = "is it a broker's msgpack port?"


def _trust_anything() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def listener_wants(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """Why ``host:port`` hung up on a plaintext request, as the hint to show."""
    probe = ClientSecurity("SSL", _trust_anything())
    try:
        with trio.fail_after(timeout_s):
            async with Connection(
                host, port, connect_timeout=timeout_s, security=probe, client_id="listener-probe"
            ) as conn:
                answer = await conn.request(
                    ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False}
                )
    except (NetworkError, KafkaError, trio.TooSlowError):
        return NOT_MSGPACK
    if isinstance(answer, dict) and answer.get("error_code") == IllegalSaslStateError.code:
        return WANTS_TLS_AND_SASL
    return WANTS_TLS
