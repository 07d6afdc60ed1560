"""`minibroker reassign` on a log-dir move that is still copying: --verify reports it in
progress, --cancel drops it (the -future copy goes, the replica stays where it was)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minibroker.client.admin import Admin
from tests.integration.test_log_dir_moves import one_broker, replicas_in, topic_of_400_kb
from tests.support.cli import run_cli


@pytest.mark.timeout(120)
async def test_verify_reports_a_running_dir_move_and_cancel_drops_it(
    tmp_path: Path, zk_connect: str
) -> None:
    # 20 kB/s: a 400 kB log takes 20 s to copy, longer than the test needs.
    async with one_broker(
        tmp_path, zk_connect, replica_alter_log_dirs_io_max_bytes_per_second=20_000
    ) as (broker, dirs):
        bootstrap = f"127.0.0.1:{broker.port}"
        async with Admin(bootstrap) as admin:
            home = await topic_of_400_kb(admin, broker, "c")
            other = next(d for d in dirs if d != home)
            moves = tmp_path / "moves.json"
            moves.write_text(
                json.dumps(
                    {
                        "version": 1,
                        "partitions": [
                            {
                                "topic": "c",
                                "partition": 0,
                                "replicas": [1],
                                "log_dirs": [str(other)],
                            }
                        ],
                    }
                )
            )
            executed = await run_cli(
                "reassign", "--execute", "--reassignment-json-file", str(moves), bootstrap=bootstrap
            )
            assert executed.returncode == 0, executed.stderr
            assert "Successfully started log directory move(s) for c-0-1" in executed.stdout
            verified = await run_cli(
                *("reassign", "--verify", "--no-wait", "--reassignment-json-file", str(moves)),
                bootstrap=bootstrap,
            )
            assert verified.returncode == 1
            assert "is still in progress" in verified.stdout
            cancelled = await run_cli(
                "reassign", "--cancel", "--reassignment-json-file", str(moves), bootstrap=bootstrap
            )
            assert cancelled.returncode == 0, cancelled.stderr
            assert "Log dir move of c-0 on broker 1 cancelled" in cancelled.stdout
            assert replicas_in(await admin.describe_log_dirs(), "c") == {
                str(home): [False],
                str(other): [],
            }
