"""Admin owns its group, replica and partition collaborators and names each of their
public methods with the same signature, so callers see one class."""

from __future__ import annotations

import inspect

import pytest

from minibroker.client.admin import Admin
from minibroker.client.admin_groups import GroupAdmin
from minibroker.client.admin_partitions import PartitionAdmin
from minibroker.client.admin_replicas import ReplicaAdmin


@pytest.mark.timeout(10)
@pytest.mark.parametrize("collaborator", [GroupAdmin, ReplicaAdmin, PartitionAdmin])
def test_admin_delegates_every_public_method_with_its_signature(collaborator: type) -> None:
    methods = [
        name
        for name, _ in inspect.getmembers(collaborator, inspect.iscoroutinefunction)
        if not name.startswith("_")
    ]
    assert methods
    for name in methods:
        ours = getattr(Admin, name)
        theirs = getattr(collaborator, name)
        assert inspect.signature(ours) == inspect.signature(theirs), name
        assert ours.__doc__, name


@pytest.mark.timeout(10)
def test_admin_composes_instead_of_inheriting() -> None:
    assert Admin.__mro__ == (Admin, object)
    admin = Admin("127.0.0.1:1")
    assert admin._groups.cluster is admin._replicas.cluster is admin._partitions.cluster
    assert admin._replicas._controller is admin._partitions._controller
