"""Pure planning: a listing and the previous manifest give the next manifest and the uploads; a
manifest and the current listing give a restore that makes the workspace equal to it."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.errors import SnapshotListingError, SymlinkEscapeError
from skillruntime.core.snapshots import (
    ListingEntry,
    Manifest,
    RestorePlan,
    plan_restore,
    plan_snapshot,
)

WHEN = datetime(2026, 12, 7, 5, 40, tzinfo=UTC)


def digest_of(n: int) -> str:
    return f"{n:064x}"


def workspace(count: int, *, changed: int | None = None) -> list[ListingEntry]:
    entries = [ListingEntry("src", "directory", 0o755), ListingEntry("empty", "directory", 0o700)]
    for n in range(count):
        content = n + 10_000 if n == changed else n
        entries.append(ListingEntry(f"src/f{n}", "file", 0o644, 10, digest_of(content)))
    entries.append(ListingEntry("link", "symlink", 0o777, target="src/f0"))
    return entries


def test_an_incremental_snapshot_uploads_only_the_changed_file() -> None:
    first, uploads = plan_snapshot(workspace(1000), None, conversation="c", created=WHEN)
    assert len(uploads) == 1000
    assert first.parent is None
    second, uploads = plan_snapshot(workspace(1000, changed=7), first)
    assert uploads == [digest_of(10_007)]
    assert second.parent == first.snapshot_id
    assert second.conversation == "c"
    assert {entry.path for entry in second.entries} >= {"empty", "link", "src"}


def test_special_files_are_refused_or_skipped_and_links_out_refused() -> None:
    listing = [*workspace(1), ListingEntry("fifo", "special", 0o644)]
    with pytest.raises(SnapshotListingError):
        plan_snapshot(listing, None, conversation="c")
    manifest, _ = plan_snapshot(listing, None, conversation="c", skip_special=True)
    assert "fifo" not in {entry.path for entry in manifest.entries}
    with pytest.raises(SymlinkEscapeError):
        plan_snapshot(
            [ListingEntry("out", "symlink", 0o777, target="../x")], None, conversation="c"
        )
    with pytest.raises(SnapshotListingError):
        plan_snapshot([], None)


# -- restore: apply the plan to a simulated workspace and compare --------------------------------

State = dict[str, ListingEntry]


def apply(plan: RestorePlan, state: State) -> State:
    result = dict(state)
    for path in plan.delete:
        for other in list(result):
            if other == path or other.startswith(path + "/"):
                del result[other]
    for entry in plan.make_directories:
        parent = entry.path.rpartition("/")[0]
        assert not parent or result[parent].kind == "directory", "parent first"
        result[entry.path] = ListingEntry(entry.path, "directory", 0o700)
    for entry in plan.write_files:
        parent = entry.path.rpartition("/")[0]
        assert not parent or result[parent].kind == "directory"
        assert entry.path not in result or result[entry.path].kind == "file"
        result[entry.path] = ListingEntry(entry.path, "file", entry.mode, entry.size, entry.digest)
    for entry in plan.make_symlinks:
        assert entry.path not in result
        result[entry.path] = ListingEntry(entry.path, "symlink", 0o777, target=entry.target)
    for entry in plan.set_modes:
        current = result[entry.path]
        result[entry.path] = ListingEntry(
            current.path, current.kind, entry.mode, current.size, current.digest, current.target
        )
    return result


def as_state(manifest: Manifest) -> State:
    return {
        e.path: ListingEntry(e.path, e.kind, e.mode, e.size, e.digest, e.target)
        for e in manifest.entries
    }


_names = st.sampled_from(["a", "b", "c", "d\nx", "\udcff"])


@st.composite
def trees(draw: st.DrawFn) -> list[ListingEntry]:
    entries: dict[str, ListingEntry] = {}
    directories = [""]
    for _ in range(draw(st.integers(0, 10))):
        parent = draw(st.sampled_from(directories))
        path = (parent + "/" if parent else "") + draw(_names)
        if path in entries:
            continue
        kind = draw(st.sampled_from(["file", "directory", "symlink"]))
        mode = draw(st.sampled_from([0o644, 0o755, 0o500]))
        if kind == "file":
            entries[path] = ListingEntry(path, "file", mode, 1, digest_of(draw(st.integers(0, 3))))
        elif kind == "directory":
            entries[path] = ListingEntry(path, "directory", mode)
            directories.append(path)
        else:
            entries[path] = ListingEntry(path, "symlink", 0o777, target=draw(_names))
    return sorted(entries.values(), key=lambda entry: os.fsencode(entry.path))


@settings(max_examples=300, deadline=None)
@given(trees(), trees())
def test_a_restore_makes_the_workspace_equal_to_the_manifest(
    wanted: list[ListingEntry], current: list[ListingEntry]
) -> None:
    manifest, _ = plan_snapshot(wanted, None, conversation="c", created=WHEN)
    plan = plan_restore(manifest, current)
    assert apply(plan, {entry.path: entry for entry in current}) == as_state(manifest)
    assert plan_restore(manifest, wanted).empty
    assert plan.digests() <= manifest.digests()


def test_a_restore_deletes_only_top_most_paths_and_rewrites_only_changes() -> None:
    manifest, _ = plan_snapshot(workspace(3), None, conversation="c", created=WHEN)
    current = [
        *workspace(3, changed=1),
        ListingEntry("junk", "directory", 0o755),
        ListingEntry("junk/deep", "file", 0o644, 1, digest_of(9)),
    ]
    plan = plan_restore(manifest, current)
    assert plan.delete == ("junk",)
    assert [entry.path for entry in plan.write_files] == ["src/f1"]
    assert plan.digests() == {digest_of(1)}
    assert not plan.make_directories
    assert not plan.make_symlinks
