"""``glob`` and ``grep`` of a sandbox file system in one shell command.

For a backend that runs commands in its sandbox (AIO, OpenSandbox): :func:`search_script` is the
command, :func:`parse_glob_output` / :func:`parse_grep_output` read what it printed, and
:func:`glob_from_listing` / :func:`grep_from_output` (and :func:`async_grep_from_output`) replay
the walk of :func:`skillruntime.core.files.globbing.walk_plan` over the listing and match with
:class:`~skillruntime.core.files.search.GrepEngine`, so the result equals the default
implementation's on the primitives.

The command lists the tree below the search root once, with GNU ``find`` (noise directories
pruned, ``%y %s %T@ %m %p`` per entry, each record ended by a NUL byte, the one byte no file name
holds) on stdout, in base64: a file name may hold a newline, a carriage return or bytes that are
not UTF-8, and a backend's command output may travel as text (JSON strings, line events) that
would split or replace them. Names are decoded as the local runtime decodes them: UTF-8 with
``surrogateescape``, so an undecodable byte ``0xff`` becomes ``\udcff`` and the path names the
same file. For ``grep`` the same ``find`` also hands the
regular files no larger than ``max_file_bytes`` (through ``/dev/fd/3``) to a pipeline that keeps,
for a case-sensitive literal pattern, only the files ``grep -lF`` finds it in, and sends them as
one GNU ``tar`` stream on stderr (every error text is kept off it), gzipped when the sandbox has
``gzip`` (``cat`` stands in without it), in base64. It starts ``find``, ``xargs``, ``grep``,
``tar``, ``gzip`` and ``base64`` (twice: listing and archive), each once (on a loaded sandbox a
process costs more than the bytes it saves, so the listing is not compressed). Every path and
pattern reaches the shell through :func:`shlex.quote`.

The command exits :data:`MISSING_TOOLS` when the shell lacks ``pipefail`` or the sandbox one of
those programs, and non-zero when any step of the pipeline failed (``find`` could not read a
directory, no ``/dev/fd``): the caller then walks with the primitives instead, never reading a
failed command as "no match". The readers are strict: a malformed stream (base64, gzip, tar) is
unreadable, which the caller treats the same way.
"""

from __future__ import annotations

import base64
import binascii
import logging
import posixpath
import shlex
import zlib
from collections.abc import Awaitable, Callable, Generator

from ..models import FileInfo
from .globbing import (
    IGNORED_DIRECTORIES,
    GlobMatcher,
    WalkResult,
    relative_path,
    walk_plan,
)
from .search import GlobQuery, GrepEngine, GrepQuery, GrepResult, SearchResult, literal_pattern

__all__ = [
    "MAX_UNPACKED_BYTES",
    "MISSING_TOOLS",
    "Listing",
    "async_grep_from_output",
    "glob_from_listing",
    "grep_from_output",
    "parse_glob_output",
    "parse_grep_output",
    "read_archive",
    "replay_walk",
    "search_script",
]

logger = logging.getLogger(__name__)

MISSING_TOOLS = 97
"""Exit status of the command when the sandbox lacks a tool it needs."""

MAX_UNPACKED_BYTES = 256 * 1024 * 1024
"""Bytes a compressed stream of the output may inflate to (more: walk instead)."""

_FIELDS = "%y\\t%s\\t%T@\\t%m\\t%p\\0"
_BLOCK = 512


def _pruned(path: str, depth: int) -> str:
    names = " -o ".join(f"-name {shlex.quote(name)}" for name in sorted(IGNORED_DIRECTORIES))
    return (
        f"find -H {shlex.quote(path)} -mindepth 1 -maxdepth {int(depth)} "
        f"\\( -type d \\( {names} \\) -prune \\)"
    )


def search_script(path: str, depth: int, *, content: GrepQuery | None) -> str:
    """The command: the base64 listing of ``path`` down to ``depth`` on stdout; with
    ``content``, the base64 archive of the regular files a match may be in on stderr."""
    checks = (
        f"set -o pipefail 2>/dev/null || exit {MISSING_TOOLS}; "
        f"for t in {'find base64' if content is None else 'find xargs grep tar base64 cat'}; do "
        f"command -v $t >/dev/null || exit {MISSING_TOOLS}; done; "
    )
    if content is None:
        return f"{checks}{_pruned(path, depth)} -o -printf '{_FIELDS}' | base64 -w0"
    files = f"\\( -type f -size -{int(content.max_file_bytes) + 1}c -fprint0 /dev/fd/3 -o -true \\)"
    literal = literal_pattern(content)
    narrow = ""
    if literal is not None:
        # xargs says 123 when a grep found nothing in its batch (or skipped an unreadable file).
        narrow = (
            f" | {{ xargs -0 -r grep -lFZs -e {shlex.quote(literal)} --; "
            "r=$?; [ $r = 0 ] || [ $r = 123 ]; }"
        )
    # One find: the listing goes to stdout (fd 4 inside the group, then base64), the candidate
    # files to the pipeline through fd 3; the archive goes to stderr, so no error text may
    # reach it.
    return (
        f"{checks}"
        "if command -v gzip >/dev/null; then z='gzip -1'; else z=cat; fi; "
        f"{{ {{ {_pruned(path, depth)} -o -printf '{_FIELDS}' {files} 3>&1 >&4 2>/dev/null"
        f"{narrow} "
        "| tar --format=gnu --null --no-recursion --ignore-failed-read -b1 -cPf - -T - "
        "2>/dev/null | $z | base64 -w0 >&2; } 4>&1 | base64 -w0; }"
    )


def _microseconds(mtime: str) -> float:
    """``find``'s ``%T@`` cut to whole microseconds, as a ``datetime`` holds it."""
    seconds, _, fraction = mtime.partition(".")
    if not fraction.isdigit():
        raise ValueError("not a find time")
    return (int(seconds) * 1_000_000 + int((fraction + "000000")[:6])) / 1_000_000


def _entry(line: str, executable_bits: int, microseconds: bool) -> FileInfo | None:
    parts = line.split("\t", 4)
    if len(parts) != 5:
        return None
    kind, size, mtime, mode, path = parts
    try:
        permissions = int(mode, 8)
        size_value = max(int(size), 0)
        modified = _microseconds(mtime) if microseconds else float(mtime)
    except ValueError:
        return None
    is_directory = kind == "d"
    # Every value is typed and checked here, so validation is skipped (a listing has thousands).
    return FileInfo.model_construct(
        path=path,
        is_directory=is_directory,
        size=0 if is_directory else size_value,
        modified_time=modified,
        is_executable=not is_directory and bool(permissions & executable_bits),
        is_special=kind not in ("f", "d", "l"),
    )


class Listing:
    """The parsed listing (``find`` records, each ended by a NUL byte, names decoded as UTF-8
    with ``surrogateescape``): children per directory, and which entries are links.

    ``executable_bits`` are the mode bits that make an entry executable for the backend's own
    ``list_directory`` (AIO: any execute bit; OpenSandbox: the owner's); ``microseconds`` cuts
    modification times to whole microseconds (a backend whose listing goes through
    ``datetime``).
    """

    def __init__(
        self, data: bytes, *, executable_bits: int = 0o111, microseconds: bool = False
    ) -> None:
        self.children: dict[str, list[FileInfo]] = {}
        self.links: set[str] = set()
        for record in data.split(b"\0"):
            if not record:
                continue
            line = record.decode("utf-8", "surrogateescape")
            entry = _entry(line, executable_bits, microseconds)
            if entry is None:
                continue
            self.children.setdefault(posixpath.dirname(entry.path), []).append(entry)
            if line.startswith("l\t"):
                self.links.add(entry.path)

    def list(self, directory: str) -> list[FileInfo]:
        """The children of ``directory`` (as ``list_directory(directory, 1)`` gives them)."""
        return self.children.get(directory.rstrip("/") or "/", [])


def _octal(field: bytes) -> int:
    text = field.split(b"\0", 1)[0].strip(b" \0")
    if not text or field[:1] in (b"\x80", b"\xff"):
        raise ValueError("tar header number is not octal")
    return int(text, 8)


def read_archive(raw: bytes) -> dict[str, bytes]:
    """The regular files of a GNU ``tar`` stream (512-byte blocks) by absolute path.

    Long names (``L`` records) are read; links, directories and other members are skipped.
    Raises :class:`ValueError` for a malformed stream (bad checksum, size past the end).
    """
    files: dict[str, bytes] = {}
    view = memoryview(raw)
    offset = 0
    long_name: bytes | None = None
    while offset + _BLOCK <= len(raw):
        header = bytes(view[offset : offset + _BLOCK])
        if not header.strip(b"\0"):
            break  # the end-of-archive blocks
        if _octal(header[148:156]) != sum(header[:148]) + 256 + sum(header[156:]):
            raise ValueError("tar header checksum mismatch")
        size = _octal(header[124:136])
        kind = header[156:157]
        start = offset + _BLOCK
        end = start + size
        if end > len(raw):
            raise ValueError("tar member runs past the end of the archive")
        offset = start + -(-size // _BLOCK) * _BLOCK
        if kind == b"L":
            long_name = bytes(view[start:end]).split(b"\0", 1)[0]
            continue
        name = long_name if long_name is not None else header[:100].split(b"\0", 1)[0]
        long_name = None
        if kind in (b"0", b"\0", b"7"):
            path = "/" + name.decode("utf-8", "surrogateescape").lstrip("/")
            files[path] = bytes(view[start:end])
    return files


def parse_glob_output(
    stdout: bytes, *, executable_bits: int = 0o111, microseconds: bool = False
) -> Listing | None:
    """The listing a ``glob`` command printed (options of :class:`Listing`); ``None`` when it
    is unreadable (bad base64): walk instead."""
    try:
        records = _decoded(stdout)
    except (binascii.Error, ValueError) as exc:
        logger.debug("search listing unreadable: %s", exc)
        return None
    return Listing(records, executable_bits=executable_bits, microseconds=microseconds)


def parse_grep_output(
    listing: bytes, archive: bytes, *, executable_bits: int = 0o111
) -> tuple[Listing, dict[str, bytes]] | None:
    """The listing (the command's stdout, base64) and the archived files (its stderr, base64,
    gzipped when the sandbox has ``gzip``) of a ``grep`` command; ``None`` when either is
    unreadable (bad base64, gzip or tar): walk instead."""
    try:
        records = _decoded(listing)
        contents = read_archive(_unpacked(archive))
    except (binascii.Error, ValueError, zlib.error) as exc:
        logger.debug("search output unreadable: %s", exc)
        return None
    return Listing(records, executable_bits=executable_bits), contents


def _decoded(stream: bytes) -> bytes:
    """A base64 stream (surrounding white space, such as a line end a backend added, ignored)."""
    return base64.b64decode(stream.strip(), validate=True)


def _unpacked(stream: bytes) -> bytes:
    """A base64 stream, gunzipped when the sandbox had ``gzip`` (at most
    :data:`MAX_UNPACKED_BYTES`)."""
    raw = _decoded(stream)
    if not raw.startswith(b"\x1f\x8b"):
        return raw
    inflater = zlib.decompressobj(wbits=31)
    data = inflater.decompress(raw, MAX_UNPACKED_BYTES)
    if inflater.unconsumed_tail or not inflater.eof:
        raise ValueError("compressed search output is truncated or too large")
    return data


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


def _archived_text(contents: dict[str, bytes], entry: FileInfo, max_bytes: int) -> str | None:
    data = contents.get("/" + entry.path.lstrip("/"))
    if data is None or len(data) > max_bytes:
        return None  # not sent: no match can be in it
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _grep_steps(
    listing: Listing, contents: dict[str, bytes], root: FileInfo, query: GrepQuery
) -> Generator[str, str | None, GrepResult]:
    """The grep over a listing and the archived files, written once for both drivers: it yields
    the path of each link to read and receives its text (``None`` when it could not be read)."""
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
            text = yield entry.path
        else:
            text = _archived_text(contents, entry, query.max_file_bytes)
        if text is not None:
            engine.feed(entry.path, text)
    return engine.result(candidates.truncated)


def _skipped_link(path: str, exc: Exception) -> None:
    # unreadable link targets are skipped, as by the default
    logger.debug("grep skips %s: %s", path, type(exc).__name__)


def grep_from_output(
    listing: Listing,
    contents: dict[str, bytes],
    root: FileInfo,
    query: GrepQuery,
    read_text: Callable[[str, int], str],
) -> GrepResult:
    """``grep`` over a listing and the archived files; links are read with ``read_text``
    (as the default does), regular files missing from the archive hold no match."""
    steps = _grep_steps(listing, contents, root, query)
    try:
        path = next(steps)
        while True:
            text: str | None
            try:
                text = read_text(path, query.max_file_bytes)
            except Exception as exc:
                _skipped_link(path, exc)
                text = None
            path = steps.send(text)
    except StopIteration as stop:
        result: GrepResult = stop.value
        return result


async def async_grep_from_output(
    listing: Listing,
    contents: dict[str, bytes],
    root: FileInfo,
    query: GrepQuery,
    read_text: Callable[[str, int], Awaitable[str]],
) -> GrepResult:
    """:func:`grep_from_output` with an awaited ``read_text`` for links."""
    steps = _grep_steps(listing, contents, root, query)
    try:
        path = next(steps)
        while True:
            text: str | None
            try:
                text = await read_text(path, query.max_file_bytes)
            except Exception as exc:
                _skipped_link(path, exc)
                text = None
            path = steps.send(text)
    except StopIteration as stop:
        result: GrepResult = stop.value
        return result
