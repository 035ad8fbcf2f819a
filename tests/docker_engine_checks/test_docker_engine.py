"""``scripts/docker-engine.sh`` and the leak check of :mod:`docker_engine`, on the real engine.

The images are built locally from Debian packages and hold what the Docker tests rely on (a
non-root user ``skill`` of uid 1000, a world-writable sticky ``/tmp``, busybox's applets, bash;
python3 in the Python image). A second private daemon in a directory of its own starts and
stops without touching the session's engine; a daemon that cannot start says why in one line
and exits non-zero. The leak check finds a labelled container and volume created during the
session, and objects without the label only when told to count everything (the private daemon).
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import docker_engine as plugin
from docker_engine import SCRIPT, TEST_LABEL, Engine


def _run(engine: Engine, image: str, command: str, user: str = "") -> str:
    client = engine.client()
    try:
        output = client.containers.run(
            image,
            ["sh", "-c", command],
            user=user or None,
            network_mode="none",
            remove=True,
            labels={TEST_LABEL: "engine-checks"},
        )
    finally:
        client.close()
    return bytes(output).decode()


def test_the_test_image_has_a_non_root_user_a_sticky_tmp_busybox_and_bash(
    docker_engine: Engine,
) -> None:
    output = _run(
        docker_engine,
        docker_engine.image,
        "id; stat -c %a /tmp; bash -c 'echo bash $BASH_VERSION'; awk 'BEGIN { print 6 * 7 }'",
        user="skill",
    )
    lines = output.splitlines()
    assert lines[0].startswith("uid=1000(skill) gid=1000(skill)")
    assert lines[1] == "1777"
    assert lines[2].startswith("bash 5.")
    assert lines[3] == "42"


def test_the_python_image_runs_python3_with_its_standard_library(docker_engine: Engine) -> None:
    output = _run(
        docker_engine,
        docker_engine.python_image,
        "python3 -c 'import json, base64, fnmatch; print(json.dumps([1]))'; python -V",
        user="1000",
    )
    lines = output.splitlines()
    assert lines[0] == "[1]"
    assert lines[1].startswith("Python 3.11.")


def test_building_the_images_again_is_a_no_op(docker_engine: Engine) -> None:
    started = time.monotonic()
    done = subprocess.run(
        ["bash", str(SCRIPT), "image"],
        env={**os.environ, "DOCKER_HOST": docker_engine.host},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "built" not in done.stderr
    assert time.monotonic() - started < 30


def test_a_second_private_daemon_starts_and_stops_without_touching_the_first(
    docker_engine: Engine, tmp_path: Path
) -> None:
    directory = Path("/tmp") / f"srt-dk-{uuid.uuid4().hex[:8]}"  # short: socket paths
    environment = {**os.environ, "SKILLRUNTIME_DOCKER_DIR": str(directory)}
    environment.pop("DOCKER_HOST", None)
    try:
        done = subprocess.run(
            ["bash", str(SCRIPT), "start"],
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        socket = directory / "docker.sock"
        assert socket.is_socket()
        exports = subprocess.run(
            ["bash", str(SCRIPT), "env"],
            env=environment,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f"export DOCKER_HOST=unix://{socket}" in exports.splitlines()
        assert docker_engine_answers(f"unix://{socket}")
    finally:
        stopped = subprocess.run(
            ["bash", str(SCRIPT), "stop"],
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert stopped.returncode == 0, stopped.stderr
    assert not directory.exists()
    assert docker_engine_answers(docker_engine.host)


def docker_engine_answers(host: str) -> bool:
    answers: bool = plugin._answers(host)
    return answers


def test_a_daemon_that_cannot_start_says_why_in_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dockerd").write_text(
        '#!/bin/sh\necho "level=fatal msg=\\"no cgroups here\\"" >&2\nexit 1\n'
    )
    (fake / "dockerd").chmod(0o755)
    directory = Path("/tmp") / f"srt-dk-{uuid.uuid4().hex[:8]}"
    environment = {
        **os.environ,
        "PATH": f"{fake}:{os.environ['PATH']}",
        "SKILLRUNTIME_DOCKER_DIR": str(directory),
    }
    try:
        done = subprocess.run(
            ["bash", str(SCRIPT), "start"],
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=environment, check=False, timeout=120)
    assert done.returncode != 0
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("docker-engine: the private Docker daemon did not start:")
    assert "no cgroups here" in lines[0]


def test_the_leak_check_finds_labelled_containers_and_volumes_of_the_session(
    docker_engine: Engine,
) -> None:
    since = time.time()
    name = f"leak-check-{uuid.uuid4().hex[:8]}"
    client = docker_engine.client()
    try:
        client.containers.create(docker_engine.image, ["true"], name=name, labels={TEST_LABEL: "x"})
        client.containers.create(docker_engine.image, ["true"], name=f"{name}-unlabelled")
        client.volumes.create(name, labels={TEST_LABEL: "x"})
        containers, volumes = plugin.leaks(docker_engine.host, since)
        assert name in containers
        assert f"{name}-unlabelled" not in containers
        assert name in volumes
        assert f"{name}-unlabelled" in plugin.leaks(docker_engine.host, since, everything=True)[0]
        assert name not in plugin.leaks(docker_engine.host, time.time() + 5)[0]
    finally:
        plugin.remove(docker_engine.host, [name, f"{name}-unlabelled"], [name])
        client.close()
    containers, volumes = plugin.leaks(docker_engine.host, since)
    assert name not in containers
    assert name not in volumes


@pytest.mark.parametrize(
    ("stamp", "seconds"),
    [
        ("2026-12-02T07:05:01.123456789Z", 1796195101.123456),
        ("2026-12-02T07:05:01Z", 1796195101.0),
        ("2026-12-02T07:05:01+00:00", 1796195101.0),
    ],
)
def test_docker_timestamps_are_read_to_the_microsecond(stamp: str, seconds: float) -> None:
    assert plugin._created(stamp) == pytest.approx(seconds, abs=1e-6)
