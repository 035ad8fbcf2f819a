"""Automatic durability on the local runtime (both faces): a snapshot when the runtime closes and
on a timer; a workspace directory lost (removed by a sweep, or a node whose disk is gone) comes
back from the snapshot on the next runtime's first operation; a workspace that is there is kept;
two runtime objects racing over one conversation store restore once."""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from pathlib import Path

from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.durability import Durability
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import LocalSnapshotStore
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime

POPULATE = r"""
set -e
mkdir -p src/deep empty
printf 'print(1)\n' > src/main.py
printf 'secret' > src/deep/private && chmod 600 src/deep/private
ln -s src/main.py latest
"""
CHECK = (
    "cat src/main.py src/deep/private; stat -c %a src/deep/private; readlink latest; ls -d empty"
)


def _run(runtime: LocalSkillRuntime, command: str) -> str:
    result = runtime.execute(SkillExecutionRequest(command=command))
    assert result.ok, result.stderr
    return result.stdout


def test_a_lost_workspace_comes_back_from_the_snapshot_taken_at_close(tmp_path: Path) -> None:
    root = tmp_path / "chats"
    durability = Durability(LocalSnapshotStore(tmp_path / "snapshots"))
    with LocalSkillRuntime(
        conversation_id="chat-1", conversations_root=root, durability=durability
    ) as runtime:
        _run(runtime, POPULATE)
        expected = _run(runtime, CHECK)
        assert durability.store.list_snapshots("chat-1") == []
    assert len(durability.store.list_snapshots("chat-1")) == 1
    shutil.rmtree(root / "chat-1")  # the workspace is lost
    with LocalSkillRuntime(
        conversation_id="chat-1", conversations_root=root, durability=durability
    ) as runtime:
        assert _run(runtime, CHECK) == expected
        durable = runtime.durable_workspace
        assert durable is not None
        assert len(durable.restores) == 1
        _run(runtime, "echo later > later.txt")
    # the second close stored the change; an unused runtime stores nothing at close
    assert len(durability.store.list_snapshots("chat-1")) == 2
    with LocalSkillRuntime(
        conversation_id="chat-1", conversations_root=root, durability=durability
    ):
        pass
    assert len(durability.store.list_snapshots("chat-1")) == 2


def test_a_workspace_still_there_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "chats"
    durability = Durability(LocalSnapshotStore(tmp_path / "snapshots"))
    with LocalSkillRuntime(
        conversation_id="chat-2", conversations_root=root, durability=durability
    ) as runtime:
        _run(runtime, "echo old > a.txt")
    (root / "chat-2" / "a.txt").write_text("newer\n")  # changed after the last snapshot
    with LocalSkillRuntime(
        conversation_id="chat-2", conversations_root=root, durability=durability
    ) as runtime:
        assert _run(runtime, "cat a.txt") == "newer\n"
        durable = runtime.durable_workspace
        assert durable is not None
        assert durable.restores == []


def test_a_snapshot_on_a_timer_holds_what_the_operations_before_it_left(tmp_path: Path) -> None:
    durability = Durability(
        LocalSnapshotStore(tmp_path / "snapshots"),
        snapshot_on_close=False,
        snapshot_every_seconds=0.2,
    )
    with LocalSkillRuntime(
        conversation_id="chat-3", conversations_root=tmp_path / "chats", durability=durability
    ) as runtime:
        _run(runtime, "echo one > a.txt")
        assert durability.store.list_snapshots("chat-3") == []
        time.sleep(0.25)
        _run(runtime, "echo two > a.txt")  # the timer's snapshot is taken before this command
        taken = durability.store.latest("chat-3")
        assert taken is not None
        files = list(taken.files)
        assert [entry.path for entry in files] == ["a.txt"]
        assert files[0].size == len("one\n")
        time.sleep(0.25)
        _run(runtime, "true")
    assert len(durability.store.list_snapshots("chat-3")) == 2  # no snapshot at close


def test_two_runtimes_racing_over_one_store_restore_once(tmp_path: Path) -> None:
    root = tmp_path / "chats"
    url = f"sqlite:///{tmp_path / 'conversations.db'}"
    durability = Durability(LocalSnapshotStore(tmp_path / "snapshots"))
    first_store = SqlConversationStore(url, create_schema=True)
    try:
        with LocalSkillRuntime(
            conversation_id="chat-4",
            conversations_root=root,
            conversation_store=first_store,
            durability=durability,
        ) as runtime:
            _run(runtime, POPULATE)
            expected = _run(runtime, CHECK)
    finally:
        first_store.close()
    shutil.rmtree(root / "chat-4")
    stores = [SqlConversationStore(url) for _ in range(2)]
    runtimes = [
        LocalSkillRuntime(
            conversation_id="chat-4",
            conversations_root=root,
            conversation_store=store,
            durability=durability,
        )
        for store in stores
    ]
    outputs: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def work(runtime: LocalSkillRuntime) -> None:
        try:
            barrier.wait()
            outputs.append(_run(runtime, CHECK))
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(runtime,)) for runtime in runtimes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    try:
        assert errors == []
        assert outputs == [expected, expected]
        restores = [len(r.durable_workspace.restores) for r in runtimes]  # type: ignore[union-attr]
        assert sorted(restores) == [0, 1]
    finally:
        for runtime in runtimes:
            runtime.close()
        for store in stores:
            store.close()


def test_the_async_face_restores_a_lost_workspace(tmp_path: Path) -> None:
    root = tmp_path / "chats"
    durability = Durability(LocalSnapshotStore(tmp_path / "snapshots"))

    async def scenario() -> None:
        async with AsyncLocalSkillRuntime(
            conversation_id="chat-5", conversations_root=root, durability=durability
        ) as runtime:
            assert (await runtime.execute(SkillExecutionRequest(command=POPULATE))).ok
            expected = (await runtime.execute(SkillExecutionRequest(command=CHECK))).stdout
        shutil.rmtree(root / "chat-5")
        async with AsyncLocalSkillRuntime(
            conversation_id="chat-5", conversations_root=root, durability=durability
        ) as runtime:
            found = await runtime.execute(SkillExecutionRequest(command=CHECK))
            assert found.stdout == expected
            durable = runtime.durable_workspace
            assert durable is not None
            assert len(durable.restores) == 1

    asyncio.run(scenario())


def test_a_sweep_snapshots_an_idle_conversation_before_it_destroys_it(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from skillruntime.core.conversations.sweeps import sweep_conversations
    from skillruntime.core.durability import snapshot_before_sweep
    from skillruntime.local.reaper import LocalWorkspaceReaper

    root = tmp_path / "chats"
    url = f"sqlite:///{tmp_path / 'conversations.db'}"
    store = SqlConversationStore(url, create_schema=True)
    durability = Durability(LocalSnapshotStore(tmp_path / "snapshots"), snapshot_on_close=False)
    try:
        with LocalSkillRuntime(
            conversation_id="chat-6",
            conversations_root=root,
            conversation_store=store,
            durability=durability,
        ) as runtime:
            _run(runtime, POPULATE)
            expected = _run(runtime, CHECK)
        assert durability.store.list_snapshots("chat-6") == []  # none at close here

        def open_runtime(record: object, given: Durability) -> LocalSkillRuntime:
            assert not given.snapshot_on_close
            # no conversation store: a local runtime given one registers its activity in the
            # record, which the sweep would take for a conversation in use
            return LocalSkillRuntime(
                conversation_id="chat-6", conversations_root=root, durability=given
            )

        report = sweep_conversations(
            store,
            60,
            [LocalWorkspaceReaper()],
            now=datetime.now(UTC) + timedelta(hours=2),
            before_destroy=snapshot_before_sweep(durability, open_runtime),
        )
        assert report.destroyed == 1
        assert not (root / "chat-6").exists()
        assert len(durability.store.list_snapshots("chat-6")) == 1
        # resumed (here on the same host; a node sharing the snapshot store alike)
        with LocalSkillRuntime(
            conversation_id="chat-6",
            conversations_root=root,
            conversation_store=store,
            durability=durability,
        ) as runtime:
            assert _run(runtime, CHECK) == expected
    finally:
        store.close()


def test_a_failed_snapshot_keeps_the_conversation_from_the_sweep(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from skillruntime.core.conversations.sweeps import sweep_conversations
    from skillruntime.local.reaper import LocalWorkspaceReaper

    root = tmp_path / "chats"
    store = SqlConversationStore(f"sqlite:///{tmp_path / 'c.db'}", create_schema=True)
    try:
        with LocalSkillRuntime(
            conversation_id="chat-7", conversations_root=root, conversation_store=store
        ) as runtime:
            _run(runtime, "echo kept > a.txt")

        def failing(record: object) -> None:
            raise OSError("the snapshot store is unreachable")

        report = sweep_conversations(
            store,
            60,
            [LocalWorkspaceReaper()],
            now=datetime.now(UTC) + timedelta(hours=2),
            before_destroy=failing,
        )
        assert (report.destroyed, report.failed) == (0, 1)
        assert (root / "chat-7" / "a.txt").read_text() == "kept\n"
        assert len(store.list_records()) == 1
    finally:
        store.close()
