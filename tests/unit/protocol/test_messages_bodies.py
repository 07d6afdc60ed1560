"""The typed bodies and the msgpack schemas both come from the one declaration."""

from __future__ import annotations

import pytest

from minibroker.protocol.api import SCHEMAS, ApiKey
from minibroker.protocol.kafka.messages import MESSAGES
from minibroker.protocol.messages import ALL_MESSAGES, bodies
from minibroker.protocol.messages.generate import main as generate_main
from minibroker.protocol.messages.generate import source

pytestmark = pytest.mark.timeout(60)


def test_bodies_module_is_what_the_declarations_generate() -> None:
    assert generate_main(["--check"]) == 0


def test_every_declared_message_has_typed_bodies_and_a_route() -> None:
    text = source()
    for key, message in ALL_MESSAGES.items():
        assert f"class {message.name}Request(TypedDict)" in text
        assert f"class {message.name}Response(TypedDict, total=False)" in text
        routes = [r for r in vars(bodies).values() if isinstance(r, bodies.Route)]
        assert key in {route.api_key for route in routes}


def test_msgpack_and_kafka_serve_the_same_declaration() -> None:
    for key, message in MESSAGES.items():
        body = SCHEMAS[ApiKey(key)]
        assert body.name == message.name
        assert {f.name for f in body.request.fields} == {f.body_key for f in message.request.fields}
        assert {f.name for f in body.response.fields} == {
            f.body_key for f in message.response.fields
        }


def test_controller_requests_are_not_on_the_kafka_wire() -> None:
    for key in (ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA):
        assert key in SCHEMAS
        assert int(key) not in MESSAGES
