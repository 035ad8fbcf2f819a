"""Contract 5b of DESIGN §3: the derived search operations of the runtime file system.

A backend may override :meth:`~skillruntime.core.filesystem.SkillRuntimeFileSystem.glob` and
:meth:`~skillruntime.core.filesystem.SkillRuntimeFileSystem.grep` (one command in its sandbox, for
example); these tests check that the override returns exactly what the default implementation on
the primitives returns for the same tree, and that hostile patterns and file names run nothing.
"""

from __future__ import annotations

from ..file_search import (
    GlobQuery,
    GrepQuery,
    default_glob,
    default_grep,
)
from ..filesystem import SkillRuntimeFileSystem
from ..models import FileInfo
from .base import ConformanceBase
from .context import ConformanceContext

__all__ = ["SearchContracts", "hostile_names", "search_tree"]

_HOSTILE_NAMES = (
    "it's.txt",
    'say "hi".txt',
    "$(touch PWNED).txt",
    "`touch PWNED`.txt",
    "semi;colon.txt",
    "-rf.txt",
    "back\\slash.txt",
    "star*.txt",
    "pipe|amp&.txt",
)


def hostile_names() -> tuple[str, ...]:
    """File names with every shell metacharacter a model might smuggle into a search."""
    return _HOSTILE_NAMES


def search_tree(fs: SkillRuntimeFileSystem, base: str) -> None:
    """Write the tree the search contracts compare over below ``base``."""
    files: dict[str, bytes] = {
        "README.md": b"# Title\nneedle at the top\n",
        "src/app.py": b"import os\n\ndef needle():\n    return 'Needle'\n# needle again\n",
        "src/app.pyi": b"def needle() -> None: ...\n",
        "src/a-b/x.py": b"needle = 1\n",
        "src/a/x.py": b"haystack\nneedle\nhaystack\nhaystack\nneedle\n",
        "src/deep/er/est/leaf.txt": b"needle in the deep\n",
        "docs/guide.md": b"line one\nline two\nNEEDLE upper\nneedle lower\n",
        "docs/long.txt": b"x" * 10_001 + b"needle\nneedle short\n",
        "bin/blob.bin": b"\xff\xfe needle \x00\x01",
        "node_modules/pkg/index.js": b"needle in noise\n",
        "build/out.txt": b"needle in build\n",
        "multi/one.txt": b"first line\nsecond needle\nthird\n",
    }
    for index, name in enumerate(_HOSTILE_NAMES):
        files[f"odd/{name}"] = f"hostile {index} needle $(touch PWNED)\n".encode()
    for index in range(30):
        marker = "needle" if index % 3 else ""
        files[f"many/f{index:02d}.txt"] = f"file {index}\n{marker}\n".encode()
    for path, data in files.items():
        fs.write_bytes(f"{base}/{path}", data)


def _queries() -> list[GrepQuery]:
    return [
        GrepQuery("needle"),
        GrepQuery("needle", output_mode="content"),
        GrepQuery("needle", output_mode="content", before=1, after=1),
        GrepQuery("needle", output_mode="content", show_line_numbers=False),
        GrepQuery("needle", output_mode="count"),
        GrepQuery("needle", case_insensitive=True, output_mode="content"),
        GrepQuery("ne+dle|hay", output_mode="count"),
        GrepQuery("second.*\\n?third", multiline=True, output_mode="content"),
        GrepQuery("needle", glob="*.py"),
        GrepQuery("needle", file_types=("*.md", "*.markdown"), output_mode="content"),
        GrepQuery("needle", offset=3, head_limit=4),
        GrepQuery("needle", max_files=7),
        GrepQuery("needle", max_file_bytes=30),
        GrepQuery("needle", max_depth=2, output_mode="content"),
        GrepQuery("$(touch PWNED)", output_mode="content"),
        GrepQuery("'; touch PWNED; echo '", output_mode="content"),
        GrepQuery("-e needle"),
        GrepQuery("no such text anywhere"),
    ]


def _globs() -> list[GlobQuery]:
    return [
        GlobQuery("*.py"),
        GlobQuery("src/**/*.py"),
        GlobQuery("**/x.py"),
        GlobQuery("*.{md,txt}"),
        GlobQuery("many/f1?.txt"),
        GlobQuery("$(touch PWNED)*"),
        GlobQuery("*", max_files=5),
        GlobQuery("*", max_depth=1),
    ]


def _paths(result: list[FileInfo]) -> list[str]:
    return [entry.path for entry in result]


class SearchContracts(ConformanceBase):
    """``glob`` and ``grep`` of the file system return what the default implementation does."""

    def test_grep_matches_the_default_implementation(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        fs = runtime.get_file_system()
        search_tree(fs, "searched")
        root = fs.stat("searched")
        assert root is not None
        for query in _queries():
            expected = default_grep(fs, root, query)
            actual = fs.grep(root, query)
            assert actual.entries == expected.entries, query
            assert actual.truncated == expected.truncated, query
        single = fs.stat("searched/src/a/x.py")
        assert single is not None
        query = GrepQuery("needle", output_mode="content")
        assert fs.grep(single, query).entries == default_grep(fs, single, query).entries
        assert fs.stat("searched/PWNED") is None
        assert fs.stat("PWNED") is None

    def test_glob_matches_the_default_implementation(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        fs = runtime.get_file_system()
        search_tree(fs, "globbed")
        root = fs.stat("globbed")
        assert root is not None
        for query in _globs():
            expected = default_glob(fs, root, query)
            actual = fs.glob(root, query)
            assert _paths(actual.entries) == _paths(expected.entries), query
            assert [e.size for e in actual.entries] == [e.size for e in expected.entries]
            assert actual.truncated == expected.truncated, query
        assert fs.stat("globbed/PWNED") is None
        assert fs.stat("PWNED") is None
