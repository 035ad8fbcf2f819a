"""``grep`` of the local file system through directory descriptors, without a call per entry.

:func:`grep_below` walks the tree below an open directory descriptor with the rules of
:func:`skillruntime.core.files.globbing.walk` (breadth-first, each directory in path order, noise
directories and special files skipped, ``max_depth`` levels, ``max_files`` kept files) and
feeds every candidate to one :class:`~skillruntime.core.files.search.GrepEngine`, so the result
is the default implementation's for the same tree (the conformance kit compares them).

Confinement is that of :mod:`skillruntime.local.confinement`: every directory is opened with
``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor, starting from the root's, and
every regular file with ``O_NOFOLLOW | O_NONBLOCK`` relative to its directory's, then checked with
``fstat`` before it is read, so neither a symbolic link nor a FIFO swapped in during the walk is
followed or opened for reading. A symbolic link met by the walk is a file entry read through
``read_text`` (the caller's confined and checked read), as the default reads it.

Per file the cost is one ``open``, ``fstat``, ``read`` and ``close`` (entry kinds come from the
directory listing itself); a file that cannot contain a literal pattern is ruled out on its
bytes, without decoding it.
"""

from __future__ import annotations

import errno
import logging
import os
import stat as stat_module
from collections import deque
from collections.abc import Callable

from skillruntime.core.errors import RuntimeFileNotFoundError, file_error_from_os_error, printable
from skillruntime.core.files.globbing import IGNORED_DIRECTORIES, LISTING_LIMIT
from skillruntime.core.files.search import GrepEngine

from .confinement import open_directory_below

__all__ = ["grep_below"]

logger = logging.getLogger(__name__)

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

_DIRECTORY, _FILE, _LINK = 0, 1, 2

ReadText = Callable[[str, int], str]


def grep_below(root_fd: int, root_path: str, engine: GrepEngine, read_text: ReadText) -> bool:
    """Search the directory open as ``root_fd`` (host path ``root_path``) with ``engine``.

    Returns whether the walk stopped at ``max_files`` (the result's ``truncated``). Unreadable,
    undecodable, oversized and vanished files are skipped, as the default skips them; a
    subdirectory that cannot be listed raises the typed file error a listing of it raises.
    """
    query = engine.query
    depth, limit = query.max_depth, query.max_files
    literal = engine.literal_bytes
    keep = engine.keep_path
    found = 0
    queue: deque[tuple[tuple[str, ...], str, int]] = deque([((), root_path, 1)])
    while queue:
        parts, directory, level = queue.popleft()
        fd = _open_directory(root_fd, parts, directory)
        if fd is None:
            continue
        prefix = directory if directory.endswith("/") else directory + "/"  # posixpath.join
        try:
            for name, kind in _sorted_entries(fd, directory):
                if kind == _DIRECTORY:
                    if name not in IGNORED_DIRECTORIES and level < depth:
                        queue.append(((*parts, name), prefix + name, level + 1))
                    continue
                path = prefix + name
                if not keep(path):
                    continue
                if found >= limit:
                    return True
                found += 1
                if engine.done():
                    continue
                if kind == _LINK:
                    _feed_through(fd, name, path, engine, read_text)
                    continue
                data = _read_regular(fd, name, path, engine, read_text)
                if data is None or (literal is not None and literal not in data):
                    continue  # no line of it can contain the literal pattern
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    logger.debug("grep skips %s: not UTF-8 text", path)
                    continue
                engine.feed(path, text)
        finally:
            if fd != root_fd:
                os.close(fd)
    return False


def _open_directory(root_fd: int, parts: tuple[str, ...], directory: str) -> int | None:
    """The descriptor of ``parts`` below ``root_fd`` (``root_fd`` itself for the root); ``None``
    when the directory was swapped for a link or a file after it was listed."""
    if not parts:
        return root_fd
    try:
        return open_directory_below(root_fd, list(parts))
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return None
        if exc.errno == errno.ENOENT:
            raise RuntimeFileNotFoundError(
                f"Path does not exist: {printable(directory)}", path=directory
            ) from exc
        raise file_error_from_os_error(exc, directory, operation="list") from exc


def _sorted_entries(fd: int, directory: str) -> list[tuple[str, int]]:
    """``(name, kind)`` of the directories, regular files and links in ``fd``, by name; special
    files are left out. Kinds come from the listing (``d_type``), ``lstat`` only where the file
    system does not say."""
    entries: list[tuple[str, int]] = []
    try:
        with os.scandir(fd) as listing:
            for entry in listing:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        entries.append((entry.name, _DIRECTORY))
                    elif entry.is_file(follow_symlinks=False):
                        entries.append((entry.name, _FILE))
                    elif entry.is_symlink():
                        entries.append((entry.name, _LINK))
                except FileNotFoundError:  # removed while listing
                    continue
    except OSError as exc:
        raise file_error_from_os_error(exc, directory, operation="list") from exc
    entries.sort()
    return entries[:LISTING_LIMIT]


def _feed_through(
    dir_fd: int, name: str, path: str, engine: GrepEngine, read_text: ReadText
) -> None:
    """Search the link ``name`` (sized as itself) through ``read_text``, which resolves it."""
    try:
        size = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_size
    except OSError:
        return
    if not engine.wants_size(size):
        return
    try:
        text = read_text(path, engine.query.max_file_bytes)
    except Exception as exc:  # unreadable or undecodable files are skipped, as grep does
        logger.debug("grep skips %s: %s", path, type(exc).__name__)
        return
    engine.feed(path, text)


def _read_regular(
    dir_fd: int, name: str, path: str, engine: GrepEngine, read_text: ReadText
) -> bytes | None:
    """The content of the regular file ``name`` when the engine wants it; ``None`` when it is
    skipped. A file that became a link after the listing is searched through ``read_text``."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _feed_through(dir_fd, name, path, engine, read_text)
        else:
            logger.debug("grep skips %s: %s", path, type(exc).__name__)
        return None
    try:
        result = os.fstat(fd)
        if not stat_module.S_ISREG(result.st_mode):
            return None  # swapped for a FIFO, socket or device: never read
        size = result.st_size
        if not engine.wants_size(size):
            return None
        data = os.read(fd, size + 1)
        if len(data) <= size:
            return data
        limit = engine.query.max_file_bytes
        chunks = [data]
        total = len(data)
        while total <= limit:  # it grew after the fstat: read on up to the limit
            chunk = os.read(fd, limit + 1 - total)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
        return None
    except OSError as exc:
        logger.debug("grep skips %s: %s", path, type(exc).__name__)
        return None
    finally:
        os.close(fd)
