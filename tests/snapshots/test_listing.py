"""The listing script and its parser: hostile names, fail-closed parsing, and a differential
check of the script (this machine's ``sh``, ``find``, ``ls`` and ``sha256sum``) against a walk in
Python over the same generated tree."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillruntime.core.errors import SnapshotListingError
from skillruntime.core.snapshots import ListingEntry, listing_command, parse_listing

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


def emit(entries: list[tuple[bytes, ListingEntry]]) -> bytes:
    """What the script prints for these entries (raw path bytes beside each entry)."""
    out = [b"SNAPLIST1"]
    for raw, entry in entries:
        letter = {"file": b"f", "directory": b"d", "symlink": b"l", "special": b"o"}[entry.kind]
        line = _mode_string(entry.kind, entry.mode).encode() + b" 1 0 0 9 Dec  7 05:42 ./" + raw
        out += [letter, b"./" + raw, line + b"\n"]
        if entry.kind == "file":
            out += [b"%7d\n" % (entry.size or 0), f"{entry.digest}  -\n".encode()]
        elif entry.kind == "symlink":
            out += [os.fsencode(entry.target or "") + b"\n"]
    out.append(b"SNAPEND")
    return b"\0".join(out) + b"\0"


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


@settings(max_examples=300, deadline=None)
@given(listings(), st.integers(1, 64))
def test_the_parser_reads_back_every_hostile_name_in_any_chunking(
    entries: list[tuple[bytes, ListingEntry]], chunk: int
) -> None:
    data = emit(entries)
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    parsed = parse_listing(chunks)
    assert parsed == sorted((entry for _, entry in entries), key=lambda e: os.fsencode(e.path))
    assert [os.fsencode(entry.path) for entry in parsed] == sorted(raw for raw, _ in entries)


@settings(max_examples=200, deadline=None)
@given(listings().filter(bool), st.data())
def test_a_truncated_listing_is_refused(
    entries: list[tuple[bytes, ListingEntry]], data: st.DataObject
) -> None:
    whole = emit(entries)
    cut = data.draw(st.integers(0, len(whole) - 1))
    with pytest.raises(SnapshotListingError):
        parse_listing(whole[:cut])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_refused_or_parsed_never_crash(data: bytes) -> None:
    with contextlib.suppress(SnapshotListingError):
        parse_listing(b"SNAPLIST1\0" + data)


DIGEST = "ab" * 32


@pytest.mark.parametrize(
    "records",
    [
        [b"x", b"./a", b"-rw-r--r-- 1"],  # unknown kind
        [b"f", b"a", b"-rw-r--r-- 1", b"1", DIGEST.encode() + b"  -"],  # no ./
        [b"f", b"./a/../b", b"-rw-r--r-- 1", b"1", DIGEST.encode() + b"  -"],
        [b"f", b"./a", b"drw-r--r-- 1", b"1", DIGEST.encode() + b"  -"],  # type disagrees
        [b"f", b"./a", b"-rw-r--r-Q 1", b"1", DIGEST.encode() + b"  -"],  # unknown letter
        [b"f", b"./a", b"-rw-r--r-- 1", b"-1", DIGEST.encode() + b"  -"],
        [b"f", b"./a", b"-rw-r--r-- 1", b"1", b"zz  -"],
        [b"l", b"./a", b"lrwxrwxrwx 1", b"\n"],  # empty target
        [b"d", b"./a", b"drwxr-xr-x 1", b"d", b"./a", b"drwxr-xr-x 1"],  # twice
    ],
)
def test_records_the_parser_cannot_classify_are_refused(records: list[bytes]) -> None:
    with pytest.raises(SnapshotListingError):
        parse_listing(b"\0".join([b"SNAPLIST1", *records, b"SNAPEND"]) + b"\0")


def test_a_missing_header_trailer_or_data_after_the_trailer_is_refused() -> None:
    record = [b"d", b"./a", b"drwxr-xr-x 1 0 0"]
    for bad in (
        [*record, b"SNAPEND"],
        [b"SNAPLIST1", *record],
        [b"SNAPLIST1", b"SNAPEND", *record],
    ):
        with pytest.raises(SnapshotListingError):
            parse_listing(b"\0".join(bad) + b"\0")


def test_limits_on_entries_and_field_length_hold() -> None:
    many = [b"SNAPLIST1"]
    for index in range(11):
        many += [b"d", b"./d%d" % index, b"drwxr-xr-x 1"]
    data = b"\0".join([*many, b"SNAPEND"]) + b"\0"
    assert len(parse_listing(data, max_entries=11)) == 11
    with pytest.raises(SnapshotListingError, match="more than 10"):
        parse_listing(data, max_entries=10)
    with pytest.raises(SnapshotListingError, match="over"):
        parse_listing([b"SNAPLIST1\0", b"x" * 100], max_field_bytes=64)


# -- differential: the real script against a Python walk ---------------------------------------


def python_walk(root: Path) -> list[ListingEntry]:
    found = []
    for directory, dirnames, filenames in os.walk(os.fsencode(root)):
        for name in [*dirnames, *filenames]:
            full = os.path.join(directory, name)
            relative = os.fsdecode(os.path.relpath(full, os.fsencode(root)))
            info = os.lstat(full)
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                found.append(
                    ListingEntry(relative, "symlink", mode, target=os.fsdecode(os.readlink(full)))
                )
            elif stat.S_ISDIR(info.st_mode):
                found.append(ListingEntry(relative, "directory", mode))
            elif stat.S_ISREG(info.st_mode):
                with open(full, "rb") as stream:
                    digest = hashlib.sha256(stream.read()).hexdigest()
                found.append(ListingEntry(relative, "file", mode, info.st_size, digest))
            else:
                found.append(ListingEntry(relative, "special", mode))
    return sorted(found, key=lambda entry: os.fsencode(entry.path))


_tree_names = names.filter(lambda raw: len(raw) < 100)


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, bytes, int, bytes]]:
    """(kind, relative path, mode, content or link target) in creation order."""
    made: list[tuple[str, bytes, int, bytes]] = []
    directories = [b""]
    for _ in range(draw(st.integers(0, 10))):
        parent = draw(st.sampled_from(directories))
        raw = (parent + b"/" if parent else b"") + draw(_tree_names)
        if any(raw == item[1] for item in made):
            continue
        kind = draw(st.sampled_from(["file", "directory", "symlink", "fifo"]))
        if kind == "directory":
            made.append((kind, raw, draw(st.sampled_from([0o755, 0o700, 0o2775, 0o1777])), b""))
            directories.append(raw)
        elif kind == "file":
            mode = draw(st.sampled_from([0o644, 0o600, 0o755, 0o4755, 0o444, 0o000]))
            made.append((kind, raw, mode, draw(st.binary(max_size=300))))
        else:
            made.append((kind, raw, 0o644, draw(_tree_names)))
    return made


@pytest.mark.slow
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(trees())
def test_the_script_lists_what_a_python_walk_sees(
    tmp_path: Path, tree: list[tuple[str, bytes, int, bytes]]
) -> None:
    if shutil.which("sha256sum") is None:
        pytest.skip("no sha256sum")
    root = tmp_path / os.urandom(6).hex()
    root.mkdir()
    base = os.fsencode(root)
    try:
        for kind, raw, mode, payload in tree:
            full = os.path.join(base, raw)
            if kind == "directory":
                os.mkdir(full)
            elif kind == "file":
                with open(full, "wb") as stream:
                    stream.write(payload)
            elif kind == "symlink":
                os.symlink(payload, full)
            else:
                os.mkfifo(full)
            if kind in ("file", "fifo"):
                os.chmod(full, mode)
        for kind, raw, mode, _ in reversed(tree):  # directories last, after their contents
            if kind == "directory":
                os.chmod(os.path.join(base, raw), mode)
        if os.geteuid() != 0 and any(k == "file" and m & 0o400 == 0 for k, _, m, _ in tree):
            return  # an unreadable file fails the listing for a non-root user (tested below)
        output = subprocess.run(listing_command(str(root)), capture_output=True, check=True)
        assert parse_listing(output.stdout) == python_walk(root)
    finally:
        for directory, _, _ in os.walk(base):
            os.chmod(directory, 0o755)


def test_a_failing_command_leaves_no_trailer_and_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ok").write_text("x")
    result = subprocess.run(
        listing_command(str(tmp_path / "missing")), capture_output=True, check=False
    )
    assert result.returncode != 0
    with pytest.raises(SnapshotListingError):
        parse_listing(result.stdout)
