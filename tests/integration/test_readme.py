"""The README, followed word for word by a new user, works: its Quick start, Tour, Kafka
clients (with their install), Python examples, consumer groups, Operating a cluster,
Offline analysis, Secure cluster and ACLs commands are read from README.md itself (its
fenced blocks, in order) and run in a clean clone of this checkout's HEAD. When the
README and the code drift apart, this fails.

The tests run in file order on one clone and one cluster, each on what the previous left
(the example's topic, the analysis of everything), as a user follows the README.

What the test does differently from a user, and why:
- The cluster is the one ``./scripts/dev-up`` starts (``minibroker dev up``, data in the
  clone's ``.minibroker/``), but on free ports (tests never take fixed ones) and started
  through ``tests.support.cluster.LocalCluster``; ``./scripts/dev-up`` itself would
  ``pip install -e`` the clone into the shared venv. So the Quick start's two commands
  are only checked to exist and parse.
- The clone's ``.venv`` is the venv ``./scripts/dev-up`` leaves (minibroker with its
  ``fast`` extra, no test extras: no Kafka clients), built offline from this checkout's
  (tests/support/venvs.py: no pyspark download), and ``PYTHONPATH`` is the clone, so
  the commands run the clone's code. A ``pip install`` the README gives runs for real,
  offline: pip finds only wheels made from this venv's distributions, and builds
  minibroker without build isolation (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``,
  ``PIP_NO_BUILD_ISOLATION``).
- The secure cluster is started as the README says, ``./scripts/dev-up --secure`` in the
  first terminal's state (no venv on PATH), with free ports appended; stopping the plain
  one first is the test's Ctrl-C (SIGTERM to its supervisor).
- The CLI has no environment variable for its bootstrap servers, so the shell blocks run
  with a ``minibroker`` shell function that appends ``--bootstrap-server <the test's
  cluster>`` to client commands, and ``127.0.0.1:9092`` in the Python examples is
  replaced by the cluster's address (``127.0.0.1:19092``, the Kafka listeners', by
  theirs; ``127.0.0.1:2181``, ZooKeeper's, by its). Nothing else is changed.
- ``PATH`` loses every directory holding a ``minibroker`` command, so the Tour's own
  ``source .venv/bin/activate`` is what makes ``minibroker`` found.
- ``XDG_CACHE_HOME`` points into the test's tmp dir, where ``minibroker analyze`` writes
  its report by default, and ``MINIBROKER_HOME`` too, where `dev up` lists clusters.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.broker_process import ROOT
from tests.support.cluster import LocalCluster
from tests.support.readme import README, block, commands, with_bootstrap
from tests.support.venvs import fast_only_venv, wheelhouse

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_KAFKA_BOOTSTRAP = "127.0.0.1:19092"  # dev up's Kafka listeners: 10,000 above
DEFAULT_ZOOKEEPER = "127.0.0.1:2181"
CLIENT_PROPERTIES = ".minibroker/client.properties"  # where `dev up --secure` writes the login
TOUR_TIMEOUT_S = 180.0
EXAMPLE_TIMEOUT_S = 120.0
ANALYZE_TIMEOUT_S = 600.0  # a Spark JVM and one job over a few small segments, 2 busy cores


@dataclass
class Clone:
    path: Path
    env: dict[str, str]
    cluster: LocalCluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def kafka_bootstrap(self) -> str:
        return self.cluster.kafka_bootstrap

    def bash(self, script: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """Run ``script`` as a user would type it, plus the bootstrap shell function."""
        return subprocess.run(
            ["bash", "-c", with_bootstrap(script, self.bootstrap)],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _user_path() -> str:
    """PATH without any directory that has a ``minibroker`` command (the venv's bin)."""
    parts = os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
    return os.pathsep.join(p for p in parts if p and not (Path(p) / "minibroker").exists())


def kafka_clients() -> list[str]:
    """The distributions of the ``kafka-clients`` extra (pyproject.toml)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["kafka-clients"]
    return [re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0] for requirement in extra]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clone]:
    root = tmp_path_factory.mktemp("readme")
    path = root / "minibroker"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(path)], check=True, timeout=120)
    fast_only_venv(path / ".venv", leave_out=kafka_clients())
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONHOME", "SPARK_LOCAL_IP")
        and not k.startswith(("MINIBROKER_", "PIP_"))
    }
    env.update(
        PATH=_user_path(),
        PYTHONPATH=str(path),
        XDG_CACHE_HOME=str(root / "cache"),
        MINIBROKER_HOME=str(root / "home"),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheelhouse(root / "wheels", kafka_clients())),
        PIP_NO_BUILD_ISOLATION="0",  # pip's spelling of --no-build-isolation
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    with LocalCluster(path / ".minibroker", kafka_listeners=True) as cluster:
        yield Clone(path, env, cluster)


def test_quick_start_is_two_scripts_that_exist_and_parse() -> None:
    quick = commands(block("Quick start", "sh"))

    assert quick == ["./scripts/dev-up", "./scripts/test"]
    for command in quick:
        script = ROOT / command
        assert os.access(script, os.X_OK), f"{command} is not executable"
        subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)


def test_the_tour_runs_as_written(clone: Clone) -> None:
    tour = block("Tour", "sh")

    done = clone.bash(tour, TOUR_TIMEOUT_S)

    assert done.returncode == 0, f"the Tour failed:\n{done.stdout}\n{done.stderr}"
    # the consume template '%p/%o %k=%v': partition/offset key=value
    consumed = sorted(re.findall(r"^\d+/\d+ (\w+=.+)$", done.stdout, re.MULTILINE))
    assert consumed == ["alice=paid", "alice=signed up", "bob=signed up"]


def test_the_kafka_clients_section_runs_as_written(clone: Clone) -> None:
    shell = block("Kafka clients", "sh")
    example = block("Kafka clients", "python")
    assert DEFAULT_KAFKA_BOOTSTRAP in shell and DEFAULT_KAFKA_BOOTSTRAP in example
    (clone.path / "kafka_example.py").write_text(
        example.replace(DEFAULT_KAFKA_BOOTSTRAP, clone.kafka_bootstrap)
    )
    shell = shell.replace(DEFAULT_KAFKA_BOOTSTRAP, clone.kafka_bootstrap)

    before = clone.bash("source .venv/bin/activate\npython -c 'import kafka'", TOUR_TIMEOUT_S)
    assert "No module named 'kafka'" in before.stderr  # what `dev up` leaves has no clients

    done = clone.bash(
        f"source .venv/bin/activate\n{shell}\npython kafka_example.py", TOUR_TIMEOUT_S
    )

    assert done.returncode == 0, f"the Kafka clients section failed:\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    # kcat's '%p/%o %k=%s %h' shows its own records and header; the CLI reads the same
    from_kcat = sorted(re.findall(r"^\d+/\d+ (k\d=\w+ origin=kcat)$", done.stdout, re.M))
    assert from_kcat == ["k1=hello origin=kcat", "k2=world origin=kcat"]
    assert sorted(line for line in lines if line in ("hello", "world")) == ["hello", "world"]
    cluster_info = next(line for line in lines if line.startswith("{"))
    kafka_addresses = sorted(b["kafka"] for b in json.loads(cluster_info)["brokers"])
    assert kafka_addresses == sorted(clone.kafka_bootstrap.split(","))


def test_the_python_example_runs_after_the_tour_and_ends(clone: Clone) -> None:
    example = block("Python client", "python")
    assert DEFAULT_BOOTSTRAP in example
    (clone.path / "example.py").write_text(example.replace(DEFAULT_BOOTSTRAP, clone.bootstrap))

    done = clone.bash("source .venv/bin/activate\npython example.py", EXAMPLE_TIMEOUT_S)

    assert done.returncode == 0, f"example.py failed:\n{done.stdout}\n{done.stderr}"
    assert "b'value'" in done.stdout and "b'v2'" in done.stdout


def test_analyze_reads_every_log_dir_of_the_dev_cluster_quietly(clone: Clone) -> None:
    first = commands(block("Offline analysis", "sh"))[0]
    assert first == "minibroker analyze", first
    log_dirs = sorted((clone.path / ".minibroker").glob("broker-*/logs-*"))
    assert len(log_dirs) == 6

    done = clone.bash(f"source .venv/bin/activate\n{first}", ANALYZE_TIMEOUT_S)

    assert done.returncode == 0, f"analyze failed:\n{done.stdout}\n{done.stderr}"
    read = done.stdout.split("\nRead:\n", 1)[1].split("\nSegment files", 1)[0]
    assert sorted(line.split(":")[0].strip() for line in read.splitlines()) == [
        str(d.resolve()) for d in log_dirs
    ]
    # 3 records of the Tour, 3 of the Kafka clients and 2 of the example, each on 3 replicas
    header = next(line for line in done.stdout.splitlines() if "segment report:" in line)
    assert "6 log dir(s)" in header and ", 24 records," in header, header
    assert done.stderr == ""  # Spark's log lines went to spark.log
    reports = list((clone.path.parent / "cache" / "minibroker" / "reports").iterdir())
    assert len(reports) == 1 and (reports[0] / "summary.txt").is_file()
    spark_log = (reports[0] / "spark.log").read_text()
    assert "Using Spark's default log4j profile" in spark_log
    # on loopback, whatever the host name resolves to, and no web UI nobody asked for
    assert "BlockManagerId(driver, 127.0.0.1," in spark_log
    assert "SparkUI" not in spark_log and "resolves to a loopback address" not in spark_log
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone.path, capture_output=True, text=True
    )
    assert sorted(status.stdout.splitlines()) == ["?? example.py", "?? kafka_example.py"]


def test_readme_links_no_document_outside_the_repository() -> None:
    text = README.read_text(encoding="utf-8")

    assert "../" not in text
    for linked in re.findall(r"`((?:docs|deploy|scripts|docker)/[\w./-]+)`", text):
        if linked != "docs/architecture.md":  # written by the integrator alongside
            assert (ROOT / linked).exists(), f"README.md names {linked}, which does not exist"


def test_the_consumer_groups_example_runs_as_written(clone: Clone) -> None:
    # After the analysis: the group's commits add records to __consumer_offsets.
    shell = block("Consumer groups", "sh")
    example = block("Consumer groups", "python")
    assert DEFAULT_BOOTSTRAP in example
    (clone.path / "groups_example.py").write_text(
        example.replace(DEFAULT_BOOTSTRAP, clone.bootstrap)
    )

    done = clone.bash(
        f"source .venv/bin/activate\n{shell}\npython groups_example.py", TOUR_TIMEOUT_S
    )

    assert done.returncode == 0, f"the groups example failed:\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    # both consumes printed the 4 values; list shows the group; Python read and committed
    assert sorted(line for line in lines if line.startswith("o")) == ["o1", "o1", "o2", "o2",
        "o3", "o3", "o4", "o4"]  # fmt: skip
    assert "billing" in lines
    assert "[('orders', 0), ('orders', 1)]" in lines
    committed = [int(n) for n in lines[-1].replace("None", "0").split()]
    assert sum(committed) == 4, lines[-1]


def test_the_transactions_example_runs_as_written(clone: Clone) -> None:
    shell = block("Transactions", "sh")
    example = block("Transactions", "python")
    assert DEFAULT_BOOTSTRAP in example
    (clone.path / "transactions_example.py").write_text(
        example.replace(DEFAULT_BOOTSTRAP, clone.bootstrap)
    )

    done = clone.bash(
        f"source .venv/bin/activate\n{shell}\npython transactions_example.py", TOUR_TIMEOUT_S
    )

    assert done.returncode == 0, f"the transactions example failed:\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("p")][:3] == ["p1", "p2", "p3"]
    assert any("ledger-writer" in line and "CompleteCommit" in line for line in lines)
    assert lines[-1] == "[b'p1', b'p2', b'p3', b'p4']"


def test_operating_a_cluster_runs_as_written(clone: Clone) -> None:
    # After the groups example: the plans and proposals it writes are the user's files.
    operating = block("Operating a cluster", "sh")

    done = clone.bash(f"source .venv/bin/activate\n{operating}", TOUR_TIMEOUT_S)

    assert done.returncode == 0, f"Operating a cluster failed:\n{done.stdout}\n{done.stderr}"
    plan = json.loads((clone.path / "plan.json").read_text())
    assert plan["partitions"][0]["log_dirs"][0] == str(clone.path / ".minibroker/broker-3/logs-1")
    proposed = json.loads((clone.path / "proposed.json").read_text())
    assert {p["topic"] for p in proposed["partitions"]} == {"events"}
    described = clone.bash(
        "source .venv/bin/activate\nminibroker topic describe events --format json", 60
    )
    (events,) = json.loads(described.stdout)
    assert {tuple(p["isr"]) != () for p in events["partitions"]} == {True}
    assert "payload: " in done.stdout  # dump-log --print-data-log found broker 1's segment


def test_the_secure_cluster_and_its_acls_run_as_written(clone: Clone) -> None:
    first_terminal = commands(block("Secure cluster", "sh", 0))
    second_terminal = block("Secure cluster", "sh", 1)
    acls = block("ACLs", "sh")
    assert first_terminal == ["./scripts/dev-up --secure"]
    assert CLIENT_PROPERTIES in second_terminal and CLIENT_PROPERTIES in acls
    clone.cluster.stop()  # Ctrl-C in the first terminal

    # The first terminal never activated the venv: the README's command must work there.
    secure = LocalCluster(
        clone.path / ".minibroker",
        kafka_listeners=True,
        command=["bash", "-c", f'exec {first_terminal[0]} "$@"', "first-terminal"],
        cwd=clone.path,
        env=clone.env,
    )
    with secure:
        zookeeper = f"127.0.0.1:{secure.state['zookeeper']['port']}"
        second_terminal = second_terminal.replace(DEFAULT_KAFKA_BOOTSTRAP, secure.kafka_bootstrap)
        second_terminal = second_terminal.replace(DEFAULT_ZOOKEEPER, zookeeper)
        script = f"source .venv/bin/activate\n{second_terminal}\n{acls}"
        done = subprocess.run(
            ["bash", "-c", with_bootstrap(script, secure.bootstrap)],
            cwd=clone.path, env=clone.env, capture_output=True, text=True,
            timeout=TOUR_TIMEOUT_S, check=False,
        )  # fmt: skip

    assert done.returncode == 0, f"the secure cluster failed:\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert lines.count("paid") == 2  # the bundled consumer and kcat read the record
    assert {"admin", "bob", "broker"} <= {line.split()[0] for line in lines if line.strip()}
    listed = next(json.loads(line) for line in lines if line.startswith("[{"))  # acl list
    # what applies to topic orders-eu: alice's prefixed grant on orders-, not bob's orders
    assert {(b["principal"], b["operation"], b["pattern_type"]) for b in listed} == {
        ("User:alice", "Read", "PREFIXED"),
        ("User:alice", "Describe", "PREFIXED"),
    }
