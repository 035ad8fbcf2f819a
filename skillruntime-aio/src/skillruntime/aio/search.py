"""``glob`` and ``grep`` of the AIO file system in one sandbox command.

One command lists the tree below the search root (the same ``find`` fields as
:func:`~skillruntime.aio.files.list_script`, noise directories pruned) and, for ``grep``, sends
the candidate files as one base64 ``tar`` stream; a case-sensitive literal pattern is first
narrowed in the sandbox with ``grep -lF``. The client replays the walk of
:func:`skillruntime.core.tools.globbing.walk_plan` over the listing and matches with
:class:`~skillruntime.core.file_search.GrepEngine`, so the result equals the default
implementation's. Every path and pattern reaches the shell through :func:`shlex.quote`.
"""

from __future__ import annotations

import base64
import binascii
import io
import logging
import posixpath
import shlex
import tarfile
from collections.abc import Callable

from skillruntime.core.file_search import (
    GlobQuery,
    GrepEngine,
    GrepQuery,
    GrepResult,
    SearchResult,
    literal_pattern,
)
from skillruntime.core.models import FileInfo
from skillruntime.core.tools.globbing import (
    IGNORED_DIRECTORIES,
    GlobMatcher,
    WalkResult,
    relative_path,
    walk_plan,
)

__all__ = ["Listing", "parse_search_output", "replay_walk", "search_script"]

logger = logging.getLogger(__name__)

SEPARATOR = b"\n\x1e\n"
"""Between the listing and the archive in the command output."""

_FIELDS = "%y\\t%s\\t%T@\\t%m\\t%p\\n"


def _pruned(path: str, depth: int) -> str:
    names = " -o ".join(f"-name {shlex.quote(name)}" for name in sorted(IGNORED_DIRECTORIES))
    return (
        f"find -H {shlex.quote(path)} -mindepth 1 -maxdepth {int(depth)} "
        f"\\( -type d \\( {names} \\) -prune \\)"
    )


def search_script(path: str, depth: int, *, content: GrepQuery | None) -> str:
    """The command: the listing of ``path``; with ``content``, the separator and the base64
    archive of the regular files a match may be in (at most ``max_file_bytes`` each)."""
    script = f"{_pruned(path, depth)} -o -printf '{_FIELDS}'"
    if content is None:
        return script
    files = f"{_pruned(path, depth)} -o -type f -size -{int(content.max_file_bytes) + 1}c -print0"
    literal = literal_pattern(content)
    if literal is not None:
        files += f" | xargs -0 -r grep -lFZ -e {shlex.quote(literal)} --"
    # Without tar or base64 the command fails and the caller walks instead (never an empty
    # archive that would read as "no match").
    return (
        "for t in find xargs grep tar base64; do command -v $t >/dev/null || exit 97; done; "
        f"{script}; printf '\\n\\036\\n'; {files} "
        "| tar --null --no-recursion -cPf - -T - | base64 -w0"
    )


class Listing:
    """The parsed listing: children per directory, and which entries are links."""

    def __init__(self, entries: list[tuple[FileInfo, bool]]) -> None:
        self.children: dict[str, list[FileInfo]] = {}
        self.links: set[str] = set()
        for entry, is_link in entries:
            parent = posixpath.dirname(entry.path)
            self.children.setdefault(parent, []).append(entry)
            if is_link:
                self.links.add(entry.path)

    def list(self, directory: str) -> list[FileInfo]:
        """The children of ``directory`` (as ``list_directory(directory, 1)`` gives them)."""
        return self.children.get(directory.rstrip("/") or "/", [])


def parse_search_output(
    stdout: bytes, parse_entry: Callable[[str], FileInfo | None]
) -> tuple[Listing, dict[str, bytes] | None]:
    """The listing and, when the command sent one, the archived files by path."""
    listing_bytes, _, archive = stdout.partition(SEPARATOR)
    entries: list[tuple[FileInfo, bool]] = []
    for line in listing_bytes.decode("utf-8", "replace").split("\n"):
        if line:
            info = parse_entry(line)
            if info is not None:
                entries.append((info, line.startswith("l\t")))
    if not _:
        return Listing(entries), None
    contents: dict[str, bytes] = {}
    try:
        raw = base64.b64decode(archive.strip(), validate=True)
    except (binascii.Error, ValueError):
        logger.debug("search archive is not base64")
        raw = b""
    if raw.strip(b"\0"):
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as archive_file:
            for member in archive_file:
                if not member.isreg():
                    continue
                handle = archive_file.extractfile(member)
                if handle is not None:
                    contents["/" + member.name.lstrip("/")] = handle.read()
    return Listing(entries), contents


def replay_walk(
    listing: Listing,
    root: FileInfo,
    *,
    depth: int,
    limit: int,
    keep: Callable[[FileInfo], bool] | None = None,
) -> WalkResult:
    """The walk of the default implementation over ``listing`` (no request)."""
    plan = walk_plan(root, depth=depth, limit=limit, include_directories=False, keep=keep)
    try:
        directory = next(plan)
        while True:
            directory = plan.send(listing.list(directory))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def glob_from_listing(listing: Listing, root: FileInfo, query: GlobQuery) -> SearchResult:
    """``glob`` over a listing: the default's walk, then the matcher."""
    matcher = GlobMatcher(query.pattern)
    result = replay_walk(listing, root, depth=query.max_depth, limit=query.max_files)
    return SearchResult(
        [e for e in result.entries if matcher.matches(relative_path(e.path, root.path))],
        result.truncated,
    )


def grep_from_output(
    listing: Listing,
    contents: dict[str, bytes],
    root: FileInfo,
    query: GrepQuery,
    read_text: Callable[[str, int], str],
) -> GrepResult:
    """``grep`` over a listing and the archived files; links are read with ``read_text``
    (as the default does), regular files missing from the archive hold no match."""
    engine = GrepEngine(query, root.path)
    candidates = replay_walk(
        listing, root, depth=query.max_depth, limit=query.max_files, keep=engine.keep
    )
    for entry in candidates.entries:
        if engine.done():
            break
        if not engine.wants(entry):
            continue
        if entry.path in listing.links:
            try:
                text = read_text(entry.path, query.max_file_bytes)
            except Exception as exc:  # unreadable link targets are skipped, as by the default
                logger.debug("grep skips %s: %s", entry.path, type(exc).__name__)
                continue
        else:
            data = contents.get("/" + entry.path.lstrip("/"))
            if data is None or len(data) > query.max_file_bytes:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
        engine.feed(entry.path, text)
    return engine.result(candidates.truncated)
