"""Binds that would bring an engine's socket into the container are refused when the runtime is
built (docs/docker-runtime.md, "binds"): the standard sockets, the socket the runtime itself
talks to, a ``DOCKER_HOST`` unix socket, a directory holding one, and a link to either."""

from __future__ import annotations

import posixpath
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillruntime.docker import DockerSkillRuntime
from skillruntime.docker.security import check_binds

IMAGE = "skillruntime-test:latest"


@pytest.fixture
def engine_socket(tmp_path: Path) -> Iterator[Path]:
    """A listening unix socket standing for an engine's, under ``tmp_path/engine``."""
    directory = tmp_path / "engine"
    directory.mkdir()
    path = directory / "docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    try:
        yield path
    finally:
        server.close()


def _build(engine_socket: Path, *binds: str) -> DockerSkillRuntime:
    return DockerSkillRuntime(image=IMAGE, docker_host=f"unix://{engine_socket}", binds=binds)


def test_a_bind_of_a_directory_above_the_runtimes_own_socket_is_refused(
    engine_socket: Path, tmp_path: Path
) -> None:
    # The held-out repro: the private engine under /tmp, and /tmp bound into the container.
    for source in (tmp_path, engine_socket.parent, engine_socket):
        with pytest.raises(ValueError, match="engine socket"):
            _build(engine_socket, f"{source}:/host")


def test_a_link_to_the_socket_or_its_directory_is_resolved_and_refused(
    engine_socket: Path, tmp_path: Path
) -> None:
    (tmp_path / "to-dir").symlink_to(engine_socket.parent)
    (tmp_path / "to-socket").symlink_to(engine_socket)
    for link in ("to-dir", "to-socket"):
        with pytest.raises(ValueError, match="engine socket"):
            _build(engine_socket, f"{tmp_path / link}:/host:ro")


def test_the_docker_host_socket_is_refused_too(
    engine_socket: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{other}/engine-b.sock")
    with pytest.raises(ValueError, match="engine socket"):
        _build(engine_socket, f"{other}:/host")


def test_an_unrelated_bind_is_accepted(engine_socket: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    runtime = _build(engine_socket, f"{data}:/data:ro")
    runtime.close()


_NAME = st.text(alphabet="abcdefgh-_.", min_size=1, max_size=6).filter(
    lambda name: name not in {".", ".."}
)


@given(
    socket_parts=st.lists(_NAME, min_size=1, max_size=5),
    cut=st.integers(min_value=0, max_value=5),
    other=st.lists(_NAME, min_size=1, max_size=4),
)
def test_any_directory_on_the_way_to_a_socket_is_refused_and_no_other(
    socket_parts: list[str], cut: int, other: list[str]
) -> None:
    sock = "/" + "/".join([*socket_parts, "engine.sock"])
    above = "/" + "/".join(socket_parts[: min(cut, len(socket_parts))])
    with pytest.raises(ValueError, match="engine socket"):
        check_binds([f"{above}:/x"], sockets=[sock])
    elsewhere = "/zz/" + "/".join(other)
    holds = sock == elsewhere or sock.startswith(elsewhere + "/")
    standard = any(
        known.startswith(elsewhere.rstrip("/") + "/")
        for known in ("/var/run/docker.sock", "/run/docker.sock")
    )
    if not holds and not standard and posixpath.basename(elsewhere) != "engine.sock":
        check_binds([f"{elsewhere}:/x"], sockets=[sock])
