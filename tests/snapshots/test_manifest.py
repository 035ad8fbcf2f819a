"""The manifest: canonical JSON, a stable id, and the path and link rules."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillruntime.core.errors import (
    SnapshotManifestError,
    SnapshotPathError,
    SymlinkEscapeError,
)
from skillruntime.core.snapshots import Entry, Manifest, check_path

WHEN = datetime(2026, 12, 7, 5, 40, tzinfo=UTC)
DIGEST = "ab" * 32

# any byte of a POSIX name but NUL and "/", decoded as the listing parser does
_name_bytes = st.binary(min_size=1, max_size=12).filter(
    lambda raw: b"\0" not in raw and b"/" not in raw and raw not in (b".", b"..")
)
names = _name_bytes.map(os.fsdecode)


@st.composite
def manifests(draw: st.DrawFn) -> Manifest:
    """A valid manifest: a tree of directories, files and in-workspace links."""
    entries: dict[str, Entry] = {}
    directories = [""]
    for _ in range(draw(st.integers(0, 12))):
        parent = draw(st.sampled_from(directories))
        name = draw(names)
        path = f"{parent}/{name}" if parent else name
        if path in entries:
            continue
        kind = draw(st.sampled_from(["file", "directory", "symlink"]))
        mode = draw(st.integers(0, 0o7777))
        if kind == "file":
            size = draw(st.integers(0, 2**40))
            digest = draw(st.binary(min_size=32, max_size=32)).hex()
            entries[path] = Entry(path=path, kind="file", mode=mode, size=size, digest=digest)
        elif kind == "directory":
            entries[path] = Entry(path=path, kind="directory", mode=mode)
            directories.append(path)
        else:
            target = draw(st.sampled_from([*directories[1:], "missing"]))
            depth = path.count("/")
            relative = "/".join([".."] * depth + [target])
            entries[path] = Entry(path=path, kind="symlink", mode=0o777, target=relative)
    order = draw(st.permutations(list(entries.values())))
    return Manifest(
        conversation=draw(st.text(min_size=1, max_size=20)),
        created=WHEN + timedelta(microseconds=draw(st.integers(0, 10**12))),
        parent=draw(st.none() | st.just(DIGEST)),
        entries=tuple(order),
    )


@settings(max_examples=200, deadline=None)
@given(manifests())
def test_the_canonical_json_round_trips_and_the_id_is_stable(manifest: Manifest) -> None:
    data = manifest.canonical_json()
    again = Manifest.from_json(data)
    assert again == manifest
    assert again.canonical_json() == data
    assert again.snapshot_id == manifest.snapshot_id
    shuffled = Manifest(
        conversation=manifest.conversation,
        created=manifest.created,
        parent=manifest.parent,
        entries=tuple(reversed(manifest.entries)),
    )
    assert shuffled.snapshot_id == manifest.snapshot_id
    data.decode("ascii")  # canonical JSON is ASCII, whatever bytes the names held


@settings(max_examples=100, deadline=None)
@given(manifests(), st.integers(0, 0o7777))
def test_a_changed_mode_changes_the_id(manifest: Manifest, mode: int) -> None:
    if not manifest.entries or manifest.entries[0].mode == mode:
        return
    first = manifest.entries[0].model_copy(update={"mode": mode})
    changed = manifest.model_copy(update={"entries": (first, *manifest.entries[1:])})
    assert Manifest.from_json(changed.canonical_json()).snapshot_id != manifest.snapshot_id


def test_the_created_time_is_utc_whatever_zone_it_came_in() -> None:
    east = datetime(2026, 12, 7, 6, 40, tzinfo=timezone(timedelta(hours=1)))
    assert (
        Manifest(conversation="c", created=east).snapshot_id
        == Manifest(conversation="c", created=WHEN).snapshot_id
    )
    with pytest.raises(SnapshotManifestError):
        Manifest(conversation="c", created=datetime(2026, 1, 1))


_bad_parts = st.sampled_from(["", ".", ".."])


@settings(max_examples=200, deadline=None)
@given(st.lists(names, max_size=3), _bad_parts, st.lists(names, max_size=3))
def test_paths_with_an_empty_dot_or_dotdot_part_are_refused(
    before: list[str], bad: str, after: list[str]
) -> None:
    with pytest.raises(SnapshotPathError):
        check_path("/".join([*before, bad, *after]))


@given(st.lists(names, min_size=1, max_size=4))
def test_absolute_paths_are_refused_and_relative_ones_kept(parts: list[str]) -> None:
    path = "/".join(parts)
    assert check_path(path) == path
    with pytest.raises(SnapshotPathError):
        check_path("/" + path)
    with pytest.raises(SnapshotPathError):
        check_path(path + "/")
    with pytest.raises(SnapshotPathError):
        check_path(path + "\0x")


def _links(**targets: str) -> Manifest:
    entries = [Entry(path="d", kind="directory", mode=0o755)]
    entries += [
        Entry(path=path.replace("__", "/"), kind="symlink", mode=0o777, target=target)
        for path, target in targets.items()
    ]
    return Manifest(conversation="c", created=WHEN, entries=tuple(entries))


@pytest.mark.parametrize(
    "targets",
    [
        {"out": "/etc/passwd"},
        {"out": ".."},
        {"out": "d/../.."},
        {"d__out": "../../x"},
        {"root": ".", "out": "root/.."},  # each harmless lexically, out together
        {"up": "d/..", "out": "up/../x"},
        {"abs": "/tmp", "via": "abs/x"},
    ],
)
def test_links_out_of_the_workspace_are_refused(targets: dict[str, str]) -> None:
    with pytest.raises(SymlinkEscapeError):
        _links(**targets)


@pytest.mark.parametrize(
    "targets",
    [
        {"in": "d"},
        {"d__in": "../d"},
        {"dangling": "missing/file"},
        {"a": "d", "b": "a/../d"},
        {"loop_a": "loop_b", "loop_b": "loop_a/x"},  # never resolves: nothing to reach
        {"self": "self"},
    ],
)
def test_links_inside_the_workspace_are_kept(targets: dict[str, str]) -> None:
    assert _links(**targets).entries


@pytest.mark.parametrize(
    "entry",
    [
        {"path": "f", "kind": "file", "mode": 0o644},
        {"path": "f", "kind": "file", "mode": 0o644, "size": 1, "digest": "XY" * 32},
        {"path": "f", "kind": "file", "mode": 0o644, "size": 1, "digest": DIGEST, "target": "x"},
        {"path": "d", "kind": "directory", "mode": 0o755, "size": 1},
        {"path": "l", "kind": "symlink", "mode": 0o777},
        {"path": "f", "kind": "file", "mode": 0o10000, "size": 1, "digest": DIGEST},
    ],
)
def test_entries_whose_fields_do_not_fit_their_kind_are_refused(entry: dict[str, object]) -> None:
    with pytest.raises(SnapshotManifestError):
        Manifest.from_data({"conversation": "c", "created": WHEN.isoformat(), "entries": [entry]})


def test_a_path_under_a_missing_or_non_directory_parent_is_refused() -> None:
    file = {"path": "a/f", "kind": "file", "mode": 0o644, "size": 1, "digest": DIGEST}
    with pytest.raises(SnapshotManifestError, match="no directory entry"):
        Manifest.from_data({"conversation": "c", "created": WHEN.isoformat(), "entries": [file]})
    link = {"path": "a", "kind": "symlink", "mode": 0o777, "target": "b"}
    with pytest.raises(SnapshotManifestError, match="non-directory"):
        Manifest.from_data(
            {"conversation": "c", "created": WHEN.isoformat(), "entries": [link, file]}
        )


def test_duplicates_unknown_versions_and_fields_and_non_json_are_refused() -> None:
    entry = {"path": "d", "kind": "directory", "mode": 0o755}
    base = {"conversation": "c", "created": WHEN.isoformat()}
    for bad in (
        {**base, "entries": [entry, entry]},
        {**base, "version": 3},
        {**base, "version": 1, "listed_ns": 5, "lister": "ab" * 32},
        {**base, "secret": "x"},
        {**base, "parent": "not-a-digest"},
    ):
        with pytest.raises(SnapshotManifestError):
            Manifest.from_data(bad)
    with pytest.raises(SnapshotManifestError):
        Manifest.from_json(b"\xff not json")
    with pytest.raises(SnapshotManifestError):
        Manifest.from_json(b"[]")


def test_the_manifest_holds_only_paths_modes_sizes_digests_and_targets() -> None:
    manifest = _links(**{"in": "d"})
    data = json.loads(manifest.canonical_json())
    assert set(data) == {"version", "conversation", "created", "entries"}
    for entry in data["entries"]:
        assert set(entry) <= {"path", "kind", "mode", "size", "digest", "target"}
