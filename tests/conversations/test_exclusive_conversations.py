"""Exclusive conversations: processes take turns, a killed holder is taken over, loss is typed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import preloaded_python
from conversations.conversation_backends import Backend, SqlBackend
from skillruntime.core.conversations import storage_key_for
from skillruntime.core.conversations.exclusive import local_service_key
from skillruntime.core.conversations.leases import LeaseLostError, LeaseTimeoutError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.tools import SkillTools
from skillruntime.local import LocalSkillRuntime

WORKER = Path(__file__).with_name("lease_hammer_worker.py")


def _spawn(
    backend: SqlBackend,
    root: Path,
    index: int,
    mode: str,
    rounds: int,
    ttl: float,
    kind: str = "sync",
) -> preloaded_python.Popen:
    return preloaded_python.Popen(
        [
            sys.executable,
            str(WORKER),
            backend.url,
            backend.table_name,
            str(root),
            str(index),
            mode,
            str(rounds),
            str(ttl),
            kind,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _overlaps(log: list[str]) -> int:
    """Overlapping executions in a start/end log: a start while another one is open."""
    overlaps = 0
    open_run: str | None = None
    for line in log:
        kind, _, run = line.partition(" ")
        if kind == "OVERLAP":
            overlaps += 1
        elif kind == "start":
            overlaps += open_run is not None
            open_run = run
        elif kind == "end":
            overlaps += open_run != run
            open_run = None
    return overlaps


@pytest.mark.slow
def test_eight_processes_never_overlap_in_one_conversation(
    sql_backend: SqlBackend, tmp_path: Path
) -> None:
    rounds = 4
    workers = [_spawn(sql_backend, tmp_path, index, "hammer", rounds, 3.0) for index in range(8)]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        for worker in workers:
            out, err = worker.communicate(timeout=300)
            assert worker.returncode == 0, err
            assert out.strip() == "done"
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    log = (tmp_path / "shared" / "log").read_text().splitlines()
    assert len(log) == 2 * 8 * rounds
    assert _overlaps(log) == 0
    assert not (tmp_path / "shared" / "busy").exists()


def test_the_overlap_check_sees_overlaps() -> None:
    assert _overlaps(["start 1.0", "start 2.0", "end 1.0", "end 2.0"]) > 0
    assert _overlaps(["start 1.0", "OVERLAP", "end 1.0"]) == 1
    assert _overlaps(["start 1.0", "end 1.0", "start 2.0", "end 2.0"]) == 0


@pytest.mark.slow
def test_a_killed_holder_is_taken_over_after_its_ttl(
    sql_backend: SqlBackend, tmp_path: Path
) -> None:
    ttl = 2.0
    holder = _spawn(sql_backend, tmp_path, 0, "hold", 0, ttl)
    try:
        assert holder.stdout is not None
        assert holder.stdin is not None
        assert holder.stdout.readline().strip() == "ready"
        holder.stdin.write("go\n")
        holder.stdin.flush()
        line = holder.stdout.readline().split()
        assert line[0] == "holding", line
        token = int(line[1])
        time.sleep(ttl)  # a few renewals happen while the command runs
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    store = sql_backend.open()
    key = storage_key_for(local_service_key(str(tmp_path)), "shared")
    left = store.get_lease(key)
    assert left is not None
    assert left.owner is not None
    assert left.token == token
    with LocalSkillRuntime(
        conversation_id="shared",
        conversations_root=tmp_path,
        conversation_store=store,
        exclusive=True,
        lease_ttl_seconds=ttl,
        lease_wait_seconds=60,
    ) as runtime:
        with runtime.exclusive_session() as lease:
            assert lease is not None
            assert lease.token == token + 1
            result = runtime.execute(SkillExecutionRequest(command="echo ok"))
        assert result.stdout.strip() == "ok"


def _runtime(backend: Backend, root: Path, **options: object) -> LocalSkillRuntime:
    settings: dict[str, object] = {"lease_ttl_seconds": 3.0, "lease_wait_seconds": 1.0}
    settings.update(options)
    return LocalSkillRuntime(
        conversation_id="conv",
        conversations_root=root,
        conversation_store=backend.open(),
        exclusive=True,
        **settings,  # type: ignore[arg-type]
    )


def test_losing_the_lease_stops_further_operations(backend: Backend, tmp_path: Path) -> None:
    runtime = _runtime(backend, tmp_path)
    store = backend.open()
    key = storage_key_for(local_service_key(str(tmp_path)), "conv")

    def run_until_lost() -> None:
        # The renewer notices the takeover within a third of the TTL.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            runtime.execute(SkillExecutionRequest(command="true"))
            time.sleep(0.1)

    def session_with_takeover() -> None:
        with runtime.exclusive_session() as lease:
            assert lease is not None
            assert store.release_lease(lease)  # another node takes it over meanwhile
            assert store.acquire_lease(key, "other-node", 30) is not None
            with pytest.raises(LeaseLostError):
                run_until_lost()

    with runtime:
        with pytest.raises(LeaseLostError, match="conversation conv was lost"):
            session_with_takeover()
        # Outside the session the runtime waits for the other node's lease, with a bound.
        with pytest.raises(LeaseTimeoutError):
            runtime.get_file_system().write_text("a.txt", "x")
        assert not (tmp_path / "conv" / "a.txt").exists()


def test_exclusive_file_operations_and_records(backend: Backend, tmp_path: Path) -> None:
    with _runtime(backend, tmp_path) as runtime:
        files = runtime.get_file_system()
        files.write_text("note.txt", "hello")
        assert files.read_text("note.txt") == "hello"
        assert [chunk for chunk in files.read_stream("note.txt")] == [b"hello"]
    key = storage_key_for(local_service_key(str(tmp_path)), "conv")
    record = backend.open().get(key)
    assert record is not None
    assert record.runtime == "local"
    assert record.workspace_root == str(tmp_path)
    assert record.sandbox_id is None
    lease = backend.open().get_lease(key)
    assert lease is not None
    assert lease.expired()


def test_exclusive_needs_a_store(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a conversation_store"):
        LocalSkillRuntime(conversation_id="c", conversations_root=tmp_path, exclusive=True)
    with pytest.raises(ValueError, match="need a conversation_id"):
        LocalSkillRuntime(exclusive=True)


def test_skill_tools_hold_the_lease_per_call(backend: Backend, tmp_path: Path) -> None:
    with _runtime(backend, tmp_path) as runtime:
        with pytest.raises(ValueError, match="exclusive=True"):
            SkillTools(
                LocalSkillRuntime(conversation_id="c", conversations_root=tmp_path),
                exclusive=True,
            )
        tools = SkillTools(runtime, exclusive=True)
        assert tools.dispatch("write", {"path": "a.txt", "content": "x"}).startswith(
            "Successfully created"
        )
        key = storage_key_for(local_service_key(str(tmp_path)), "conv")
        assert backend.open().acquire_lease(key, "other-node", 30) is not None
        answer = tools.dispatch("bash", {"command": "echo hi"})
        assert answer.startswith("Error:")
        assert "leased by another owner" in answer
