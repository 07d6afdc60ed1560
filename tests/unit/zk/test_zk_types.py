"""The kazoo boundary: connect strings and exception translation (no ZooKeeper needed)."""

from __future__ import annotations

import pytest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError

from minibroker.zk.types import (
    BadVersion,
    NodeExists,
    NoNode,
    NotEmpty,
    ZkConnectionLoss,
    ZkError,
    ZkSessionExpired,
    split_connect_string,
    translate_error,
)


@pytest.mark.parametrize(
    ("connect", "hosts", "chroot"),
    [
        ("127.0.0.1:2181", "127.0.0.1:2181", ""),
        ("127.0.0.1:2181/", "127.0.0.1:2181", ""),
        ("a:1,b:2/kafka", "a:1,b:2", "/kafka"),
        ("a:1/kafka/cluster-1/", "a:1", "/kafka/cluster-1"),
    ],
)
def test_connect_string_splits_into_hosts_and_chroot(connect: str, hosts: str, chroot: str) -> None:
    assert split_connect_string(connect) == (hosts, chroot)


def test_bad_connect_string_is_our_error() -> None:
    with pytest.raises(ZkError, match=r"bad zookeeper\.connect"):
        split_connect_string(":2181")


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        (NodeExistsError(), NodeExists),
        (NoNodeError(), NoNode),
        (BadVersionError(), BadVersion),
        (NotEmptyError(), NotEmpty),
        (ConnectionLoss(), ZkConnectionLoss),
        (KazooTimeoutError(), ZkConnectionLoss),
        (ConnectionClosedError(), ZkSessionExpired),
        (RuntimeInconsistency(), ZkError),
    ],
)
def test_kazoo_errors_become_ours_with_the_cause_kept(
    theirs: Exception, ours: type[ZkError]
) -> None:
    error = translate_error(theirs)
    assert type(error) is ours
    assert error.__cause__ is theirs
