"""Shared fixtures (each lives in tests/support/; this file only makes them visible)."""

from tests.support.cluster import local_cluster  # noqa: F401
from tests.support.zookeeper import (  # noqa: F401
    _zookeeper_admin,
    zk_client,
    zk_connect,
    zk_session_killer,
    zookeeper_server,
)
