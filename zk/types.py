"""The vocabulary of our ZooKeeper client: errors, znode stats, events, transaction ops.

Plain values, so the controller and broker can name them without touching kazoo.
``translate_error`` is the one place kazoo's exceptions become ours
(``zk.client`` applies it to every call). The events are described in
``zk.client``'s docstring.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kazoo.exceptions import (
    BadVersionError,
    ConnectionDropped,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
    UnimplementedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.hosts import collect_hosts
from kazoo.protocol.states import ZnodeStat

from minibroker.protocol.errors import MinibrokerError

# -- errors -------------------------------------------------------------------------


class ZkError(MinibrokerError):
    """A ZooKeeper request failed (the kazoo exception is the ``__cause__``)."""

    failed_op: int | None = None
    """In a failed transaction: the index of the op that failed."""


class NodeExists(ZkError):
    """create: the znode is already there."""


class NoNode(ZkError):
    """The znode (or, for create, its parent) does not exist."""


class BadVersion(ZkError):
    """A conditional update or delete named a version the znode no longer has."""


class NotEmpty(ZkError):
    """delete: the znode still has children."""


class ZkConnectionLoss(ZkError):
    """No answer: the connection dropped or timed out; the request may or may not
    have been applied."""


class ZkSessionExpired(ZkError):
    """The session ended (expired or closed); its ephemerals and watches are gone."""


class ZkUnimplemented(ZkError):
    """The server does not know the request (multiRead before ZooKeeper 3.6)."""


_ERRORS: tuple[tuple[type[BaseException], type[ZkError]], ...] = (
    (NodeExistsError, NodeExists),
    (NoNodeError, NoNode),
    (BadVersionError, BadVersion),
    (NotEmptyError, NotEmpty),
    # ConnectionClosedError (client stopped) is a SessionExpiredError in kazoo.
    (SessionExpiredError, ZkSessionExpired),
    (ConnectionLoss, ZkConnectionLoss),
    (ConnectionDropped, ZkConnectionLoss),
    (OperationTimeoutError, ZkConnectionLoss),
    (KazooTimeoutError, ZkConnectionLoss),
    (UnimplementedError, ZkUnimplemented),
)


def translate_error(exc: BaseException) -> ZkError:
    """Our exception for a kazoo one, with the original as ``__cause__``."""
    ours = next((mine for theirs, mine in _ERRORS if isinstance(exc, theirs)), ZkError)
    error = ours(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    error.__cause__ = exc
    return error


# -- values -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stat:
    """The parts of a znode's stat we use. ``version`` is the data version that
    conditional updates name (Kafka's zkVersion)."""

    version: int
    cversion: int
    ephemeral_owner: int
    num_children: int
    data_length: int
    ctime_ms: int
    mtime_ms: int
    czxid: int
    mzxid: int

    @classmethod
    def from_kazoo(cls, stat: ZnodeStat) -> Stat:
        return cls(
            version=stat.version,
            cversion=stat.cversion,
            ephemeral_owner=stat.ephemeralOwner,
            num_children=stat.numChildren,
            data_length=stat.dataLength,
            ctime_ms=stat.ctime,
            mtime_ms=stat.mtime,
            czxid=stat.czxid,
            mzxid=stat.mzxid,
        )


class WatchType(enum.Enum):
    CREATED = "created"
    DELETED = "deleted"
    CHANGED = "changed"
    CHILD = "child"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: WatchType
    path: str


class ZkState(enum.Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class StateChange:
    state: ZkState
    session_id: int | None
    new_session: bool = False


ZkEvent = WatchEvent | StateChange


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True, slots=True)
class SetOp:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class CheckOp:
    """Transaction guard: fails the whole transaction unless ``path`` has ``version``."""

    path: str
    version: int


TxnOp = CreateOp | SetOp | DeleteOp | CheckOp


def split_connect_string(connect: str) -> tuple[str, str]:
    """``"h1:1,h2:2/kafka/x"`` -> ``("h1:1,h2:2", "/kafka/x")``; no chroot -> ``""``."""
    hosts, _, chroot = connect.partition("/")
    chroot = "/" + chroot.strip("/") if chroot.strip("/") else ""
    try:
        collect_hosts(hosts)
    except ValueError as exc:
        raise ZkError(f"bad zookeeper.connect {connect!r}: {exc}") from exc
    return hosts, chroot
