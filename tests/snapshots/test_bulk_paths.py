"""The bulk paths of a snapshot (docs/durability.md, "Figures"): they check what the per-entry
paths check and give the very same entries, manifests and canonical JSON."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from skillruntime.core.durability.common import split_listing
from skillruntime.core.errors import SnapshotListingError, SnapshotManifestError, SnapshotPathError
from skillruntime.core.snapshots import Entry, ListingEntry, Manifest, parse_listing
from skillruntime.core.snapshots.planning import plan_snapshot

WHEN = datetime(2026, 12, 7, 5, 40, tzinfo=UTC)
DIGEST = "ab" * 32

# the strategies of test_listing.py and test_manifest.py (test modules do not import each other)
# hostile names: newlines, tabs, spaces, "->", backslashes, leading dashes, non-UTF-8 bytes
_hostile = st.binary(min_size=1, max_size=16).filter(
    lambda raw: b"\0" not in raw and b"/" not in raw and raw not in (b".", b"..")
)
_tricky = st.sampled_from(
    [b"a\nb", b"\tx", b" ", b"-rf", b"x -> y", b"\\n", b"\xff\xfe", b"caf\xc3\xa9", b"SNAPEND"]
)
names = _hostile | _tricky

_TYPE = {"file": "-", "directory": "d", "symlink": "l", "special": "p"}


def _mode_string(kind: str, mode: int) -> str:
    text = _TYPE[kind]
    for shift, (special, lower, upper) in zip(
        (6, 3, 0), ((0o4000, "s", "S"), (0o2000, "s", "S"), (0o1000, "t", "T")), strict=True
    ):
        bits = (mode >> shift) & 0o7
        text += "r" if bits & 4 else "-"
        text += "w" if bits & 2 else "-"
        if mode & special:
            text += lower if bits & 1 else upper
        else:
            text += "x" if bits & 1 else "-"
    return text


@st.composite
def listings(draw: st.DrawFn) -> list[tuple[bytes, ListingEntry]]:
    raws = draw(st.lists(st.lists(names, min_size=1, max_size=3), max_size=20))
    seen: dict[bytes, ListingEntry] = {}
    for parts in raws:
        raw = b"/".join(parts)
        if raw in seen:
            continue
        kind = draw(st.sampled_from(["file", "directory", "symlink", "special"]))
        mode = draw(st.integers(0, 0o7777))
        path = os.fsdecode(raw)
        if kind == "file":
            entry = ListingEntry(
                path,
                "file",
                mode,
                draw(st.integers(0, 2**50)),
                draw(st.binary(min_size=32, max_size=32)).hex(),
            )
        elif kind == "symlink":
            entry = ListingEntry(path, "symlink", mode, target=os.fsdecode(draw(names)))
        else:
            entry = ListingEntry(path, kind, mode)
        seen[raw] = entry
    return list(seen.items())


# any byte of a POSIX name but NUL and "/", decoded as the listing parser does
_name_bytes = st.binary(min_size=1, max_size=12).filter(
    lambda raw: b"\0" not in raw and b"/" not in raw and raw not in (b".", b"..")
)
manifest_names = _name_bytes.map(os.fsdecode)


@st.composite
def manifests(draw: st.DrawFn) -> Manifest:
    """A valid manifest: a tree of directories, files and in-workspace links."""
    entries: dict[str, Entry] = {}
    directories = [""]
    for _ in range(draw(st.integers(0, 12))):
        parent = draw(st.sampled_from(directories))
        name = draw(manifest_names)
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


def fast_emit(entries: list[tuple[bytes, ListingEntry]]) -> bytes:
    """What the fast listing prints for these entries (its records, then the digests)."""
    out = [b"SNAPFAST2", b"1000.5"]
    sums = []
    for raw, entry in entries:
        letter = {"file": b"f", "directory": b"d", "symlink": b"l", "special": b"p"}[entry.kind]
        target = os.fsencode(entry.target or "") if entry.kind == "symlink" else b""
        mode = _mode_string(entry.kind, entry.mode).encode()
        out += [letter, b"./" + raw, mode, b"%d" % (entry.size or 0), target, b"1:2:3:4.5:6.7"]
        if entry.kind == "file":
            sums.append(f"{entry.digest}  ".encode() + b"./" + raw)
    out += [b"SNAPSUMS", *sums, b"SNAPEND"]
    return b"\0".join(out) + b"\0"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(listings())
def test_the_fast_listing_gives_what_the_portable_parser_gives(
    entries: list[tuple[bytes, ListingEntry]],
) -> None:
    # a symlink target ending in a newline reads back without it on both paths (readlink's)
    fast = split_listing(fast_emit(entries))
    assert fast is not None
    expected = parse_listing(fast.portable())
    assert fast.entries(max_entries=1000) == expected
    assert [os.fsencode(entry.path) for entry in expected] == sorted(raw for raw, _ in entries)


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([(b"f", b"./a", b"-rw-r--r--"), (b"f", b"./a", b"-rw-r--r--")], "twice"),
        ([(b"f", b"a", b"-rw-r--r--")], "start with ./"),
        ([(b"f", b"./a/../b", b"-rw-r--r--")], "normalized"),
        ([(b"d", b"./a", b"-rw-r--r--")], "match its record's kind"),
        ([(b"f", b"./a", b"-rw-r--rQ-")], "unknown permission letter"),
        ([(b"l", b"./a", b"lrwxrwxrwx")], "empty target"),
        ([(b"f", b"./" + b"x" * 70_000, b"-rw-r--r--")], "over"),
    ],
)
def test_the_fast_listing_refuses_what_the_parser_refuses(
    records: list[tuple[bytes, bytes, bytes]], message: str
) -> None:
    out = [b"SNAPFAST2", b"1000.5"]
    for kind, path, mode in records:
        out += [kind, path, mode, b"5", b"", b"1:2:5:4.5:6.7"]
    out += [b"SNAPSUMS", *(DIGEST.encode() + b"  " + path for _, path, _ in records[:1])]
    out += [b"SNAPEND"]
    fast = split_listing(b"\0".join(out) + b"\0")
    assert fast is not None
    with pytest.raises(SnapshotListingError, match=message):
        fast.entries(max_entries=1000)
    with pytest.raises(SnapshotListingError, match=message):
        parse_listing(fast.portable())


def test_the_fast_listing_holds_its_entry_bound() -> None:
    records = [(b"./f%d" % index, b"1:%d:5:4.5:6.7" % index) for index in range(3)]
    out = [b"SNAPFAST2", b"1000.5"]
    for path, key in records:
        out += [b"d", path, b"drwxr-xr-x", b"4096", b"", key]
    fast = split_listing(b"\0".join([*out, b"SNAPSUMS", b"SNAPEND"]) + b"\0")
    assert fast is not None
    assert len(fast.entries(max_entries=3)) == 3
    with pytest.raises(SnapshotListingError, match="more than 2"):
        fast.entries(max_entries=2)


@pytest.mark.parametrize(
    "fields",
    [
        {"path": "a", "kind": "file", "mode": 0o644, "size": 3, "digest": DIGEST},
        {"path": "a/b c", "kind": "directory", "mode": 0o7777},
        {"path": "l\udcff", "kind": "symlink", "mode": 0o777, "target": "x"},
    ],
)
def test_a_checked_entry_equals_the_validated_one(fields: dict[str, object]) -> None:
    checked = Entry.checked(**fields)  # type: ignore[arg-type]
    validated = Entry.model_validate(fields)
    assert checked == validated
    assert checked.model_dump() == validated.model_dump()
    assert checked.model_fields_set == validated.model_fields_set
    assert checked.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    with pytest.raises(Exception, match="frozen"):
        checked.mode = 0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"path": "/a", "kind": "directory", "mode": 0o755}, SnapshotPathError),
        ({"path": "a/./b", "kind": "directory", "mode": 0o755}, SnapshotPathError),
        ({"path": "a/", "kind": "directory", "mode": 0o755}, SnapshotPathError),
        ({"path": "..", "kind": "directory", "mode": 0o755}, SnapshotPathError),
        ({"path": "a\0b", "kind": "directory", "mode": 0o755}, SnapshotPathError),
        ({"path": "", "kind": "directory", "mode": 0o755}, SnapshotPathError),
        ({"path": "a", "kind": "directory", "mode": True}, SnapshotManifestError),
        ({"path": "a", "kind": "directory", "mode": 0o10000}, SnapshotManifestError),
        ({"path": "a", "kind": "fifo", "mode": 0o644}, SnapshotManifestError),
        ({"path": "a", "kind": "file", "mode": 0o644, "size": 1}, SnapshotManifestError),
        (
            {"path": "a", "kind": "file", "mode": 0o644, "size": -1, "digest": DIGEST},
            SnapshotManifestError,
        ),
        (
            {"path": "a", "kind": "file", "mode": 0o644, "size": 1, "digest": DIGEST.upper()},
            SnapshotManifestError,
        ),
        (
            {"path": "a", "kind": "file", "mode": 0o644, "size": "1", "digest": DIGEST},
            SnapshotManifestError,
        ),
        ({"path": "a", "kind": "symlink", "mode": 0o777}, SnapshotManifestError),
        ({"path": "a", "kind": "symlink", "mode": 0o777, "target": "x\0"}, SnapshotManifestError),
        ({"path": "a", "kind": "directory", "mode": 0o755, "size": 0}, SnapshotManifestError),
    ],
)
def test_a_checked_entry_refuses_what_validation_refuses(
    fields: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        Entry.checked(**fields)  # type: ignore[arg-type]
    with pytest.raises((SnapshotManifestError, ValidationError)):
        Entry.model_validate(fields)


@settings(max_examples=150, deadline=None)
@given(manifests())
def test_the_canonical_json_is_pydantics_dump_and_is_kept_once_made(manifest: Manifest) -> None:
    data = json.loads(manifest.canonical_json())
    assert data["entries"] == [entry.model_dump(exclude_none=True) for entry in manifest.entries]
    assert manifest.canonical_json() is manifest.canonical_json()
    again = Manifest.from_json(manifest.canonical_json())
    assert again == manifest
    assert again.snapshot_id == manifest.snapshot_id


def test_a_copy_with_an_update_gets_its_own_id() -> None:
    manifest = Manifest(
        conversation="c",
        created=WHEN,
        entries=(Entry(path="a", kind="directory", mode=0o755),),
    )
    first = manifest.snapshot_id
    changed = manifest.model_copy(update={"conversation": "d"})
    assert changed.snapshot_id != first
    assert changed.snapshot_id == Manifest.from_json(changed.canonical_json()).snapshot_id
    assert manifest.model_copy().snapshot_id == first


def test_a_planned_manifest_equals_a_validated_one() -> None:
    listing = [
        ListingEntry("d", "directory", 0o755),
        ListingEntry("d/f", "file", 0o644, 3, DIGEST),
        ListingEntry("d/l", "symlink", 0o777, target="f"),
    ]
    manifest, uploads = plan_snapshot(listing, None, conversation="c", created=WHEN)
    assert uploads == [DIGEST]
    assert manifest == Manifest.from_json(manifest.canonical_json())
    bad = [ListingEntry("d/../x", "directory", 0o755)]
    with pytest.raises(SnapshotPathError):
        plan_snapshot(bad, None, conversation="c")


def test_a_link_whose_target_is_a_marker_of_the_listing_is_read_as_a_target() -> None:
    # Found by the property above: a target of b"SNAPSUMS" was taken for the digests' marker.
    entry = ListingEntry(
        path="\x01", kind="symlink", mode=0, size=None, digest=None, target="SNAPSUMS"
    )
    fast = split_listing(fast_emit([(b"\x01", entry)]))
    assert fast is not None
    assert fast.entries(max_entries=10) == parse_listing(fast.portable())
    assert fast.entries(max_entries=10)[0].target == "SNAPSUMS"
