"""Glob matching and the noise-skipping directory walk shared by ``ls``, ``glob`` and ``grep``.

Glob rules: ``*`` matches any characters except ``/``; ``?`` one character except ``/``;
``[...]``/``[!...]`` a character class; ``{a,b}`` alternatives; ``**`` as a whole path segment
matches zero or more directories (``**/x`` matches ``x``, ``a/x`` and ``a/b/x``; ``a/**`` everything
below ``a``). A pattern without ``/`` matches the file *name* at any depth; a pattern with ``/`` is
matched against the whole path relative to the search root. The walk skips entries that are
neither regular files nor directories (``FileInfo.is_special``: FIFOs, sockets, devices).
"""

from __future__ import annotations

import posixpath
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Protocol

from ..models import FileInfo
from .wildcard import STAR, char_matches, compile_wildcard, match_sequence

__all__ = [
    "IGNORED_DIRECTORIES",
    "MAX_GLOB_ALTERNATIVES",
    "AsyncDirectoryLister",
    "DirectoryLister",
    "GlobMatcher",
    "WalkResult",
    "expand_braces",
    "relative_path",
    "walk",
    "walk_async",
    "walk_plan",
]

IGNORED_DIRECTORIES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "target",
        "build",
        "dist",
        ".idea",
        ".vscode",
        "__pycache__",
        ".gradle",
        ".mvn",
        ".venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)
"""Directories never walked into below a search root (the root's own ancestors are not checked)."""

LISTING_LIMIT = 100_000

MAX_GLOB_ALTERNATIVES = 256
"""At most this many patterns after ``{a,b}`` expansion; a larger product is refused."""


class _AnySegment:
    """Segment token matching exactly one path segment (the first of a trailing ``**``)."""


_ANY_SEGMENT = _AnySegment()


def expand_braces(pattern: str) -> list[str]:
    """The patterns ``{a,b}`` alternatives stand for (first ``}`` closes; no nesting).

    A ``{`` without a later ``}`` is literal. Raises :class:`ValueError` when the expansion would
    exceed :data:`MAX_GLOB_ALTERNATIVES` patterns.
    """
    results = [""]
    index = 0
    while index < len(pattern):
        opening = pattern.find("{", index)
        closing = pattern.find("}", opening + 1) if opening >= 0 else -1
        if opening < 0 or closing < 0:
            results = [prefix + pattern[index:] for prefix in results]
            break
        head = pattern[index:opening]
        options = pattern[opening + 1 : closing].split(",")
        if len(results) * len(options) > MAX_GLOB_ALTERNATIVES:
            raise ValueError(
                f"the glob pattern has more than {MAX_GLOB_ALTERNATIVES} {{...}} alternatives"
            )
        results = [prefix + head + option for prefix in results for option in options]
        index = closing + 1
    return results


def _segment_tokens(pattern: str) -> tuple[object, ...]:
    segments = pattern.split("/")
    tokens: list[object] = []
    for position, segment in enumerate(segments):
        if segment == "**":
            last = position == len(segments) - 1
            tokens.extend((_ANY_SEGMENT, STAR) if last else (STAR,))
        else:
            tokens.append(compile_wildcard(segment))
    return tuple(tokens)


def _segment_matches(token: object, segment: str) -> bool:
    if token is _ANY_SEGMENT:
        return True
    assert isinstance(token, tuple)
    return match_sequence(token, segment, char_matches, STAR)


class GlobMatcher:
    """Matches paths relative to a search root against one glob pattern (rules above).

    Matching cannot backtrack exponentially: each ``{...}`` alternative is matched with the
    two-pointer wildcard algorithm (:mod:`.wildcard`), characters within a segment and segments
    within the path (``**`` as the segment star), so one match costs at most
    ``O(len(pattern) * len(path))`` steps per alternative. Raises :class:`ValueError` for a
    pattern with more than :data:`MAX_GLOB_ALTERNATIVES` alternatives.
    """

    def __init__(self, pattern: str) -> None:
        pattern = pattern.strip()
        if pattern.startswith("./"):
            pattern = pattern[2:]
        self.pattern = pattern
        self._by_name = "/" not in pattern
        self._alternatives = tuple(
            _segment_tokens(alternative) for alternative in dict.fromkeys(expand_braces(pattern))
        )

    def matches(self, relative: str) -> bool:
        """True when ``relative`` (POSIX, relative to the root) matches the pattern."""
        subject = posixpath.basename(relative) if self._by_name else relative
        segments = subject.split("/")
        return any(
            match_sequence(tokens, segments, _segment_matches, STAR)
            for tokens in self._alternatives
        )


def relative_path(path: str, root: str) -> str:
    """``path`` relative to ``root``; the file name when ``path`` is ``root`` itself."""
    if path == root:
        return posixpath.basename(path.rstrip("/")) or path
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


@dataclass
class WalkResult:
    """Entries found by :func:`walk` and whether the walk stopped at its limit."""

    entries: list[FileInfo]
    truncated: bool


def walk_plan(
    root: FileInfo,
    *,
    depth: int,
    limit: int,
    include_directories: bool,
    keep: Callable[[FileInfo], bool] | None = None,
) -> Generator[str, list[FileInfo], WalkResult]:
    """The walk of :func:`walk` as a plan: yields each directory to list (one level) and is
    sent its entries; returns the :class:`WalkResult`. Sync and async drivers share it."""
    if root.is_special:
        return WalkResult([], False)
    if not root.is_directory:
        kept = keep is None or keep(root)
        return WalkResult([root] if kept else [], False)
    found: list[FileInfo] = []
    queue: deque[tuple[str, int]] = deque([(root.path, 1)])
    while queue:
        directory, level = queue.popleft()
        listed = yield directory
        entries = sorted(listed, key=lambda item: item.path)
        for entry in entries:
            if entry.is_special:
                continue
            if entry.is_directory and entry.name in IGNORED_DIRECTORIES:
                continue
            if entry.is_directory and level < depth:
                queue.append((entry.path, level + 1))
            if entry.is_directory and not include_directories:
                continue
            if keep is not None and not keep(entry):
                continue
            if len(found) >= limit:
                return WalkResult(found, True)
            found.append(entry)
    return WalkResult(found, False)


class DirectoryLister(Protocol):
    """The one primitive a walk needs: ``list_directory`` of a
    :class:`~skillruntime.core.files.spi.SkillRuntimeFileSystem`."""

    def list_directory(self, path: str, depth: int = ..., limit: int = ...) -> list[FileInfo]:
        """The entries below ``path`` down to ``depth`` levels, at most ``limit``."""
        ...


def walk(
    files: DirectoryLister,
    root: FileInfo,
    *,
    depth: int,
    limit: int,
    include_directories: bool,
    keep: Callable[[FileInfo], bool] | None = None,
) -> WalkResult:
    """Breadth-first listing below ``root``, never entering :data:`IGNORED_DIRECTORIES`.

    A regular-file ``root`` yields itself; a special ``root`` (FIFO, socket, device) and special
    entries below a directory are skipped. Each directory is listed with one
    ``list_directory(dir, 1)`` call, so noise directories cost nothing. Stops after ``limit``
    kept entries (``truncated`` tells whether more existed). ``keep`` filters entries counted.
    """
    plan = walk_plan(
        root, depth=depth, limit=limit, include_directories=include_directories, keep=keep
    )
    try:
        directory = next(plan)
        while True:
            directory = plan.send(files.list_directory(directory, 1, LISTING_LIMIT))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


class AsyncDirectoryLister(Protocol):
    """:class:`DirectoryLister` of an
    :class:`~skillruntime.core.files.async_spi.AsyncSkillRuntimeFileSystem`."""

    async def list_directory(self, path: str, depth: int = ..., limit: int = ...) -> list[FileInfo]:
        """The entries below ``path`` down to ``depth`` levels, at most ``limit``."""
        ...


async def walk_async(
    files: AsyncDirectoryLister,
    root: FileInfo,
    *,
    depth: int,
    limit: int,
    include_directories: bool,
    keep: Callable[[FileInfo], bool] | None = None,
) -> WalkResult:
    """:func:`walk` over an async file system: the same plan (:func:`walk_plan`), driven with
    awaited listings."""
    plan = walk_plan(
        root, depth=depth, limit=limit, include_directories=include_directories, keep=keep
    )
    try:
        directory = next(plan)
        while True:
            directory = plan.send(await files.list_directory(directory, 1, LISTING_LIMIT))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
