"""Shared fixtures (each lives in tests/support/; this file only makes them visible), and
the suite's hypothesis settings."""

from hypothesis import settings

from tests.support.cluster import local_cluster  # noqa: F401
from tests.support.zookeeper import (  # noqa: F401
    _zookeeper_admin,
    zk_client,
    zk_connect,
    zk_session_killer,
    zookeeper_server,
)

# Hypothesis' per-example deadline (200 ms) measures wall time, which a loaded 2-core
# machine stretches: codec property tests failed on it under load and passed on rerun.
# Each test still has pytest-timeout's bound.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")
