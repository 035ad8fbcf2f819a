"""The listing's digest reuse: only files whose stat key changed are hashed again."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillruntime.core.durability import WorkspaceSnapshots, common
from skillruntime.core.durability.common import DigestCache, split_listing
from skillruntime.core.errors import SnapshotListingError, WorkspaceSnapshotError
from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
from skillruntime.core.snapshots import LocalSnapshotStore, Manifest
from skillruntime.local import LocalSkillRuntime
from workspace_snapshots import CountingRuntime

CONVERSATION = "conv-cache"


class Recording(CountingRuntime):
    """Counts the calls and keeps which files each fast listing hashed itself."""

    def __init__(self, inner: LocalSkillRuntime) -> None:
        super().__init__(inner)
        self.hashed: list[set[bytes]] = []

    def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        result = super().execute(request)
        if "SNAPFAST2" in request.command:
            fast = split_listing(base64.b64decode("".join(result.stdout.split())))
            assert fast is not None
            self.hashed.append(set(fast.sums))
        return result


@pytest.fixture(autouse=True)
def no_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    # the files are written just before the first listing: reusable at once, not after 100 ms
    monkeypatch.setattr(common, "CACHE_MARGIN_NS", 0)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "conversations" / CONVERSATION
    path.mkdir(parents=True)
    for index in range(200):
        folder = path / f"d{index % 10}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{index}.txt").write_text(f"file {index}\n")
    return path


@pytest.fixture
def runtime(workspace: Path) -> Iterator[LocalSkillRuntime]:
    with LocalSkillRuntime(conversation_id=CONVERSATION, conversations_root=workspace.parent) as rt:
        yield rt


@pytest.fixture
def store(tmp_path: Path) -> LocalSnapshotStore:
    return LocalSnapshotStore(tmp_path / "snapshots")


def digest_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_snapshot_after_a_one_file_change_hashes_that_file_only(
    runtime: LocalSkillRuntime, workspace: Path, store: LocalSnapshotStore
) -> None:
    snapshots = WorkspaceSnapshots(store)
    recording = Recording(runtime)
    snapshots.snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert len(recording.hashed[0]) == 200  # no cache yet: every file

    (workspace / "d3" / "f3.txt").write_text("changed\n")
    (workspace / "d5" / "new.txt").write_text("new\n")
    result = snapshots.snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert recording.hashed[1] == {b"./d3/f3.txt", b"./d5/new.txt"}
    assert result.requests == 1  # the two small files came back inside the listing
    assert recording.requests == 3  # the first listing and its batch read; the second listing
    assert result.objects_uploaded == 2
    manifest = store.latest(CONVERSATION)
    assert manifest is not None
    files = {entry.path: entry.digest for entry in manifest.files}
    assert len(files) == 201
    for path in ("d3/f3.txt", "d5/new.txt", "d7/f7.txt"):
        assert files[path] == digest_of(workspace / path)


def test_a_renamed_directory_reuses_its_files_digests(
    runtime: LocalSkillRuntime, workspace: Path, store: LocalSnapshotStore
) -> None:
    snapshots = WorkspaceSnapshots(store)
    recording = Recording(runtime)
    snapshots.snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    (workspace / "d4").rename(workspace / "moved")
    result = snapshots.snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert recording.hashed[1] == set()  # same inode, size and times: same content
    assert result.objects_uploaded == 0
    manifest = store.latest(CONVERSATION)
    assert manifest is not None
    files = {entry.path: entry.digest for entry in manifest.files}
    assert files["moved/f4.txt"] == digest_of(workspace / "moved" / "f4.txt")
    assert "d4/f4.txt" not in files


def test_a_new_client_without_a_snapshot_hashes_everything(
    runtime: LocalSkillRuntime, workspace: Path, store: LocalSnapshotStore, tmp_path: Path
) -> None:
    WorkspaceSnapshots(store).snapshot(runtime, conversation_id=CONVERSATION)
    recording = Recording(runtime)
    other = LocalSnapshotStore(tmp_path / "other-store")
    WorkspaceSnapshots(other).snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert len(recording.hashed[0]) == 200


def test_a_cache_missing_an_entry_hashes_that_file_in_one_more_request(
    runtime: LocalSkillRuntime, workspace: Path, store: LocalSnapshotStore
) -> None:
    snapshots = WorkspaceSnapshots(store)
    snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    ((key, cache),) = snapshots._caches.items()
    dropped = dict(list(cache.digests.items())[5:])
    snapshots._caches[key] = DigestCache(cache.started_ns, dropped)
    (workspace / "d1" / "f1.txt").write_text("changed\n")
    recording = Recording(runtime)
    result = snapshots.snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert recording.hashed[0] == {b"./d1/f1.txt"}
    assert recording.counts["execute"] == 2  # the listing, then sha256sum of the five
    assert result.requests == 2  # the changed file came back inside the listing
    manifest = store.latest(CONVERSATION)
    assert manifest is not None
    for entry in manifest.files:
        assert entry.digest == digest_of(workspace / entry.path)


def test_a_corrupted_cache_fails_the_snapshot_and_the_next_one_hashes_everything(
    runtime: LocalSkillRuntime, workspace: Path, store: LocalSnapshotStore
) -> None:
    snapshots = WorkspaceSnapshots(store)
    snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    ((key, cache),) = snapshots._caches.items()
    forged = dict.fromkeys(cache.digests, "ab" * 32)  # a digest no file has
    snapshots._caches[key] = DigestCache(cache.started_ns, forged)
    (workspace / "d1" / "f1.txt").write_text("changed\n")
    with pytest.raises(WorkspaceSnapshotError):
        snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    assert key not in snapshots._caches  # dropped: fail safe
    recording = Recording(runtime)
    result = snapshots.snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert len(recording.hashed[0]) == 200
    assert result.changed
    manifest = store.latest(CONVERSATION)
    assert manifest is not None
    for entry in manifest.files:
        assert entry.digest == digest_of(workspace / entry.path)


def fast_output(records: list[tuple[bytes, bytes]], sums: dict[bytes, bytes]) -> bytes:
    out = b"SNAPFAST2\0" + b"1000.5\0"
    for path, key in records:
        out += b"f\0" + path + b"\0-rw-r--r--\0" + b"5\0\0" + key + b"\0"
    out += b"SNAPSUMS\0"
    for path, digest in sums.items():
        out += digest + b"  " + path + b"\0"
    return out + b"SNAPEND\0"


def test_a_forged_key_can_only_name_a_digest_the_earlier_listing_saw() -> None:
    old = "cd" * 32
    cache = DigestCache(2000 * 10**9, {b"1:2:5:900.1:900.1": old})
    # a changed file that the sandbox claims unchanged, under the very same key: the digest it
    # gets is the one this workspace's earlier listing reported (a listing may claim any digest)
    fast = split_listing(fast_output([(b"./a", b"1:2:5:900.1:900.1")], {}))
    assert fast is not None
    assert fast.resolve(cache) == []
    assert fast.sums[b"./a"] == old.encode()
    # an unknown key, or one changed after the cutoff, is never taken from the cache
    fast = split_listing(
        fast_output([(b"./b", b"1:3:5:900.1:900.1"), (b"./c", b"1:2:5:900.1:1999.95")], {})
    )
    assert fast is not None
    assert fast.resolve(cache) == [b"./b", b"./c"]
    with pytest.raises(SnapshotListingError):
        fast.portable()  # a file left without a digest fails closed


def test_a_malformed_fast_listing_fails_closed() -> None:
    good = fast_output([(b"./a", b"1:2:5:900.1:900.1")], {b"./a": b"ef" * 32})
    assert split_listing(good) is not None
    for bad in (
        good.replace(b"1000.5", b"soon"),  # the start time
        good.replace(b"ef" * 32, b"EF" * 32),  # a digest
        good[: -len(b"SNAPEND\0")],  # no trailer
    ):
        with pytest.raises(SnapshotListingError):
            split_listing(bad)


def test_a_large_changed_file_is_read_on_its_own(
    runtime: LocalSkillRuntime, workspace: Path, store: LocalSnapshotStore
) -> None:
    snapshots = WorkspaceSnapshots(store)
    snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    big = workspace / "big.bin"
    big.write_bytes(b"x" * (common.INLINE_FILE_BYTES + 1))
    (workspace / "d2" / "f2.txt").write_text("small change\n")
    counting = CountingRuntime(runtime)
    result = snapshots.snapshot(counting, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert result.objects_uploaded == 2
    assert counting.counts["read_stream"] == 1  # the large one; the small one came inline
    assert counting.counts["execute"] == 1
    manifest = store.latest(CONVERSATION)
    assert manifest is not None
    files = {entry.path: entry.digest for entry in manifest.files}
    assert files["big.bin"] == digest_of(big)
    assert files["d2/f2.txt"] == digest_of(workspace / "d2" / "f2.txt")


def test_inline_contents_that_do_not_match_fail_the_snapshot(
    runtime: LocalSkillRuntime, workspace: Path, store: LocalSnapshotStore
) -> None:
    snapshots = WorkspaceSnapshots(store)
    snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    (workspace / "d2" / "f2.txt").write_text("small change\n")

    class Forging(CountingRuntime):
        def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
            result = super().execute(request)
            listing, separator, rest = result.stdout.partition("#")
            if not separator:
                return result
            data = base64.b64decode("".join(rest.split()))
            forged = data.replace(b"small change", b"forged bytes")
            assert forged != data
            stdout = listing + "#" + base64.b64encode(forged).decode()
            return result.model_copy(update={"stdout": stdout})

    with pytest.raises(WorkspaceSnapshotError):
        snapshots.snapshot(Forging(runtime), conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert not store.has_objects([hashlib.sha256(b"forged bytes\n").hexdigest()])


def test_a_restore_listing_brings_no_file_back(
    runtime: LocalSkillRuntime, workspace: Path, store: LocalSnapshotStore
) -> None:
    snapshots = WorkspaceSnapshots(store)
    snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    (workspace / "d2" / "f2.txt").write_text("small change\n")
    outputs: list[str] = []

    class Keeping(CountingRuntime):
        def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
            result = super().execute(request)
            if "SNAPFAST2" in request.command:
                outputs.append(result.stdout)
            return result

    restored = snapshots.restore(Keeping(runtime), conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert restored.files == 1
    assert len(outputs) == 1
    assert "#" not in outputs[0]  # the listing of a restore only lists
    assert (workspace / "d2" / "f2.txt").read_text() == "file 2\n"


def test_the_previous_manifest_is_read_from_the_store_only_when_another_writer_stored_one(
    runtime: LocalSkillRuntime,
    workspace: Path,
    store: LocalSnapshotStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[str] = []
    get_manifest = store.get_manifest

    def counted(conversation: str, snapshot_id: str) -> Manifest:
        reads.append(snapshot_id)
        return get_manifest(conversation, snapshot_id)

    monkeypatch.setattr(store, "get_manifest", counted)
    snapshots = WorkspaceSnapshots(store)
    first = snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    (workspace / "d1" / "f1.txt").write_text("changed\n")
    second = snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    assert reads == []  # the manifest it stored itself is the newest: kept, not read back
    assert second.changed
    stored = store.latest(CONVERSATION)
    assert stored is not None
    assert stored.parent == first.snapshot_id
    # another writer (another process) stores a newer snapshot: that one is read, once
    (workspace / "d2" / "f2.txt").write_text("changed too\n")
    other = WorkspaceSnapshots(store).snapshot(runtime, conversation_id=CONVERSATION)
    reads.clear()
    third = snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    assert reads == [other.snapshot_id]
    assert not third.changed
    assert third.snapshot_id == other.snapshot_id
    # a deleted newest snapshot is not taken from memory either
    store.delete_snapshot(CONVERSATION, other.snapshot_id)
    fourth = snapshots.snapshot(runtime, conversation_id=CONVERSATION)
    assert fourth.changed
    latest = store.latest(CONVERSATION)
    assert latest is not None
    assert latest.parent == second.snapshot_id
