"""The Docker runtime's file operations keep the contracts of docs/security.md and
docs/docker-runtime.md where a real engine once broke them: links out of the workspace on a
delete or a directory creation, a file rewritten while it is read, a loop of links, special
files without a conversation, and a read-only root file system without a conversation."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import docker_fixtures
from docker_fixtures import IMAGE, suite_labels
from skillruntime.core.errors import (
    InvalidPathError,
    NotRegularFileError,
    SkillRuntimeError,
    WorkspaceEscapeError,
)
from skillruntime.core.models import SkillExecutionRequest, SkillPreparationRequest
from skillruntime.core.skills import discover_skills
from skillruntime.docker import DockerSkillRuntime

docker_run = docker_fixtures.docker_run


def _run(runtime: DockerSkillRuntime, command: str, **extra: Any) -> Any:
    return runtime.execute(SkillExecutionRequest(command=command, **extra))


@pytest.fixture
def conversation(docker_run: str) -> Iterator[DockerSkillRuntime]:
    runtime = DockerSkillRuntime(
        image=IMAGE, labels=suite_labels(docker_run), conversation_id=f"contract-{docker_run}"
    )
    try:
        yield runtime
    finally:
        with contextlib.suppress(SkillRuntimeError):
            runtime.destroy_conversation()
        runtime.close()


def test_delete_and_make_directory_refuse_a_link_out_of_the_workspace(
    conversation: DockerSkillRuntime,
) -> None:
    fs = conversation.get_file_system()
    _run(
        conversation,
        "mkdir -p /tmp/out ld && echo precious > /tmp/out/precious.txt && ln -s /tmp/out ld/h",
    )
    with pytest.raises(WorkspaceEscapeError):
        fs.delete("ld/h/precious.txt")
    with pytest.raises(WorkspaceEscapeError):
        fs.make_directory("ld/h/n")
    fs.delete("ld/h")  # the link itself is inside: it goes, not what it points to
    assert fs.stat("ld/h") is None
    left = _run(conversation, "cat /tmp/out/precious.txt; test -e /tmp/out/n || echo no-n")
    assert left.stdout == "precious\nno-n\n"


def test_a_file_rewritten_while_it_is_read_gives_content_or_a_typed_error(
    conversation: DockerSkillRuntime,
) -> None:
    fs = conversation.get_file_system()
    full = "".join(f"{number}\n" for number in range(1, 20001))
    _run(conversation, "seq 1 20000 > log.txt; rm -f stop")
    done = threading.Event()

    def rewrite() -> None:
        try:
            _run(
                conversation,
                "while [ ! -e stop ]; do seq 1 20000 > log.txt; done",
                timeout_seconds=60,
            )
        finally:
            done.set()

    thread = threading.Thread(target=rewrite, daemon=True)
    thread.start()
    try:
        for _ in range(40):
            try:
                text = fs.read_text("log.txt")
            except SkillRuntimeError:
                continue  # typed: never a raw archive error
            assert full.startswith(text)
    finally:
        _run(conversation, "touch stop")
        assert done.wait(60)


def test_a_loop_of_links_is_an_invalid_path(conversation: DockerSkillRuntime) -> None:
    fs = conversation.get_file_system()
    _run(conversation, "ln -s b a && ln -s a b")
    with pytest.raises(InvalidPathError):
        fs.read_text("a")
    with pytest.raises(InvalidPathError):
        fs.stat("a")


def test_special_files_without_a_conversation_are_special(docker_run: str) -> None:
    with DockerSkillRuntime(image=IMAGE, labels=suite_labels(docker_run)) as runtime:
        fs = runtime.get_file_system()
        found = fs.stat("/dev/zero")
        assert found is not None
        assert found.is_special
        with pytest.raises(NotRegularFileError):
            fs.read_bytes("/dev/zero")
        listed = {item.path: item for item in fs.list_directory("/dev")}
        assert listed["/dev/zero"].is_special


def test_a_read_only_root_without_a_conversation_runs_commands_and_prepares(
    docker_run: str,
) -> None:
    with DockerSkillRuntime(
        image=IMAGE,
        labels=suite_labels(docker_run),
        read_only_root=True,
        remote_root="/tmp/skills",
    ) as runtime:
        assert _run(runtime, "echo hi; touch /x 2>/dev/null || echo read-only").stdout == (
            "hi\nread-only\n"
        )
        skills = discover_skills("examples/skills")
        prepared = runtime.prepare(SkillPreparationRequest(skills=skills))
        assert all(skill.base_path.startswith("/tmp/skills/") for skill in prepared)
        listed = _run(runtime, f"ls {prepared[0].base_path}")
        assert "SKILL.md" in listed.stdout
