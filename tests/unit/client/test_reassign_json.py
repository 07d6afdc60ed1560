"""Kafka's reassignment JSON: parsing, the one-line errors, and --generate's proposal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minibroker.broker.cluster.assignment import assign_replicas_to_brokers
from minibroker.client.reassignment import (
    PartitionMove,
    ReassignmentInputError,
    assignment_json,
    check_against_cluster,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    propose,
)
from minibroker.command.main import main


def doc(*partitions: dict[str, object]) -> str:
    return json.dumps({"version": 1, "partitions": list(partitions)})


def test_log_dirs_are_optional_and_any_means_the_broker_chooses() -> None:
    moves = parse_reassignment(
        doc(
            {"topic": "t", "partition": 0, "replicas": [1, 2]},
            {"topic": "t", "partition": 1, "replicas": [2, 3], "log_dirs": ["any", "/d/1"]},
        )
    )
    assert moves == [
        PartitionMove("t", 0, (1, 2), (None, None)),
        PartitionMove("t", 1, (2, 3), (None, "/d/1")),
    ]
    assert moves[1].dir_moves() == {("t", 1, 3): "/d/1"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"version": 2, "partitions": []}', "unsupported version"),
        ('{"version": 1}', 'non-empty "partitions"'),
        (doc({"partition": 0, "replicas": [1]}), 'needs a "topic"'),
        (doc({"topic": "t", "partition": "0", "replicas": [1]}), "must be an integer"),
        (doc({"topic": "t", "partition": 0, "replicas": []}), "non-empty list"),
        (doc({"topic": "t", "partition": 0, "replicas": [1, 1]}), "repeat a broker"),
        (
            doc({"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}),
            "log_dirs has 1 entries but replicas has 2",
        ),
        (
            doc({"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["data/0"]}),
            'log dir "data/0" is not "any" or an absolute path',
        ),
        (
            doc(
                {"topic": "t", "partition": 0, "replicas": [1]},
                {"topic": "t", "partition": 0, "replicas": [2]},
            ),
            "t-0 is listed twice",
        ),
    ],
)
def test_bad_reassignment_json_is_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(ReassignmentInputError, match=message.replace("(", r"\(")) as info:
        parse_reassignment(text)
    assert "\n" not in str(info.value)


def test_unknown_topics_partitions_and_brokers_are_found_before_anything_is_sent() -> None:
    move = [PartitionMove("t", 0, (1, 9), (None, None))]
    with pytest.raises(ReassignmentInputError, match="topic 'nope' does not exist"):
        check_against_cluster([PartitionMove("nope", 0, (1,), (None,))], {"t": 2}, [1, 2])
    with pytest.raises(ReassignmentInputError, match="has 2 partitions"):
        check_against_cluster([PartitionMove("t", 5, (1,), (None,))], {"t": 2}, [1, 2])
    with pytest.raises(ReassignmentInputError, match=r"unknown broker\(s\) \[9\]"):
        check_against_cluster(move, {"t": 2}, [1, 2])


def test_topics_to_move_and_broker_list() -> None:
    assert parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}') == [
        "a",
        "b",
    ]
    assert parse_broker_list("1,2,3") == [1, 2, 3]
    with pytest.raises(ReassignmentInputError):
        parse_broker_list("1,x")
    with pytest.raises(ReassignmentInputError):
        parse_topics_to_move('{"version":1,"topics":[{}]}')


def test_generate_spreads_each_topic_over_the_listed_brokers_keeping_its_factor() -> None:
    import random

    current = {("a", 0): (1, 2), ("a", 1): (2, 1), ("b", 0): (1,)}
    rng = random.Random(7)
    proposed = propose(
        current, ["a"], [3, 4, 5], lambda b, n, rf: assign_replicas_to_brokers(b, n, rf, rng)
    )
    assert set(proposed) == {("a", 0), ("a", 1)}
    for replicas in proposed.values():
        assert len(replicas) == 2 and set(replicas) <= {3, 4, 5}
    with pytest.raises(ReassignmentInputError, match="replication factor 2"):
        propose(current, ["a"], [3], lambda b, n, rf: {})
    rendered = assignment_json(proposed)
    assert rendered["version"] == 1
    assert rendered["partitions"][0]["log_dirs"] == ["any", "any"]


@pytest.mark.parametrize(
    "content",
    [
        "{broken",
        doc({"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["relative/dir"]}),
        doc({"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/a"]}),
    ],
)
def test_the_cli_reports_bad_files_in_one_line_with_exit_code_1(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "moves.json"
    path.write_text(content)
    code = main(["reassign", "--execute", "--reassignment-json-file", str(path)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("minibroker reassign: error:")


def test_the_cli_needs_a_file_for_execute_and_a_broker_list_for_generate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["reassign", "--execute"]) == 2
    assert main(["reassign", "--generate", "--topics-to-move-json-file", "x"]) == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["reassign", "--execute", "--verify"])
    assert exit_info.value.code == 2
    capsys.readouterr()
