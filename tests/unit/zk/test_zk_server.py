"""Locating Java and pyspark's ZooKeeper jars, with one-line errors when missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minibroker.zk.server import (
    ZooKeeperError,
    find_jars_dir,
    find_java,
    zookeeper_classpath,
)


def test_pyspark_jars_dir_holds_the_zookeeper_server_jar() -> None:
    assert any(find_jars_dir().glob("zookeeper-[0-9]*.jar"))


def test_missing_java_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ZooKeeperError, match="java not found") as info:
        find_java()
    assert "\n" not in str(info.value)


def test_java_home_wins_over_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert find_java() == str(java)


def test_missing_pyspark_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ZooKeeperError, match="pyspark is not installed"):
        find_jars_dir()


def test_class_path_holds_zookeeper_and_its_dependencies_only() -> None:
    names = [Path(jar).name for jar in zookeeper_classpath(find_jars_dir()).split(os.pathsep)]
    assert any(n.startswith("zookeeper-jute-") for n in names)
    assert any(n.startswith("zookeeper-3") for n in names)
    assert any(n.startswith("log4j-slf4j2-impl-") for n in names)
    assert not any(n.startswith("spark-") or "tcnative" in n for n in names)
