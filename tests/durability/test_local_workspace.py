"""Workspace snapshots and restores through the local runtime's public SPI."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skillruntime.core.durability import AsyncWorkspaceSnapshots, WorkspaceSnapshots
from skillruntime.core.errors import (
    SnapshotIntegrityError,
    SnapshotListingError,
    SymlinkEscapeError,
    WorkspaceRestoreError,
    WorkspaceSnapshotError,
)
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import LocalSnapshotStore
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime
from workspace_snapshots import CountingRuntime, tree

CONVERSATION = "conv-snap"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "conversations"


@pytest.fixture
def workspace(root: Path) -> Path:
    path = root / CONVERSATION
    path.mkdir(parents=True)
    return path


@pytest.fixture
def runtime(root: Path, workspace: Path) -> Iterator[LocalSkillRuntime]:
    with LocalSkillRuntime(conversation_id=CONVERSATION, conversations_root=root) as rt:
        yield rt


@pytest.fixture
def store(tmp_path: Path) -> LocalSnapshotStore:
    return LocalSnapshotStore(tmp_path / "snapshots")


@pytest.fixture
def snapshots(store: LocalSnapshotStore) -> WorkspaceSnapshots:
    return WorkspaceSnapshots(store)


def populate(workspace: Path) -> None:
    """Hostile names, empty directories, in-workspace links and modes."""
    (workspace / "src" / "deep").mkdir(parents=True)
    (workspace / "empty" / "nested-empty").mkdir(parents=True)
    (workspace / "src" / "main.py").write_text("print('hello')\n")
    run = workspace / "src" / "run.sh"
    run.write_text("#!/bin/sh\necho ran\n")
    run.chmod(0o755)
    secret = workspace / "src" / "deep" / "private"
    secret.write_bytes(b"\x00\x01binary\xff")
    secret.chmod(0o600)
    (workspace / "line\nbreak.txt").write_text("newline in the name\n")
    (workspace / "tab\tname 'quoted' $HOME.txt").write_text("tab\n")
    (workspace / "-dash").write_text("starts with a dash\n")
    os.makedirs(os.fsencode(workspace) + b"/bytes-\xff\xfe", exist_ok=True)
    with open(os.fsencode(workspace) + b"/bytes-\xff\xfe/latin-\xe9.txt", "wb") as handle:
        handle.write(b"not utf-8 names\n")
    (workspace / "zero.bin").write_bytes(b"")
    (workspace / "same-a").write_text("duplicate content\n")
    (workspace / "same-b").write_text("duplicate content\n")
    (workspace / "latest").symlink_to("src/main.py")
    (workspace / "src" / "up").symlink_to("../empty")
    readonly = workspace / "readonly"
    readonly.mkdir()
    (readonly / "inside.txt").write_text("in a read-only directory\n")
    (readonly / "inside.txt").chmod(0o444)
    readonly.chmod(0o555)


def wipe(workspace: Path) -> None:
    for directory, dirs, _files in os.walk(workspace):
        for name in dirs:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755)
    shutil.rmtree(workspace)
    workspace.mkdir()


def test_round_trip_keeps_names_links_modes_and_empty_directories(
    runtime: LocalSkillRuntime,
    workspace: Path,
    snapshots: WorkspaceSnapshots,
    store: LocalSnapshotStore,
) -> None:
    populate(workspace)
    before = tree(workspace)
    result = snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    assert result.changed
    # the listing, and one batch for the small files
    assert result.commands == 2
    assert result.requests == 2
    # two files share one object
    assert result.objects_uploaded == len({v[2] for v in before.values() if v[0] == "file"})
    assert store.latest(CONVERSATION) is not None

    wipe(workspace)
    assert tree(workspace) == {}
    restored = snapshots.restore(runtime, conversation_id=CONVERSATION)
    assert restored.snapshot_id == result.snapshot_id
    assert tree(workspace) == before
    assert restored.files == sum(1 for v in before.values() if v[0] == "file")

    # a second restore of an equal workspace changes nothing and sends nothing
    again = snapshots.restore(runtime, conversation_id=CONVERSATION)
    assert again.files == 0
    assert again.deleted == 0
    assert again.requests == 1
    # an unchanged workspace stores no new snapshot
    same = snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    assert not same.changed
    assert same.snapshot_id == result.snapshot_id
    wipe(workspace)


def test_restore_after_deleting_and_changing_files(
    runtime: LocalSkillRuntime, workspace: Path, snapshots: WorkspaceSnapshots
) -> None:
    populate(workspace)
    before = tree(workspace)
    snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    (workspace / "src" / "main.py").write_text("changed\n")
    (workspace / "src" / "run.sh").chmod(0o644)
    (workspace / "same-a").unlink()
    shutil.rmtree(workspace / "empty")
    (workspace / "scratch").mkdir()
    (workspace / "scratch" / "new.txt").write_text("new\n")
    (workspace / "latest").unlink()
    (workspace / "latest").symlink_to("same-b")  # a link that changed its target
    (workspace / "zero.bin").unlink()
    (workspace / "zero.bin").mkdir()  # a file that became a directory
    result = snapshots.restore(runtime, conversation_id=CONVERSATION)
    assert tree(workspace) == before
    assert result.deleted == 3  # scratch, latest, zero.bin
    wipe(workspace)


def test_prepared_skills_are_neither_stored_nor_touched(
    runtime: LocalSkillRuntime, workspace: Path, snapshots: WorkspaceSnapshots
) -> None:
    (workspace / "skills" / "demo").mkdir(parents=True)
    (workspace / "skills" / "demo" / "SKILL.md").write_text("x\n")
    (workspace / "notes.txt").write_text("kept\n")
    result = snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    assert result.entries == 1
    (workspace / "notes.txt").unlink()
    snapshots.restore(runtime, conversation_id=CONVERSATION)
    assert (workspace / "notes.txt").read_text() == "kept\n"
    assert (workspace / "skills" / "demo" / "SKILL.md").exists()


@pytest.mark.slow
def test_incremental_snapshot_of_one_changed_file_in_1000(
    runtime: LocalSkillRuntime,
    workspace: Path,
    snapshots: WorkspaceSnapshots,
    store: LocalSnapshotStore,
) -> None:
    for index in range(1000):
        folder = workspace / f"d{index % 10}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{index}.txt").write_text(f"file {index}\n")
    first = snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    assert first.objects_uploaded == 1000
    objects = sum(1 for _ in store.root.joinpath("objects").rglob("*") if _.is_file())
    assert objects == 1000

    (workspace / "d3" / "f503.txt").write_text("changed\n")
    counting = CountingRuntime(runtime)
    second = snapshots.snapshot(counting, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert second.objects_uploaded == 1
    assert second.requests == 1  # the changed file came back inside the listing
    assert counting.counts["read_stream"] == 0
    assert counting.counts["execute"] == 1
    assert counting.requests <= 3
    objects = sum(1 for _ in store.root.joinpath("objects").rglob("*") if _.is_file())
    assert objects == 1001
    assert len(store.list_snapshots(CONVERSATION)) == 2

    # retention: keep the newest, the old object goes at the sweep (grace 0)
    store.grace_seconds = 0
    (workspace / "d3" / "f503.txt").write_text("changed again\n")
    third = snapshots.snapshot(runtime, conversation_id=CONVERSATION, keep_last=1)
    assert len(third.deleted_snapshots) == 2
    assert [ref.snapshot_id for ref in store.list_snapshots(CONVERSATION)] == [third.snapshot_id]


def test_a_link_out_of_the_workspace_is_refused(
    runtime: LocalSkillRuntime,
    workspace: Path,
    snapshots: WorkspaceSnapshots,
    store: LocalSnapshotStore,
) -> None:
    (workspace / "ok.txt").write_text("x\n")
    (workspace / "escape").symlink_to("../../outside")
    with pytest.raises(SymlinkEscapeError):
        snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    assert store.list_snapshots(CONVERSATION) == []


def test_a_corrupted_object_fails_the_restore_and_leaves_the_workspace_unchanged(
    runtime: LocalSkillRuntime,
    workspace: Path,
    snapshots: WorkspaceSnapshots,
    store: LocalSnapshotStore,
) -> None:
    populate(workspace)
    snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    (workspace / "src" / "main.py").write_text("changed\n")
    (workspace / "extra.txt").write_text("would be deleted\n")
    before = tree(workspace)
    victim = next(path for path in (store.root / "objects").rglob("*") if path.is_file())
    victim.chmod(0o644)
    victim.write_bytes(b"tampered")
    with pytest.raises(WorkspaceRestoreError) as caught:
        snapshots.restore(runtime, conversation_id=CONVERSATION)
    assert isinstance(caught.value.__cause__, SnapshotIntegrityError)
    assert caught.value.done == ()
    assert not caught.value.changed
    assert tree(workspace) == before
    wipe(workspace)


def test_a_truncated_listing_fails_closed(
    runtime: LocalSkillRuntime, workspace: Path, store: LocalSnapshotStore
) -> None:
    for index in range(50):
        (workspace / f"file-{index}.txt").write_text("x\n")
    tight = WorkspaceSnapshots(store, max_listing_bytes=2048)
    with pytest.raises(SnapshotListingError, match="output cap"):
        tight.snapshot(runtime, conversation_id=CONVERSATION)
    assert store.list_snapshots(CONVERSATION) == []


def test_a_failed_restore_step_says_what_was_done(
    runtime: LocalSkillRuntime, workspace: Path, snapshots: WorkspaceSnapshots
) -> None:
    (workspace / "a.txt").write_text("a\n")
    snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    (workspace / "a.txt").unlink()

    class FailingUploads:
        def __init__(self, inner: LocalSkillRuntime) -> None:
            self.inner = inner
            self.name = inner.name
            self.default_working_directory = inner.default_working_directory

        def execute(self, request: SkillExecutionRequest) -> object:
            return self.inner.execute(request)

        def get_file_system(self) -> object:
            class FileSystem:
                def upload_files(self, files: object) -> int:
                    raise OSError("disk full")

            return FileSystem()

    (workspace / "b.txt").write_text("b\n")
    with pytest.raises(WorkspaceRestoreError, match="sending the files failed") as caught:
        snapshots.restore(FailingUploads(runtime), conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert caught.value.changed
    assert caught.value.done == ("deleted and created directories",)
    # restoring again finishes the job
    snapshots.restore(runtime, conversation_id=CONVERSATION)
    assert sorted(os.listdir(workspace)) == ["a.txt"]


def test_async_round_trip(root: Path, workspace: Path, store: LocalSnapshotStore) -> None:
    import asyncio

    populate(workspace)
    before = tree(workspace)
    snapshots = AsyncWorkspaceSnapshots(store)

    async def main() -> None:
        async with AsyncLocalSkillRuntime(
            conversation_id=CONVERSATION, conversations_root=root
        ) as runtime:
            result = await snapshots.snapshot(runtime, conversation_id=CONVERSATION)
            assert result.changed
            wipe(workspace)
            await snapshots.restore(runtime, conversation_id=CONVERSATION)
            assert tree(workspace) == before
            unchanged = await snapshots.snapshot(runtime, conversation_id=CONVERSATION)
            assert not unchanged.changed

    asyncio.run(main())
    wipe(workspace)


@pytest.mark.parametrize("files", [1, 3])
def test_a_file_changed_between_the_listing_and_its_read_fails_the_snapshot(
    runtime: LocalSkillRuntime, workspace: Path, store: LocalSnapshotStore, files: int
) -> None:
    """A lone file is streamed, several are read in a batch: both check the listing's digest."""
    for index in range(files):
        (workspace / f"f{index}.txt").write_text(f"before {index}\n")

    class ChangingAfterListing(CountingRuntime):
        def execute(self, request: SkillExecutionRequest) -> Any:
            result = super().execute(request)
            if self.counts["execute"] == 1:
                (workspace / "f0.txt").write_text("after, and longer\n")
            return result

    with pytest.raises(WorkspaceSnapshotError, match="changed while the snapshot read it"):
        WorkspaceSnapshots(store).snapshot(
            ChangingAfterListing(runtime),  # type: ignore[arg-type]
            conversation_id=CONVERSATION,
        )
    assert store.list_snapshots(CONVERSATION) == []
