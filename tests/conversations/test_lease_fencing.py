"""Fencing on takeover: a command does not outlive the lease of the node that started it.

A node SIGKILLed while its exclusive command runs leaves that command running; the node taking
the lease over must kill it before its own first operation (docs/conversation-stores.md,
"Nodes dying"), and a lease handed over by a normal release must cost no extra command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import preloaded_python
from conversations.conversation_backends import SqlBackend, sqlite_url
from doubles._polling import wait_until
from skillruntime.core.conversations import storage_key_for
from skillruntime.core.conversations.exclusive import ConversationGuard, local_service_key
from skillruntime.core.conversations.fencing import FENCE_VARIABLE, fence_command
from skillruntime.core.conversations.lease_rules import is_takeover
from skillruntime.core.conversations.memory import InMemoryConversationStore
from skillruntime.core.conversations.spi import ConversationLease
from skillruntime.core.errors import LeaseFencingError, LeaseLostError
from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
from skillruntime.local import LocalSkillRuntime

WORKER = Path(__file__).with_name("lease_hammer_worker.py")
WORKER_ARGV = (sys.executable, str(WORKER))
TTL = 1.0
KEY = "k" * 64


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every command the local runtime runs in this test, in order."""
    seen: list[str] = []
    original = LocalSkillRuntime._run

    def counting(
        self: LocalSkillRuntime,
        request: SkillExecutionRequest,
        working_directory: str,
        environment: dict[str, str],
    ) -> SkillExecutionResult:
        seen.append(request.command)
        return original(self, request, working_directory, environment)

    monkeypatch.setattr(LocalSkillRuntime, "_run", counting)
    return seen


def _ticks(root: Path) -> int:
    files = list(root.rglob("ticks"))
    return len(files[0].read_text().splitlines()) if files else 0


def _wait_for(condition: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    assert wait_until(condition, timeout=seconds, interval=0.05), f"timed out waiting for {what}"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _orphan_a_command(backend: SqlBackend, root: Path) -> tuple[int, int]:
    """Start a node whose exclusive command ticks, SIGKILL the node; the orphan's pid and the
    token the node held."""
    node = preloaded_python.Popen(
        [*WORKER_ARGV, backend.url, backend.table_name, str(root), "0", "tick", "0", str(TTL)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert node.stdout is not None
        assert node.stdin is not None
        assert node.stdout.readline().strip() == "ready"
        node.stdin.write("go\n")
        node.stdin.flush()
        line = node.stdout.readline().split()
        assert line[:1] == ["holding"], line
        _wait_for(lambda: _ticks(root) >= 3, "the node's command to tick")
        os.kill(node.pid, signal.SIGKILL)
        node.wait(timeout=30)
    finally:
        if node.poll() is None:
            node.kill()
            node.wait()
    pid = int(next(root.rglob("orphan.pid")).read_text())
    seen = _ticks(root)
    _wait_for(lambda: _ticks(root) > seen, "the orphaned command to tick on")
    assert _alive(pid)
    return pid, int(line[1])


def test_a_takeover_kills_the_orphaned_command_before_the_next_one(
    tmp_path: Path, commands: list[str]
) -> None:
    backend = SqlBackend("sqlite", sqlite_url(tmp_path))
    root = tmp_path / "conversations"
    try:
        orphan, token = _orphan_a_command(backend, root)
        key = storage_key_for(local_service_key(str(root)), "shared")
        with LocalSkillRuntime(
            conversation_id="shared",
            conversations_root=root,
            conversation_store=backend.open(),
            exclusive=True,
            lease_ttl_seconds=TTL,
            lease_wait_seconds=30,
        ) as runtime:
            result = runtime.execute(
                SkillExecutionRequest(
                    command="a=$(wc -l < ticks); sleep 0.5; b=$(wc -l < ticks); "
                    f'echo "$a $b ${FENCE_VARIABLE}"'
                )
            )
            assert result.exit_code == 0, result.stderr
            before, after, fence = result.stdout.split()
            # The orphan was dead before this command started: the ticks no longer grow.
            assert before == after
            assert not _alive(orphan)
            assert fence == f"{key}:{token + 1}"
            assert len(commands) == 2
            assert FENCE_VARIABLE in commands[0]
            assert "/proc/" in commands[0]
            # The lease was released normally: neither this runtime nor another owner fences.
            runtime.execute(SkillExecutionRequest(command="true"))
            assert len(commands) == 3
        with LocalSkillRuntime(
            conversation_id="shared",
            conversations_root=root,
            conversation_store=backend.open(),
            exclusive=True,
            lease_ttl_seconds=TTL,
        ) as other:
            assert other.execute(SkillExecutionRequest(command="true")).exit_code == 0
        assert commands[3:] == ["true"]
    finally:
        backend.close()


def test_the_fence_kills_only_lower_tokens_of_its_own_key(tmp_path: Path) -> None:
    def start(fence: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["sleep", "60"], env={**os.environ, FENCE_VARIABLE: fence}, start_new_session=True
        )

    older, same, other = start(f"{KEY}:1"), start(f"{KEY}:2"), start(f"{'o' * 64}:1")
    try:
        done = subprocess.run(
            ["sh", "-c", fence_command(KEY, 2, 5)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert older.wait(timeout=5) == -signal.SIGKILL
        assert same.poll() is None
        assert other.poll() is None
    finally:
        for process in (older, same, other):
            process.kill()
            process.wait()


def _lease(owner: str | None, token: int, seconds: float) -> ConversationLease:
    return ConversationLease(
        lease_key=KEY,
        owner=owner,
        token=token,
        expires_at=datetime.now(UTC) + timedelta(seconds=seconds),
    )


def test_what_counts_as_a_takeover() -> None:
    mine = _lease("me#1", 4, 30)
    assert is_takeover(_lease("dead#1", 3, -1), mine)  # expired, never released
    assert not is_takeover(_lease(None, 3, -1), mine)  # released
    assert not is_takeover(_lease("me#1", 4, 5), mine)  # re-acquired one's own
    assert is_takeover(_lease(None, 2, -1), mine)  # someone held it in between, unseen
    assert not is_takeover(None, _lease("me#1", 1, 30))  # the first lease
    assert not is_takeover(_lease("gone#1", 3, 30), mine)  # released while we asked


def _expired(store: InMemoryConversationStore) -> bool:
    lease = store.get_lease(KEY)
    return lease is not None and lease.expired()


def _expired_lease(store: InMemoryConversationStore) -> None:
    assert store.acquire_lease(KEY, "dead-node", 0.05) is not None
    _wait_for(lambda: _expired(store), "the dead node's lease to expire")


def test_a_failed_fence_fails_closed() -> None:
    store = InMemoryConversationStore()
    _expired_lease(store)
    guard = ConversationGuard(store, KEY, description="conv", exclusive=True, lease_ttl_seconds=1)
    ran: list[SkillExecutionRequest] = []

    def failing(request: SkillExecutionRequest) -> SkillExecutionResult:
        ran.append(request)
        return SkillExecutionResult(exit_code=1, stderr="fence: 1 process(es) still run")

    with pytest.raises(LeaseFencingError, match="still run"), guard.operation(failing):
        raise AssertionError("an operation under an unfenced lease must not run")
    assert len(ran) == 1
    left = store.get_lease(KEY)
    assert left is not None
    assert left.owner is not None  # not released: the next taker fences
    # The next taker (after the TTL) sees a takeover again and fences before its operation.
    _wait_for(lambda: _expired(store), "the abandoned lease to expire")
    fenced: list[SkillExecutionRequest] = []

    def succeeding(request: SkillExecutionRequest) -> SkillExecutionResult:
        fenced.append(request)
        return SkillExecutionResult(exit_code=0)

    other = ConversationGuard(store, KEY, description="conv", exclusive=True, lease_ttl_seconds=1)
    with other.operation(succeeding) as lease:
        assert lease is not None
        assert len(fenced) == 1
        assert f"token='{lease.token}'" in fenced[0].command
    with other.operation(succeeding):
        pass
    assert len(fenced) == 1


def test_a_fence_that_cannot_run_fails_closed_in_a_session() -> None:
    store = InMemoryConversationStore()
    _expired_lease(store)
    guard = ConversationGuard(store, KEY, description="conv", exclusive=True, lease_ttl_seconds=5)

    def broken(request: SkillExecutionRequest) -> SkillExecutionResult:
        raise OSError("the sandbox is gone")

    session = guard.session()
    session.__enter__()
    with pytest.raises(LeaseFencingError, match="OSError"), guard.operation(broken):
        raise AssertionError("an operation under an unfenced lease must not run")
    with pytest.raises(LeaseLostError), guard.operation(broken):
        raise AssertionError("the abandoned lease must not be used")
    with pytest.raises(LeaseLostError):  # the session ends with its lease lost
        session.__exit__(None, None, None)
