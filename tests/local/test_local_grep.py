"""The local file system's own ``grep`` (descriptor walk, one read per file) against the default
implementation on the primitives, over generated trees with links inside and out of the
workspace, FIFOs, noise directories, undecodable, oversized and long-lined files.

The default is the reference: the override must return the same entries and flags for every
query, and no entry may ever carry content or names from outside the workspace.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillruntime.core.files.search import GrepQuery, default_grep
from skillruntime.core.runtime.scoped import ScopedFileSystem
from skillruntime.local import LocalSkillRuntime
from skillruntime.local.filesystem import LocalFileSystem

OUTSIDE = b"needle OUTSIDE SECRET\n"

NAMES = st.sampled_from(["a", "b.txt", "c.py", "node_modules", "build", "d e", "x%y", "é.md"])
CONTENTS = st.sampled_from(
    [
        b"needle\n",
        b"no match here\n",
        b"line\r\nneedle\r\n",
        b"\xff\xfe needle \x00",
        b"x" * 10_001 + b"needle\n",
        b"needle " * 20,
        b"Needle\nNEEDLE\nneedle\n",
        b"",
        "needle \u00e9\u2028needle\n".encode(),
    ]
)


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, str, bytes]]:
    """``(kind, relative path, data)`` entries: files, links (inside, outside, dangling,
    to a directory) and FIFOs, up to three levels deep."""
    entries: list[tuple[str, str, bytes]] = []
    for _ in range(draw(st.integers(1, 14))):
        parts = draw(st.lists(NAMES, min_size=1, max_size=3))
        kind = draw(
            st.sampled_from(["file"] * 6 + ["inside", "outside", "dangling", "dir", "fifo"])
        )
        entries.append((kind, "/".join(parts), draw(CONTENTS)))
    return entries


QUERIES = st.builds(
    GrepQuery,
    pattern=st.sampled_from(["needle", "ne+dle", "SECRET", "needle\u2028", "é", "x{3}"]),
    case_insensitive=st.booleans(),
    output_mode=st.sampled_from(["files_with_matches", "content", "count"]),
    glob=st.sampled_from([None, "*.txt", "**/a"]),
    head_limit=st.sampled_from([None, 1, 3]),
    max_files=st.sampled_from([2, 5000]),
    max_depth=st.sampled_from([1, 2, 100]),
    max_file_bytes=st.sampled_from([30, 2 * 1024 * 1024]),
)


def _build(workspace: Path, outside: Path, entries: list[tuple[str, str, bytes]]) -> None:
    for kind, relative, data in entries:
        target = workspace / relative
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists() or target.is_symlink():
                continue
            if kind == "file":
                target.write_bytes(data)
            elif kind == "inside":
                (workspace / "linked.txt").write_bytes(data)
                target.symlink_to(workspace / "linked.txt")
            elif kind == "outside":
                target.symlink_to(outside / "secret.txt")
            elif kind == "dangling":
                target.symlink_to(workspace / "missing")
            elif kind == "dir":
                target.symlink_to(outside)
            else:
                os.mkfifo(target)
        except (FileExistsError, NotADirectoryError):
            continue  # a generated path runs through a file made earlier


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.lists(QUERIES, min_size=1, max_size=4))
def test_the_local_grep_returns_what_the_default_returns(
    entries: list[tuple[str, str, bytes]], queries: list[GrepQuery]
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        outside = Path(scratch) / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_bytes(OUTSIDE)
        with LocalSkillRuntime(conversation_id="g", conversations_root=Path(scratch) / "c") as rt:
            fs = rt.get_file_system()
            assert isinstance(fs, ScopedFileSystem)
            assert isinstance(fs.inner, LocalFileSystem)
            workspace = Path(rt.default_working_directory)
            _build(workspace, outside, entries)
            root = fs.stat(".")
            assert root is not None
            for query in queries:
                expected = default_grep(fs, root, query)
                actual = fs.grep(root, query)
                assert actual.entries == expected.entries, query
                assert actual.truncated == expected.truncated, query
                assert not actual.out_of_time
                assert not any("SECRET" in entry for entry in actual.entries)


def test_an_out_of_time_search_stops_with_the_flag(tmp_path: Path) -> None:
    with LocalSkillRuntime(conversation_id="t", conversations_root=tmp_path) as runtime:
        fs = runtime.get_file_system()
        for index in range(5):
            fs.write_text(f"f{index}.txt", "needle\n")
        root = fs.stat(".")
        assert root is not None
        result = fs.grep(root, GrepQuery("needle", time_budget=-1.0))
        assert result.out_of_time
        assert result.entries == []
        assert fs.grep(root, GrepQuery("needle")).entries == [
            f"{runtime.default_working_directory}/f{index}.txt" for index in range(5)
        ]


def test_files_over_the_size_limit_are_skipped(tmp_path: Path) -> None:
    fs = LocalFileSystem(str(tmp_path), root=str(tmp_path))
    (tmp_path / "small.txt").write_text("needle\n")
    (tmp_path / "big.txt").write_text("needle\n" * 10)
    root = fs.stat(str(tmp_path))
    assert root is not None
    query = GrepQuery("needle", max_file_bytes=20)
    assert fs.grep(root, query).entries == [str(tmp_path / "small.txt")]
    assert fs.grep(root, query).entries == default_grep(fs, root, query).entries
