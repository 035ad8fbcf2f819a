"""Contract 5 (``docs/architecture.md``), derived search: ``glob`` and ``grep`` of the file system.

A backend may override :meth:`~skillruntime.core.files.spi.SkillRuntimeFileSystem.glob` and
:meth:`~skillruntime.core.files.spi.SkillRuntimeFileSystem.grep` (one command in its sandbox, for
example); these tests check that the override returns exactly what the default implementation on
the primitives returns for the same tree, and that hostile patterns and file names run nothing.

The expected answer is the default implementation run, without a time budget, over
:class:`TreeFileSystem`: the tree the kit wrote to the runtime, held in memory at the runtime's
paths. So a loaded machine cannot cut the reference walk short, and the runtime is asked once
per query (a walk over a remote service costs one request per directory and file).

The tree is created with one shell command (:func:`tree_command`; a file API may not carry every
name, and one request per file would cost more than the searches). It holds file names with a
newline, a carriage return, a tab and bytes that are not UTF-8. Every runtime names
them as the local one does: the bytes decoded as UTF-8 with ``surrogateescape`` (``0xff`` is
``"\\udcff"``), so a returned path names the file that exists.
"""

from __future__ import annotations

import dataclasses
import math
import os
import posixpath
import shlex
from collections.abc import Generator, Iterable

from ..errors import RuntimeFileNotFoundError
from ..files.search import (
    GlobQuery,
    GrepQuery,
    default_glob,
    default_grep,
)
from ..files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, SkillRuntimeFileSystem
from ..models import FileInfo, SkillExecutionRequest
from ..runtime.spi import SkillRuntime
from .base import ConformanceBase
from .context import ConformanceContext

__all__ = [
    "SearchContracts",
    "TreeFileSystem",
    "hostile_names",
    "odd_files",
    "odd_names",
    "search_tree_files",
    "tree_command",
    "write_tree",
]

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

_ODD_NAMES = (
    "new\nline.txt",
    # Read line by line, this name would list a file "GHOST.txt" that does not exist.
    "GHOST.txt\nf\t7\t1.0\t644\tphantom.txt",
    "carriage\rreturn.txt",
    "tab\tname.txt",
    os.fsdecode(b"bad\xff\xfe.txt") if os.name == "posix" else "bad.txt",
    os.fsdecode(b"caf\xe9 latin-1.txt") if os.name == "posix" else "cafe.txt",
)


def hostile_names() -> tuple[str, ...]:
    """File names with every shell metacharacter a model might smuggle into a search."""
    return _HOSTILE_NAMES


def odd_names() -> tuple[str, ...]:
    """File names a line-wise or UTF-8-only listing corrupts: a newline (one even shaped like a
    second listing entry), a carriage return, a tab, and undecodable bytes (as
    ``surrogateescape`` decodes them)."""
    return _ODD_NAMES


def odd_files() -> dict[str, bytes]:
    """A file for each of :func:`odd_names` in ``odd/`` (relative path to content)."""
    return {
        f"odd/{name}": f"odd {index} needle\n".encode() for index, name in enumerate(_ODD_NAMES)
    }


def search_tree_files() -> dict[str, bytes]:
    """The files the search contracts write (relative path to content), odd names included."""
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
    files.update(odd_files())
    return files


_PRINTF_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._ ")


def _printf_bytes(data: bytes) -> str:
    """A ``printf`` format printing ``data`` exactly: octal escapes for all but a few bytes (no
    ``%``, ``\\``, quote or leading ``-`` is left to the shell or to ``printf``)."""
    return "".join(chr(b) if b in _PRINTF_SAFE else f"\\{b:03o}" for b in data)


def tree_command(base: str, files: dict[str, bytes]) -> str:
    """One shell command creating ``files`` (relative path to content) below ``base`` (relative
    to its working directory). Paths and contents travel as ``printf`` escapes, so the command
    is ASCII whatever they hold, and a file API need not carry a name it cannot encode."""
    directories = sorted({posixpath.dirname(path) for path in files} - {""})
    steps = [f"mkdir -p -- {shlex.quote(base)}", f"cd -- {shlex.quote(base)}"]
    if directories:
        # The directory names are plain; only file names are odd.
        steps.append("mkdir -p -- " + " ".join(shlex.quote(d) for d in directories))
    for path, data in files.items():
        # The command substitution drops trailing newlines: no name here ends with one.
        steps.append(
            f"printf '{_printf_bytes(data)}' > \"$(printf '{_printf_bytes(os.fsencode(path))}')\""
        )
    return " && ".join(steps)


def write_tree(runtime: SkillRuntime, base: str, files: dict[str, bytes]) -> None:
    """Create ``files`` below ``base`` in the runtime with :func:`tree_command` (one
    ``execute``: it shares the file system's boundary)."""
    result = runtime.execute(SkillExecutionRequest(command=tree_command(base, files)))
    assert result.exit_code == 0, result.stderr


class TreeFileSystem(SkillRuntimeFileSystem):
    """A file tree held in memory at runtime paths (POSIX, absolute): the six primitives over a
    dictionary of file contents, so the default ``glob``/``grep`` over it is the reference answer
    for the same tree written to a runtime. Directories are those the files imply plus those
    made with :meth:`make_directory`; nothing is executable or special."""

    def __init__(self, files: dict[str, bytes] | None = None) -> None:
        self._files: dict[str, bytes] = {}
        self._directories: set[str] = {"/"}
        for path, data in (files or {}).items():
            self.write_bytes(path, data)

    @staticmethod
    def _normal(path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"TreeFileSystem paths are absolute: {path!r}")
        return posixpath.normpath(path).replace("//", "/")

    def _add_parents(self, path: str) -> None:
        parent = posixpath.dirname(path)
        while parent not in self._directories:
            self._directories.add(parent)
            parent = posixpath.dirname(parent)

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        data = self._files.get(self._normal(path))
        if data is None:
            raise RuntimeFileNotFoundError(f"No such file: {path}", path=path)
        for start in range(0, len(data), chunk_size):
            yield data[start : start + chunk_size]

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        path = self._normal(path)
        data = b"".join(chunks)
        self._files[path] = data
        self._add_parents(path)
        return len(data)

    def _info(self, path: str) -> FileInfo | None:
        if path in self._directories:
            return FileInfo(path=path, is_directory=True, modified_time=0.0)
        data = self._files.get(path)
        if data is None:
            return None
        return FileInfo(path=path, is_directory=False, size=len(data), modified_time=0.0)

    def stat(self, path: str) -> FileInfo | None:
        return self._info(self._normal(path))

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        path = self._normal(path)
        info = self._info(path)
        if info is None:
            raise RuntimeFileNotFoundError(f"No such file or directory: {path}", path=path)
        if not info.is_directory:
            return [info]
        found: list[FileInfo] = []
        for candidate in sorted(self._directories | set(self._files)):
            if candidate == path or not candidate.startswith(path.rstrip("/") + "/"):
                continue
            level = candidate[len(path.rstrip("/")) :].count("/")
            entry = self._info(candidate)
            if entry is not None and level <= max(depth, 1):
                found.append(entry)
        return found[: max(limit, 0)]

    def delete(self, path: str) -> None:
        path = self._normal(path)
        inside = path.rstrip("/") + "/"
        self._files = {
            p: d for p, d in self._files.items() if p != path and not p.startswith(inside)
        }
        self._directories = {
            d for d in self._directories if d == "/" or (d != path and not d.startswith(inside))
        }

    def make_directory(self, path: str) -> None:
        path = self._normal(path)
        self._directories.add(path)
        self._add_parents(path)


def _reference(root: FileInfo) -> tuple[TreeFileSystem, FileInfo]:
    """The tree of :func:`search_tree_files` below the runtime directory ``root``, in memory."""
    tree = TreeFileSystem(
        {f"{root.path.rstrip('/')}/{path}": data for path, data in search_tree_files().items()}
    )
    reference_root = tree.stat(root.path)
    assert reference_root is not None
    return tree, reference_root


def _unbounded(query: GrepQuery) -> GrepQuery:
    return dataclasses.replace(query, time_budget=math.inf)


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
        GlobQuery("odd/*"),
        GlobQuery("**/*.txt", max_files=12),
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
        write_tree(runtime, "searched", search_tree_files())
        root = fs.stat("searched")
        assert root is not None
        tree, reference_root = _reference(root)
        for query in _queries():
            expected = default_grep(tree, reference_root, _unbounded(query))
            actual = fs.grep(root, query)
            assert actual.entries == expected.entries, query
            assert actual.truncated == expected.truncated, query
        single = fs.stat("searched/src/a/x.py")
        assert single is not None
        query = GrepQuery("needle", output_mode="content")
        reference_single = tree.stat(single.path)
        assert reference_single is not None
        expected_single = default_grep(tree, reference_single, _unbounded(query))
        assert fs.grep(single, query).entries == expected_single.entries
        assert fs.stat("searched/PWNED") is None
        assert fs.stat("PWNED") is None

    def test_glob_matches_the_default_implementation(self, conformance: ConformanceContext) -> None:
        runtime = conformance.runtime()
        fs = runtime.get_file_system()
        write_tree(runtime, "globbed", search_tree_files())
        root = fs.stat("globbed")
        assert root is not None
        tree, reference_root = _reference(root)
        for query in _globs():
            expected = default_glob(tree, reference_root, query)
            actual = fs.glob(root, query)
            assert _paths(actual.entries) == _paths(expected.entries), query
            assert [e.size for e in actual.entries] == [e.size for e in expected.entries]
            assert actual.truncated == expected.truncated, query
        assert fs.stat("globbed/PWNED") is None
        assert fs.stat("PWNED") is None
