"""The derived search operations of the runtime file system: ``glob`` and ``grep``.

:class:`~skillruntime.core.files.spi.SkillRuntimeFileSystem` (and its async twin) implement them
on the primitives with the functions here; a backend whose sandbox can search in one command
overrides them and must return what these defaults return for the same tree (the conformance kit
checks it). Matching is always done by :class:`GrepEngine` on text the backend supplies, so a
backend only decides *how the candidate files and their text reach the client*.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from ..models import FileInfo
from .globbing import (
    AsyncDirectoryLister,
    DirectoryLister,
    GlobMatcher,
    relative_path,
    walk,
    walk_async,
)
from .linear_regex import LinearPattern

__all__ = [
    "GLOB_MAX_DEPTH",
    "GLOB_MAX_FILES",
    "GREP_MAX_FILE_BYTES",
    "GREP_MAX_LINE_LENGTH",
    "GREP_TIME_BUDGET_SECONDS",
    "GlobQuery",
    "GrepEngine",
    "GrepQuery",
    "GrepResult",
    "SearchResult",
    "async_default_glob",
    "async_default_grep",
    "default_glob",
    "default_grep",
    "literal_pattern",
]

GLOB_MAX_DEPTH = 100
GLOB_MAX_FILES = 5000
GREP_MAX_FILE_BYTES = 2 * 1024 * 1024
GREP_MAX_LINE_LENGTH = 10_000
GREP_TIME_BUDGET_SECONDS = 30.0

logger = logging.getLogger(__name__)

_REGEX_SPECIALS = frozenset("\\^$.|?*+()[]{}")


class SearchedFiles(DirectoryLister, Protocol):
    """The primitives the default search runs on (a
    :class:`~skillruntime.core.files.spi.SkillRuntimeFileSystem` has them)."""

    def read_text(
        self, path: str, max_bytes: int = ..., *, encoding: str = ..., errors: str = ...
    ) -> str:
        """A text file's content, at most ``max_bytes`` read."""
        ...


class AsyncSearchedFiles(AsyncDirectoryLister, Protocol):
    """The primitives the default async search runs on (a
    :class:`~skillruntime.core.files.async_spi.AsyncSkillRuntimeFileSystem` has them)."""

    async def read_text(
        self, path: str, max_bytes: int = ..., *, encoding: str = ..., errors: str = ...
    ) -> str:
        """A text file's content, at most ``max_bytes`` read."""
        ...


@dataclass(frozen=True)
class GlobQuery:
    """Files below a root whose path relative to it matches ``pattern`` (``tools.globbing``
    rules), among the first ``max_files`` regular files of the noise-skipping walk."""

    pattern: str
    max_depth: int = GLOB_MAX_DEPTH
    max_files: int = GLOB_MAX_FILES


@dataclass(frozen=True)
class SearchResult:
    """Matching files in walk order and whether the walk stopped at ``max_files``."""

    entries: list[FileInfo]
    truncated: bool


@dataclass(frozen=True)
class GrepQuery:
    """A content search (RE2 syntax, see ``tools.linear_regex``) and its bounds.

    Files are the walk's regular files passing ``glob`` and ``file_types`` (globs, any may match),
    at most ``max_files`` of them; files over ``max_file_bytes`` and undecodable files are
    skipped, lines over ``max_line_length`` never match. Entries are collected until
    ``offset + head_limit`` are held; the search stops after ``time_budget`` seconds.
    """

    pattern: str
    case_insensitive: bool = False
    multiline: bool = False
    glob: str | None = None
    file_types: tuple[str, ...] | None = None
    output_mode: Literal["content", "files_with_matches", "count"] = "files_with_matches"
    before: int = 0
    after: int = 0
    show_line_numbers: bool = True
    offset: int = 0
    head_limit: int | None = None
    max_depth: int = GLOB_MAX_DEPTH
    max_files: int = GLOB_MAX_FILES
    max_file_bytes: int = GREP_MAX_FILE_BYTES
    max_line_length: int = GREP_MAX_LINE_LENGTH
    time_budget: float = GREP_TIME_BUDGET_SECONDS


@dataclass(frozen=True)
class GrepResult:
    """Result entries (the ``offset``/``head_limit`` window), whether the file walk stopped at
    ``max_files`` and whether the time budget ran out."""

    entries: list[str]
    truncated: bool
    out_of_time: bool


def literal_pattern(query: GrepQuery) -> str | None:
    """The pattern as a plain string when it has no regex syntax and matching is
    case-sensitive and line-wise, so that every matching file contains it byte for byte."""
    if (
        query.case_insensitive
        or query.multiline
        or any(c in _REGEX_SPECIALS for c in query.pattern)
    ):
        return None
    if "\n" in query.pattern or "\0" in query.pattern:
        return None
    return query.pattern


class GrepEngine:
    """Runs one :class:`GrepQuery` over files fed in walk order (pure: no I/O).

    Raises ``InvalidPatternError`` (bad regex) or :class:`ValueError` (bad glob) when built.
    """

    def __init__(self, query: GrepQuery, root: str) -> None:

        self.query = query
        self.root = root
        self._relative = relative_path
        self.regex = LinearPattern(
            query.pattern,
            case_insensitive=query.case_insensitive,
            dot_matches_newline=query.multiline,
        )
        self._glob = GlobMatcher(query.glob) if query.glob and query.glob.strip() else None
        self._types = (
            [GlobMatcher(pattern) for pattern in query.file_types] if query.file_types else None
        )
        self.stop_at = None if query.head_limit is None else query.offset + query.head_limit
        self.entries: list[str] = []
        self.deadline = time.monotonic() + query.time_budget
        self.out_of_time = False
        literal = literal_pattern(query)
        self._literal = literal or None
        # A file whose bytes lack the UTF-8 literal has no match: a backend may skip it undecoded.
        self.literal_bytes = literal.encode("utf-8") if literal else None
        self._filtered = self._glob is not None or self._types is not None

    def keep(self, entry: FileInfo) -> bool:
        """Whether ``entry`` passes the glob and type filters."""
        return self.keep_path(entry.path)

    def keep_path(self, path: str) -> bool:
        """Whether the file ``path`` passes the glob and type filters."""
        if not self._filtered:
            return True
        relative = self._relative(path, self.root)
        if self._glob is not None and not self._glob.matches(relative):
            return False
        return self._types is None or any(m.matches(relative) for m in self._types)

    @property
    def full(self) -> bool:
        """True once ``offset + head_limit`` entries are held."""
        return self.stop_at is not None and len(self.entries) >= self.stop_at

    def wants(self, entry: FileInfo) -> bool:
        """Whether the next file ``entry`` should be read (``False`` once done or too large);
        marks the search out of time past the budget."""
        return self.wants_size(entry.size)

    def wants_size(self, size: int) -> bool:
        """:meth:`wants` for a next file of ``size`` bytes."""
        if self.full or self.out_of_time:
            return False
        if time.monotonic() > self.deadline:
            self.out_of_time = True
            return False
        return size <= self.query.max_file_bytes

    def done(self) -> bool:
        """True when no further file can change the result."""
        return self.full or self.out_of_time

    def _add(self, entry: str) -> None:
        if not self.full:
            self.entries.append(entry)

    def result(self, truncated: bool) -> GrepResult:
        """The collected window."""
        return GrepResult(
            self.entries[self.query.offset : self.stop_at], truncated, self.out_of_time
        )

    def feed(self, path: str, text: str) -> None:
        """Search the decoded content ``text`` of the file ``path``."""
        query = self.query
        limit = query.max_line_length
        if query.multiline:
            matches = list(self.regex.spans(text))
            if not matches:
                return
            if query.output_mode == "files_with_matches":
                self._add(path)
            elif query.output_mode == "count":
                self._add(f"{path}:{len(matches)}")
            else:
                for start, end in matches:
                    line = text.count("\n", 0, start) + 1
                    snippet = text[start:end][:limit]
                    prefix = f"{path}:{line}:" if query.show_line_numbers else f"{path}:"
                    self._add(prefix + snippet)
                    if self.full:
                        return
            return
        literal = self._literal
        if literal is not None and literal not in text:
            return  # no line can contain the literal pattern
        lines = text.splitlines()
        if query.output_mode == "content":
            self._content(path, lines)
            return
        search = self.regex.search
        if query.output_mode == "files_with_matches":
            if literal is not None:
                found = any(len(line) <= limit and literal in line for line in lines)
            else:
                found = any(len(line) <= limit and search(line) for line in lines)
            if found:
                self._add(path)
            return
        count = sum(sum(1 for _ in self.regex.spans(line)) for line in lines if len(line) <= limit)
        if count:
            self._add(f"{path}:{count}")

    def _content(self, path: str, lines: list[str]) -> None:
        query = self.query
        before, after, limit = query.before, query.after, query.max_line_length
        matched = [
            index
            for index, line in enumerate(lines)
            if len(line) <= limit and self.regex.search(line)
        ]
        match_lines = set(matched)
        shown: set[int] = set()
        previous = -2
        for index in matched:
            for number in range(max(0, index - before), min(len(lines), index + after + 1)):
                if number in shown:
                    continue
                if (before or after) and previous >= 0 and number > previous + 1:
                    self._add("--")
                shown.add(number)
                previous = number
                text = lines[number][:limit]
                if not query.show_line_numbers:
                    self._add(f"{path}:{text}")
                elif number in match_lines:
                    self._add(f"{path}:{number + 1}:{text}")
                else:
                    self._add(f"{path}-{number + 1}-{text}")
                if self.full:
                    return


def default_glob(files: SearchedFiles, root: FileInfo, query: GlobQuery) -> SearchResult:
    """:meth:`SkillRuntimeFileSystem.glob` on the primitives (one listing per directory)."""

    matcher = GlobMatcher(query.pattern)
    result = walk(
        files, root, depth=query.max_depth, limit=query.max_files, include_directories=False
    )
    base = root.path
    return SearchResult(
        [e for e in result.entries if matcher.matches(relative_path(e.path, base))],
        result.truncated,
    )


def default_grep(
    files: SearchedFiles,
    root: FileInfo,
    query: GrepQuery,
    *,
    read_text: Callable[[str, int], str] | None = None,
) -> GrepResult:
    """:meth:`SkillRuntimeFileSystem.grep` on the primitives: walk, then read each candidate."""

    engine = GrepEngine(query, root.path)
    candidates = walk(
        files,
        root,
        depth=query.max_depth,
        limit=query.max_files,
        include_directories=False,
        keep=engine.keep,
    )
    reader = read_text or files.read_text
    for entry in candidates.entries:
        if engine.done():
            break
        if not engine.wants(entry):
            continue
        try:
            text = reader(entry.path, query.max_file_bytes)
        except Exception as exc:  # unreadable or undecodable files are skipped, as grep does
            logger.debug("grep skips %s: %s", entry.path, type(exc).__name__)
            continue
        engine.feed(entry.path, text)
    return engine.result(candidates.truncated)


async def async_default_glob(
    files: AsyncSearchedFiles, root: FileInfo, query: GlobQuery
) -> SearchResult:
    """:meth:`AsyncSkillRuntimeFileSystem.glob` on the primitives (same result as
    :func:`default_glob`)."""

    matcher = GlobMatcher(query.pattern)
    result = await walk_async(
        files, root, depth=query.max_depth, limit=query.max_files, include_directories=False
    )
    base = root.path
    return SearchResult(
        [e for e in result.entries if matcher.matches(relative_path(e.path, base))],
        result.truncated,
    )


async def async_default_grep(
    files: AsyncSearchedFiles,
    root: FileInfo,
    query: GrepQuery,
    *,
    read_text: Callable[[str, int], Awaitable[str]] | None = None,
) -> GrepResult:
    """:meth:`AsyncSkillRuntimeFileSystem.grep` on the primitives (same result as
    :func:`default_grep`)."""
    engine = GrepEngine(query, root.path)
    candidates = await walk_async(
        files,
        root,
        depth=query.max_depth,
        limit=query.max_files,
        include_directories=False,
        keep=engine.keep,
    )
    reader = read_text or files.read_text
    for entry in candidates.entries:
        if engine.done():
            break
        if not engine.wants(entry):
            continue
        try:
            text = await reader(entry.path, query.max_file_bytes)
        except Exception as exc:  # unreadable or undecodable files are skipped
            logger.debug("grep skips %s: %s", entry.path, type(exc).__name__)
            continue
        engine.feed(entry.path, text)
    return engine.result(candidates.truncated)
