"""Client quotas without a network: which entity's quota applies (Kafka's order), the
token bucket's throttle, the filters of DescribeClientQuotas, the entity znode paths."""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.broker.admin.client_quota_apis import matches, parse_entity
from minibroker.broker.quotas.client_quotas import PRODUCER_BYTE_RATE, ClientQuotas
from minibroker.protocol.errors import InvalidRequestError
from minibroker.zk.client_quotas import entity_path

USER_ALICE = (("user", "alice"),)
ANY_USER = (("user", None),)
CLIENT_APP = (("client-id", "app"),)
ALICE_APP = (("user", "alice"), ("client-id", "app"))


def quotas(*configs: tuple[Any, float], clock: list[float] | None = None) -> ClientQuotas:
    now = clock if clock is not None else [0.0]
    found = ClientQuotas(window_num=2, window_s=1.0, clock=lambda: now[0])
    found.update({entity: {PRODUCER_BYTE_RATE: value} for entity, value in configs})
    return found


def test_the_most_specific_entity_wins_and_names_the_metric() -> None:
    q = quotas((ALICE_APP, 1), (USER_ALICE, 2), (ANY_USER, 3), (CLIENT_APP, 4))
    assert q.quota(PRODUCER_BYTE_RATE, "alice", "app") == (1, ("alice", "app"))
    assert q.quota(PRODUCER_BYTE_RATE, "alice", "other") == (2, ("alice", ""))
    assert q.quota(PRODUCER_BYTE_RATE, "bob", "app") == (3, ("bob", ""))  # a default: bob's own
    assert quotas((CLIENT_APP, 4)).quota(PRODUCER_BYTE_RATE, "bob", "app") == (4, ("", "app"))
    assert quotas().quota(PRODUCER_BYTE_RATE, "bob", "app") is None
    assert not quotas().active


def test_a_client_within_its_burst_is_not_throttled_then_waits_for_its_debt() -> None:
    clock = [0.0]
    q = quotas((CLIENT_APP, 1000.0), clock=clock)  # burst: 2 windows of 1 s = 2000 bytes
    assert q.record(PRODUCER_BYTE_RATE, "", "app", 2000) == 0
    assert q.record(PRODUCER_BYTE_RATE, "", "app", 500) == pytest.approx(500.0)  # ms
    clock[0] = 1.0  # 1000 bytes refilled: 500 ahead again
    assert q.record(PRODUCER_BYTE_RATE, "", "app", 100) == 0
    assert q.record(PRODUCER_BYTE_RATE, "", "nobody", 10**9) == 0


def filter_(*components: tuple[str, int, str | None], strict: bool = False) -> Any:
    return {
        "components": [{"entity_type": k, "match_type": t, "match": m} for k, t, m in components],
        "strict": strict,
    }


def test_describe_filters_match_names_defaults_and_any() -> None:
    assert matches(USER_ALICE, filter_(("user", 0, "alice")))
    assert not matches(ANY_USER, filter_(("user", 0, "alice")))
    assert matches(ANY_USER, filter_(("user", 1, None)))
    assert matches(ALICE_APP, filter_(("user", 2, None)))
    assert not matches(ALICE_APP, filter_(("user", 2, None), strict=True))
    assert not matches(CLIENT_APP, filter_(("user", 2, None)))


def test_entities_are_user_first_and_their_paths_are_kafkas() -> None:
    parsed = parse_entity(
        [
            {"entity_type": "client-id", "entity_name": "a/b"},
            {"entity_type": "user", "entity_name": None},
        ]
    )
    assert parsed == (("user", None), ("client-id", "a/b"))
    assert entity_path(parsed) == "users/<default>/clients/a%2Fb"
    with pytest.raises(InvalidRequestError):
        parse_entity([{"entity_type": "ip", "entity_name": "1.2.3.4"}])


def header(api_key: int, client_id: str = "app") -> Any:
    from minibroker.protocol.api import RequestHeader
    from minibroker.protocol.session import ConnectionMute, Session

    return RequestHeader(
        api_key, 0, 1, client_id, Session("User:alice", "", "", None, ConnectionMute())
    )


async def test_an_exceeded_quota_throttles_the_answer_and_mutes_the_connection() -> None:
    import trio

    from minibroker.broker.quotas.client_quotas import enforce

    q = quotas((CLIENT_APP, 1000.0))  # burst 2000 bytes
    produce = {"topics": [{"partitions": [{"records": b"x" * 3000}]}]}
    request = header(0)
    answer: dict[str, Any] = {"responses": []}
    enforce(q, request, produce, answer, 0.0)
    assert answer["throttle_time_ms"] == 1000  # 1000 bytes of debt at 1000 bytes/s
    assert request.session.mute.until == pytest.approx(trio.current_time() + 1.0, abs=0.1)

    follower = header(1)
    fetched = {"topics": [{"partitions": [{"records": b"x" * 10**6}]}]}
    enforce(q, follower, {"replica_id": 2}, fetched, 0.0)
    assert "throttle_time_ms" not in fetched and follower.session.mute.until == 0.0
