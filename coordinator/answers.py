"""The bodies the group coordinator answers JoinGroup and SyncGroup with, parked or not
(protocol/messages/groups.py declares them). Error answers carry no protocol: the
Kafka listener writes nil (or "" before Kafka v7) there."""

from __future__ import annotations

from minibroker.coordinator.group import Group, Member
from minibroker.protocol.errors import NONE, KafkaError
from minibroker.protocol.messages import bodies


def join_answer(group: Group, member: Member) -> bodies.JoinGroupResponse:
    """The current generation as ``member`` sees it: only the leader gets every member's
    metadata (for the chosen protocol), to compute the assignment from."""
    protocol = group.protocol_name
    members: list[bodies.JoinGroupResponseMember] = []
    if member.member_id == group.leader_id and protocol is not None:
        members = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata_for(protocol),
            }
            for m in group.members.values()
        ]
    return {
        "throttle_time_ms": 0,
        "error_code": NONE,
        "generation_id": group.generation_id,
        "protocol_type": group.protocol_type,
        "protocol_name": protocol,
        "leader": group.leader_id or "",
        "member_id": member.member_id,
        "members": members,
    }


def join_error(error: KafkaError, member_id: str) -> bodies.JoinGroupResponse:
    """A refused JoinGroup; ``member_id`` is the id MEMBER_ID_REQUIRED hands out."""
    return {
        "throttle_time_ms": 0,
        "error_code": error.code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "member_id": member_id,
        "members": [],
    }


def sync_answer(group: Group, assignment: bytes) -> bodies.SyncGroupResponse:
    return {
        "throttle_time_ms": 0,
        "error_code": NONE,
        "protocol_type": group.protocol_type,
        "protocol_name": group.protocol_name,
        "assignment": assignment,
    }


def sync_error(error: KafkaError) -> bodies.SyncGroupResponse:
    return {
        "throttle_time_ms": 0,
        "error_code": error.code,
        "protocol_type": None,
        "protocol_name": None,
        "assignment": b"",
    }
