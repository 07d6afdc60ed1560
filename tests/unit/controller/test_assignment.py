"""Replica assignment (Kafka's rack-unaware algorithm) and CreateTopics validation."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from minibroker.broker.cluster.assignment import (
    assign_replicas_to_brokers,
    validate_new_topic,
    validate_topic_name,
)
from minibroker.protocol.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    KafkaError,
    TopicAlreadyExistsError,
)


def test_fixed_start_index_gives_kafkas_documented_layout() -> None:
    # Five brokers, ten partitions, RF 3: leaders go round-robin; after the first round
    # of five the followers shift by one more broker.
    assignment = assign_replicas_to_brokers(range(5), 10, 3, random.Random(0), fixed_start_index=0)
    assert assignment == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize(
    ("brokers", "partitions", "rf"), [(3, 6, 3), (5, 12, 2), (4, 7, 3), (6, 100, 3), (1, 3, 1)]
)
def test_every_broker_leads_about_the_same_number_and_no_broker_twice_in_a_partition(
    seed: int, brokers: int, partitions: int, rf: int
) -> None:
    broker_ids = [10 + 3 * b for b in range(brokers)]  # ids need not be contiguous
    assignment = assign_replicas_to_brokers(broker_ids, partitions, rf, random.Random(seed))
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(broker_ids)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(b, 0) for b in broker_ids]
    assert max(counts) - min(counts) <= 1
    replicas_per_broker = Counter(r for replicas in assignment.values() for r in replicas)
    total = [replicas_per_broker.get(b, 0) for b in broker_ids]
    assert max(total) - min(total) <= rf


def test_same_seed_gives_same_assignment_and_different_seeds_vary_the_start() -> None:
    first = assign_replicas_to_brokers([1, 2, 3, 4], 8, 3, random.Random(42))
    assert assign_replicas_to_brokers([4, 3, 2, 1], 8, 3, random.Random(42)) == first
    layouts = {
        tuple(map(tuple, assign_replicas_to_brokers([1, 2, 3, 4], 8, 3, random.Random(s)).values()))
        for s in range(30)
    }
    assert len(layouts) > 1


def test_start_partition_id_continues_numbering_for_added_partitions() -> None:
    added = assign_replicas_to_brokers([1, 2, 3], 2, 2, random.Random(1), start_partition_id=6)
    assert sorted(added) == [6, 7]


@pytest.mark.parametrize(
    ("partitions", "rf", "brokers", "error"),
    [
        (0, 1, [1], InvalidPartitionsError),
        (-3, 1, [1], InvalidPartitionsError),
        (1, 0, [1], InvalidReplicationFactorError),
        (1, 3, [1, 2], InvalidReplicationFactorError),
        (1, 1, [], InvalidReplicationFactorError),
    ],
)
def test_assignment_rejects_impossible_requests(
    partitions: int, rf: int, brokers: list[int], error: type[KafkaError]
) -> None:
    with pytest.raises(error):
        assign_replicas_to_brokers(brokers, partitions, rf, random.Random(0))


@pytest.mark.parametrize("name", ["a", "orders", "A.b_c-9", "x" * 249, "..a", "_"])
def test_legal_topic_names_pass(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "é", "a:b", "a\x00"])
def test_illegal_topic_names_are_invalid_topic_errors(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "partitions", "rf", "error", "code"),
    [
        ("bad name", 1, 1, InvalidTopicError, 17),
        ("exists", 1, 1, TopicAlreadyExistsError, 36),
        ("t", 0, 1, InvalidPartitionsError, 37),
        ("t", 1, 0, InvalidReplicationFactorError, 38),
        ("t", 1, 4, InvalidReplicationFactorError, 38),
    ],
)
def test_create_topic_validation_answers_with_kafkas_error_code(
    name: str, partitions: int, rf: int, error: type[KafkaError], code: int
) -> None:
    with pytest.raises(error) as caught:
        validate_new_topic(name, partitions, rf, {1, 2, 3}, {"exists"})
    assert caught.value.code == code


def test_valid_create_topic_request_passes() -> None:
    validate_new_topic("t", 6, 3, {1, 2, 3}, {"other"})
