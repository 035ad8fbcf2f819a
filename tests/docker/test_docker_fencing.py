"""Fencing on takeover in a container: the exec a killed node left running is killed before the
next node's first command (docs/conversation-stores.md, "Nodes dying")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import docker_fixtures
import preloaded_python
from docker_fixtures import IMAGE, engine_client, suite_labels
from doubles._polling import wait_until
from skillruntime.core.conversations.fencing import FENCE_VARIABLE
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
from skillruntime.docker import DockerSkillRuntime

WORKER = Path(__file__).with_name("fence_node_worker.py")
TTL = 1.0

docker_run = docker_fixtures.docker_run


def _wait_for(condition: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    assert wait_until(condition, timeout=seconds, interval=0.05), f"timed out waiting for {what}"


def _in_container(run: str, command: str) -> str:
    """The output of ``command`` run in the test's container behind the runtime's back."""
    client = engine_client()
    try:
        containers = client.containers.list(
            filters={"label": f"{docker_fixtures.TEST_LABEL}={run}"}
        )
        if not containers:
            return ""
        code, output = containers[0].exec_run(["sh", "-c", command])
        return str(output.decode().strip()) if code == 0 else ""
    finally:
        client.close()


def _ticks(run: str) -> int:
    return int(_in_container(run, "wc -l < /tmp/ticks") or 0)


def test_a_takeover_kills_the_exec_a_killed_node_left_running(
    docker_run: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with SqlConversationStore(url, create_schema=True):
        pass
    conversation = f"fence-{docker_run}"
    node = preloaded_python.Popen(
        [sys.executable, str(WORKER), url, conversation, docker_run, str(TTL)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert node.stdout is not None
        line = node.stdout.readline().split()
        assert line[:1] == ["holding"], (line, node.stderr.read() if node.stderr else "")
        token = int(line[1])
        _wait_for(lambda: _ticks(docker_run) >= 3, "the node's command to tick")
        os.kill(node.pid, signal.SIGKILL)
        node.wait(timeout=30)
    finally:
        if node.poll() is None:
            node.kill()
            node.wait()
    seen = _ticks(docker_run)
    _wait_for(lambda: _ticks(docker_run) > seen, "the orphaned exec to tick on")

    commands: list[str] = []
    original = DockerSkillRuntime._run

    def counting(
        self: DockerSkillRuntime, request: SkillExecutionRequest, *args: Any
    ) -> SkillExecutionResult:
        commands.append(request.command)
        return original(self, request, *args)

    monkeypatch.setattr(DockerSkillRuntime, "_run", counting)
    with (
        SqlConversationStore(url) as store,
        DockerSkillRuntime(
            image=IMAGE,
            labels=suite_labels(docker_run),
            conversation_id=conversation,
            conversation_store=store,
            exclusive=True,
            lease_ttl_seconds=TTL,
            lease_wait_seconds=30,
        ) as runtime,
    ):
        result = runtime.execute(
            SkillExecutionRequest(
                command="a=$(wc -l < /tmp/ticks); sleep 0.5; b=$(wc -l < /tmp/ticks); "
                'case "$(cut -d")" -f2 "/proc/$(cat /tmp/orphan.pid)/stat" 2>/dev/null)" in '
                '" Z"* | "") o=dead ;; *) o=alive ;; esac; '
                f'echo "$a $b $o ${FENCE_VARIABLE}"'
            )
        )
        assert result.exit_code == 0, result.stderr
        before, after, orphan, fence = result.stdout.split()
        assert (before, orphan) == (after, "dead")  # dead before this command started
        assert fence.endswith(f":{token + 1}")
        assert len(commands) == 2
        assert FENCE_VARIABLE in commands[0]
        # A lease released normally is taken without a fence command.
        assert runtime.execute(SkillExecutionRequest(command="true")).exit_code == 0
        assert commands[2:] == ["true"]
