"""Digest reuse across processes (docs/durability.md, "Digest reuse"): a client with no digest
cache of its own seeds one from the conversation's newest manifest (its stat keys, when this
runtime's workspace listed them), so an unchanged workspace hashes nothing; a file whose
change time moved is hashed again whatever else its key keeps."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from skillruntime.core.durability import WorkspaceSnapshots, common
from skillruntime.core.durability.common import lister_tag, seeded_cache, split_listing
from skillruntime.core.errors import (
    SnapshotIntegrityError,
    SnapshotManifestError,
    WorkspaceSnapshotError,
)
from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
from skillruntime.core.snapshots import Entry, ListingEntry, LocalSnapshotStore, Manifest
from skillruntime.core.snapshots.planning import plan_snapshot
from skillruntime.local import LocalSkillRuntime
from workspace_snapshots import CountingRuntime

CONVERSATION = "conv-seed"
DIGEST = "ab" * 32
FILE = {"path": "f", "kind": "file", "mode": 0o644, "size": 1, "digest": DIGEST}
KEY = "64768:1234:5:1796659397.6001915390:1796659397.6001915390"


class Recording(CountingRuntime):
    """Counts the calls and keeps which files each fast listing hashed itself."""

    def __init__(self, inner: LocalSkillRuntime) -> None:
        super().__init__(inner)
        self.hashed: list[set[bytes]] = []

    def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        result = super().execute(request)
        if "SNAPFAST2" in request.command:
            fast = split_listing(base64.b64decode("".join(result.stdout.partition("#")[0].split())))
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
        (folder / f"f{index}.txt").write_text(f"file {index:04d}\n")
    return path


@pytest.fixture
def store(tmp_path: Path) -> LocalSnapshotStore:
    return LocalSnapshotStore(tmp_path / "snapshots")


def fresh_runtime(workspace: Path) -> LocalSkillRuntime:
    """Another runtime object on the same workspace (what a new process would make)."""
    return LocalSkillRuntime(conversation_id=CONVERSATION, conversations_root=workspace.parent)


@pytest.fixture
def first(workspace: Path, store: LocalSnapshotStore) -> str:
    """The snapshot an earlier process took (its runtime and snapshots object are gone)."""
    with fresh_runtime(workspace) as runtime:
        result = WorkspaceSnapshots(store).snapshot(runtime, conversation_id=CONVERSATION)
    return result.snapshot_id


def test_a_new_process_hashes_nothing_of_an_unchanged_workspace(
    workspace: Path, store: LocalSnapshotStore, first: str
) -> None:
    manifest = store.get_manifest(CONVERSATION, first)
    assert manifest.version == 2
    assert manifest.listed_ns is not None
    assert all(entry.stat is not None for entry in manifest.files)
    # a new runtime object and a new snapshots object: no digest cache in memory
    with fresh_runtime(workspace) as runtime:
        recording = Recording(runtime)
        result = WorkspaceSnapshots(store).snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert recording.hashed == [set()]
    assert recording.counts["execute"] == 1
    assert not result.changed
    assert result.snapshot_id == first


def test_a_one_file_change_in_a_new_process_hashes_that_file_only(
    workspace: Path, store: LocalSnapshotStore, first: str
) -> None:
    (workspace / "d3" / "f3.txt").write_text("changed\n")
    with fresh_runtime(workspace) as runtime:
        recording = Recording(runtime)
        result = WorkspaceSnapshots(store).snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert recording.hashed == [{b"./d3/f3.txt"}]
    assert result.changed
    assert result.objects_uploaded == 1
    assert result.requests == 1  # the changed file came back inside the listing


def test_content_changed_under_a_forged_size_and_mtime_is_hashed_again(
    workspace: Path, store: LocalSnapshotStore, first: str
) -> None:
    target = workspace / "d4" / "f4.txt"
    before = target.stat()
    target.write_text("file XXXX\n")  # the same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # the modification time back
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns  # what no call but a clock change sets back
    with fresh_runtime(workspace) as runtime:
        recording = Recording(runtime)
        result = WorkspaceSnapshots(store).snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
    assert recording.hashed == [{b"./d4/f4.txt"}]
    assert result.changed
    manifest = store.get_manifest(CONVERSATION, result.snapshot_id)
    files = {entry.path: entry.digest for entry in manifest.files}
    assert files["d4/f4.txt"] == hashlib.sha256(b"file XXXX\n").hexdigest()


def test_an_old_manifest_without_stat_keys_restores_and_seeds_nothing(
    workspace: Path, store: LocalSnapshotStore
) -> None:
    with fresh_runtime(workspace) as runtime:
        listing = WorkspaceSnapshots(store)
        entries, _, _, _ = listing._list(runtime, CONVERSATION)
    old, uploads = plan_snapshot(entries, None, conversation=CONVERSATION)
    assert old.version == 1
    assert "stat" not in old.canonical_json().decode()
    for entry in old.files:
        store.put_object(entry.digest or "", open(workspace / entry.path, "rb"))  # noqa: SIM115
    old_id = store.put_manifest(old)
    assert uploads
    with fresh_runtime(workspace) as runtime:
        recording = Recording(runtime)
        result = WorkspaceSnapshots(store).snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
        assert len(recording.hashed[0]) == 200  # nothing to seed from
        assert not result.changed
        assert result.snapshot_id == old_id
        (workspace / "d1" / "f1.txt").write_text("gone soon\n")
        restored = WorkspaceSnapshots(store).restore(runtime, conversation_id=CONVERSATION)
    assert restored.snapshot_id == old_id
    assert restored.files == 1
    assert (workspace / "d1" / "f1.txt").read_text() == "file 0001\n"


def test_stat_keys_seed_only_a_listing_of_the_same_runtime_and_workspace(
    workspace: Path, store: LocalSnapshotStore, first: str
) -> None:
    manifest = store.get_manifest(CONVERSATION, first)
    with fresh_runtime(workspace) as runtime:
        tag = lister_tag(runtime.name, runtime.default_working_directory, CONVERSATION)
    assert manifest.lister == tag
    assert seeded_cache(manifest, tag) is not None
    assert seeded_cache(manifest, lister_tag("docker", "/workspace", CONVERSATION)) is None
    assert seeded_cache(manifest, lister_tag(runtime.name, "/elsewhere", CONVERSATION)) is None


def test_a_stored_manifest_with_a_tampered_stat_key_is_refused_on_read(
    workspace: Path, store: LocalSnapshotStore, first: str
) -> None:
    (path,) = (store.root / "manifests").rglob(f"*{first}.json")
    data = json.loads(path.read_bytes())
    data["entries"][-1]["stat"] = "1:2:3:4:5"
    path.write_bytes(json.dumps(data).encode())
    with pytest.raises(SnapshotIntegrityError, match="does not match its id"):
        store.get_manifest(CONVERSATION, first)


def test_a_stat_key_of_another_shape_is_left_out_never_refused() -> None:
    listing = [
        ListingEntry("a", "file", 0o644, 5, DIGEST),
        ListingEntry("b", "file", 0o644, 5, DIGEST),
        ListingEntry("c", "file", 0o644, 5, DIGEST),
        ListingEntry("d", "directory", 0o755),
    ]
    keys = {"a": KEY, "b": "1:2:3:x:5", "c": KEY + "\n" + KEY, "d": KEY}
    manifest, _ = plan_snapshot(
        listing, None, conversation="c", stat_keys=keys, listed_ns=10**18, lister=DIGEST
    )
    assert [entry.stat for entry in manifest.entries] == [KEY, None, None, None]
    assert manifest.version == 2
    again = Manifest.from_json(manifest.canonical_json())
    assert again == manifest
    assert again.snapshot_id == manifest.snapshot_id
    without, _ = plan_snapshot(listing, None, conversation="c", created=manifest.created)
    assert without.same_content(manifest)
    assert without.snapshot_id != manifest.snapshot_id


@pytest.mark.parametrize(
    "change",
    [
        {"version": 1},  # stat keys need version 2
        {"listed_ns": None},  # a listing time and a lister go together
        {"lister": "not-a-digest"},
        {"listed_ns": -1},
        {"entry": {"path": "d", "kind": "directory", "mode": 0o755, "stat": KEY}},
        {"entry": {**FILE, "stat": "1:2:3"}},
        {"entry": {**FILE, "stat": "9" * 200}},
    ],
)
def test_a_manifest_with_malformed_stat_fields_is_refused(change: dict[str, object]) -> None:
    good = {**FILE, "stat": KEY}
    data: dict[str, object] = {
        "version": 2,
        "conversation": "c",
        "created": datetime(2026, 12, 7, tzinfo=UTC).isoformat(),
        "listed_ns": 10**18,
        "lister": DIGEST,
        "entries": [change.pop("entry", good)],
    }
    Manifest.from_data({**data, "entries": [good]})  # the good one is read
    with pytest.raises(SnapshotManifestError):
        Manifest.from_data({**data, **change})
    with pytest.raises(SnapshotManifestError):
        Entry.checked("d", "directory", 0o755, stat=KEY)


def test_after_a_file_did_not_match_its_digest_the_manifest_seeds_nothing(
    workspace: Path, store: LocalSnapshotStore, first: str
) -> None:
    snapshots = WorkspaceSnapshots(store)
    with fresh_runtime(workspace) as runtime:
        key = (runtime.name, runtime.default_working_directory, CONVERSATION)
        seed = seeded_cache(store.get_manifest(CONVERSATION, first), lister_tag(*key))
        assert seed is not None
        # a cache naming a digest no file has: the snapshot fails when it reads a changed file
        snapshots._remember(
            key, common.DigestCache(seed.started_ns, dict.fromkeys(seed.digests, "cd" * 32))
        )
        (workspace / "d1" / "f1.txt").write_text("changed\n")
        with pytest.raises(WorkspaceSnapshotError):
            snapshots.snapshot(runtime, conversation_id=CONVERSATION)
        recording = Recording(runtime)
        result = snapshots.snapshot(recording, conversation_id=CONVERSATION)  # type: ignore[arg-type]
        assert len(recording.hashed[0]) == 200  # not seeded from the stored manifest
        assert result.changed
        # that full listing made the workspace trusted again: a new process seeds from it
        other = Recording(runtime)
        WorkspaceSnapshots(store).snapshot(other, conversation_id=CONVERSATION)  # type: ignore[arg-type]
        assert other.hashed == [set()]
