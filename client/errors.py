"""Turning wire error codes into exceptions whose message names what failed.

Every error the client raises from a response goes through :func:`wire_error`, so
messages read the same everywhere: ``"<what>: <ERROR_NAME>"`` plus the broker's own
message when it sent one, e.g. ``"events-3: NOT_LEADER_OR_FOLLOWER (leader moved)"``.
"""

from __future__ import annotations

from minibroker.protocol.errors import KafkaError, error_for_code


def wire_error(code: int, what: str, detail: str | None = None) -> KafkaError:
    """The KafkaError subclass for ``code``, its message naming ``what``."""
    cls = error_for_code(code)
    message = f"{what}: {cls.name}"
    if detail and detail != cls.name:
        message += f" ({detail})"
    return cls(message)


def raise_if_error(code: int, what: str, detail: str | None = None) -> None:
    if code:
        raise wire_error(code, what, detail)


def with_context(error: KafkaError, what: str) -> KafkaError:
    """The same error class with ``what`` in front of its message (once)."""
    if error.message.startswith(what):
        return error
    return type(error)(f"{what}: {error.message}")
