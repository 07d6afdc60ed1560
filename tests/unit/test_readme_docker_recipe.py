"""The README's container recipes agree with the compose files, the Dockerfile and
scripts/docker-smoke (no engine needed: ``docker-compose config`` resolves the files).

The no-registry recipe must build the tag the compose files run, FROM the base image the
first command builds, with Prometheus from that same base image; scripts/docker-smoke
runs the same commands (with its own tag, project and ports).
"""

from __future__ import annotations

import re
import shlex

import pytest

from tests.support.readme import block, commands
from tests.unit.test_compose_config import REPO, compose_config

pytestmark = pytest.mark.timeout(120)


def _recipe() -> list[list[str]]:
    return [shlex.split(line) for line in commands(block("Containers", "sh", index=2))]


def test_readme_starts_the_compose_cluster_with_compose_v2_and_names_v1() -> None:
    first = block("Containers", "sh")

    assert commands(first) == ["docker compose up -d"]
    assert "docker-compose up -d" in first


def test_no_registry_recipe_builds_the_image_compose_runs_from_the_base_it_builds() -> None:
    base_build, image_build, export_base, export_prometheus, up = _recipe()
    base = base_build[1]

    assert base_build[0] == "docker/build-base-image" and (REPO / base_build[0]).is_file()
    assert image_build[:2] == ["docker", "build"] and image_build[-1] == "."
    assert f"BASE_IMAGE={base}" in image_build and "--network=host" in image_build
    tag = image_build[image_build.index("-t") + 1]
    env = dict(item.split("=", 1) for item in export_base[1:] + export_prometheus[1:])
    assert env == {"MINIBROKER_BASE_IMAGE": base, "MINIBROKER_PROMETHEUS_IMAGE": base}

    files = [up[i + 1] for i, word in enumerate(up) if word == "-f"]
    config = compose_config(*files, env=env)

    services = config["services"]
    assert {s["image"] for n, s in services.items() if n != "prometheus"} == {tag}
    assert services["prometheus"]["image"] == base
    assert {s["build"]["args"]["BASE_IMAGE"] for s in services.values() if "build" in s} == {base}
    assert up[:2] == ["docker", "compose"] and up[-2:] == ["up", "-d"]


def test_docker_smoke_runs_the_readme_recipe() -> None:
    smoke = (REPO / "scripts" / "docker-smoke").read_text(encoding="utf-8")
    *_, up = _recipe()

    assert 'docker/build-base-image "$BASE_IMAGE"' in smoke
    assert re.search(
        r'docker build --network=host .*--build-arg "BASE_IMAGE=\$BASE_IMAGE" -t "\$IMAGE" \.',
        smoke,
    )
    assert 'export MINIBROKER_PROMETHEUS_IMAGE="$BASE_IMAGE"' in smoke
    assert " ".join(up[2:-2]) in smoke  # the same -f files


def test_docker_smoke_gives_each_run_its_own_project_and_image_tag() -> None:
    smoke = (REPO / "scripts" / "docker-smoke").read_text(encoding="utf-8")

    assert re.search(r'^PROJECT="minibroker-smoke-\$RUN_ID"$', smoke, re.M)
    assert re.search(
        r'^IMAGE="\$\{MINIBROKER_SMOKE_IMAGE:-minibroker:smoke-\$RUN_ID\}"$', smoke, re.M
    )
    assert "$$" in smoke.split("RUN_ID=", 1)[1].splitlines()[0]  # the pid: unique per run
