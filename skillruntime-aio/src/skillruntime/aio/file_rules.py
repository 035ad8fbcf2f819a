"""The rules of the AIO file-system primitives, free of I/O: scripts, parsing, error typing.

The file systems (:class:`~skillruntime.aio.files.AioFileSystem`, generated from its async twin
:class:`~skillruntime.aio.async_files.AsyncAioFileSystem`) only perform them:

* reads stream ``GET /v1/file/download`` (binary-safe, bounded memory; retried when idempotent)
  after a ``stat`` command confirmed a regular file: a FIFO, socket or device is refused with
  :class:`NotRegularFileError` before the service is asked to open it (it would block);
* writes spool the content on this host (memory up to 1 MiB, then a temporary file), upload it to
  a fresh staging path with ``POST /v1/file/upload`` (multipart, streamed) and move it into place
  with one command that also creates the parents and sets the mode (two requests per write);
* ``stat``, listings, ``delete`` and ``make_directory`` are one small command each, because the
  API has no endpoint for them; every path is shell-quoted.

Listings use GNU ``find -printf`` with NUL-ended records, sent back in base64 (a command's
output reaches the client decoded as UTF-8 with invalid bytes replaced), so a name with a
newline or bytes that are not UTF-8 is listed like any other, decoded with ``surrogateescape``
as the local runtime gives it; every command carries such a path exactly (see
:func:`~skillruntime.aio.script.json_script`), but the download endpoint takes UTF-8 paths
only, so reading such a name is refused with a :class:`RuntimeFileError`. A failed command is
classified by the reason it printed (commands run with ``LC_ALL=C``): permission denied, not
permitted and read-only file system are :class:`RuntimePermissionError`, "Not a directory" a
:class:`NotADirectoryFileError`, "Is a directory" a :class:`RuntimeIsADirectoryError`. A refused
download of a directory is a :class:`RuntimeIsADirectoryError`.
"""

from __future__ import annotations

import base64
import binascii
import logging
import posixpath
import shlex

from skillruntime.core.errors import (
    NotADirectoryFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    RuntimePermissionError,
    printable,
)
from skillruntime.core.models import FileInfo

from .command_plans import CommandSpec
from .errors import AioSandboxError
from .script import WrapperOutcome

__all__ = [
    "LIST_OUTPUT_CAP",
    "QUERY_OUTPUT_CAP",
    "checked_outcome",
    "command_failure",
    "delete_script",
    "file_command",
    "list_result",
    "list_script",
    "make_directory_script",
    "marker_script",
    "move_into_place_script",
    "refused_read",
    "refused_read_after_stat",
    "search_complete",
    "stat_result",
    "stat_script",
    "undownloadable_path",
]

logger = logging.getLogger(__name__)


_MISSING = 44
"""Exit code of the file commands for a missing path."""
_NOT_A_DIRECTORY = 45
"""Exit code of the listing command for a path below a regular file."""

_C_LOCALE = "export LC_ALL=C; "
"""Prefix of every file command: the system's error texts stay in English, so they can be
classified."""

_REASONS: tuple[tuple[tuple[str, ...], type[RuntimeFileError]], ...] = (
    (
        ("Permission denied", "Operation not permitted", "Read-only file system"),
        RuntimePermissionError,
    ),
    (("Is a directory", "cannot overwrite directory"), RuntimeIsADirectoryError),
    # mkdir -p says "File exists" when the directory to create is a regular file.
    (("Not a directory", "File exists"), NotADirectoryFileError),
    (("No such file or directory",), RuntimeFileNotFoundError),
)
"""The kind of a failed file command, from the ``strerror`` text coreutils prints."""

_PERMISSION_TYPES = frozenset({"permission_denied", "read_only_filesystem"})

_NOT_FOUND_TYPES = frozenset({"not_found", "invalid_target", "is_directory", "not_a_file"})
_FIELDS = "%y\\t%s\\t%T@\\t%m\\t%p\\n"
_RECORDS = "%y\\t%s\\t%T@\\t%m\\t%p\\0"
"""The fields of a listing's entries, each record NUL-ended (a name may hold a newline)."""


def _parse_entry(line: str) -> FileInfo | None:
    parts = line.split("\t", 4)
    if len(parts) != 5:
        return None
    kind, size, mtime, mode, path = parts
    try:
        permissions = int(mode, 8)
        size_value = max(int(size), 0)
        modified = float(mtime)
    except ValueError:
        return None
    is_directory = kind == "d"
    return FileInfo(
        path=path,
        is_directory=is_directory,
        size=0 if is_directory else size_value,
        modified_time=modified,
        is_executable=not is_directory and bool(permissions & 0o111),
        is_special=kind not in ("f", "d", "l"),
    )


def file_command(script: str, timeout: float, cap: int) -> CommandSpec:
    """The command of one file operation (C locale, run from ``/``, no environment), keeping
    ``cap`` bytes per stream."""
    return CommandSpec(
        command=_C_LOCALE + script, cwd="/", environment={}, timeout=timeout, cap=cap
    )


def search_complete(outcome: WrapperOutcome) -> bool:
    """Whether a search command succeeded with both streams whole (else walk instead)."""
    if outcome.exit_code != 0:
        logger.debug("search command failed (exit %d); walking instead", outcome.exit_code)
        return False
    if outcome.stdout_size > len(outcome.stdout) or outcome.stderr_size > len(outcome.stderr):
        logger.debug("search output over the cap; walking instead")
        return False
    return True


def checked_outcome(outcome: WrapperOutcome, path: str, timeout: float) -> WrapperOutcome:
    """``outcome``, unless the file command timed out (a :class:`RuntimeFileError`)."""
    if outcome.timed_out:
        raise RuntimeFileError(
            f"File operation on {printable(path)} timed out after {timeout:g}s", path=path
        )
    return outcome


def command_failure(outcome: WrapperOutcome, what: str, path: str) -> RuntimeFileError:
    """The typed error of a failed file command, classified by the reason it printed."""
    detail = outcome.stderr.decode("utf-8", "replace").strip()[-300:]
    suffix = f": {printable(detail)}" if detail else ""
    cls = next(
        (kind for reasons, kind in _REASONS if any(reason in detail for reason in reasons)),
        RuntimeFileError,
    )
    return cls(f"Cannot {what} {printable(path)}{suffix}", path=path)


def refused_read(path: str, exc: AioSandboxError) -> RuntimeFileError | None:
    """The typed error of a refused download, or ``None`` when a stat must tell it apart
    (:func:`refused_read_after_stat`): the service's answer for a directory is not documented
    (an image answers 400)."""
    if exc.error_type in _PERMISSION_TYPES or "Permission denied" in str(exc):
        return RuntimePermissionError(
            f"Cannot read {printable(path)}: permission denied", path=path
        )
    if exc.status != 400 and exc.error_type not in _NOT_FOUND_TYPES:
        return RuntimeFileError(f"Cannot read {printable(path)}: {printable(str(exc))}", path=path)
    return None


def undownloadable_path(path: str) -> RuntimeFileError | None:
    """The error of a read of a path the download endpoint cannot be given (bytes that are not
    UTF-8, decoded with ``surrogateescape``); ``None`` for any other path."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return RuntimeFileError(
            f"Cannot read {path!r}: the AIO Sandbox file API takes UTF-8 paths only", path=path
        )
    return None


def refused_read_after_stat(path: str, info: FileInfo | None) -> RuntimeFileError:
    """A refused download of a directory, or of a missing or irregular file."""
    if info is not None and info.is_directory:
        return RuntimeIsADirectoryError(
            f"Path is a directory, not a file: {printable(path)}", path=path
        )
    return RuntimeFileNotFoundError(f"Not a readable regular file: {printable(path)}", path=path)


def move_into_place_script(staging: str, path: str, mode: int) -> str:
    """Move an uploaded ``staging`` file to ``path`` (parents created, ``mode`` set)."""
    q = shlex.quote
    return (
        f"s={q(staging)}; t={q(path)}; "
        f'mkdir -p -- {q(posixpath.dirname(path) or "/")} && mv -fT -- "$s" "$t" '
        f'&& chmod {mode:o} -- "$t" || {{ rm -f -- "$s"; exit 1; }}'
    )


def stat_script(path: str) -> str:
    """Print the entry of ``path`` (a link itself when dangling); exit 44 when missing."""
    q = shlex.quote
    return (
        f'p={q(path)}; if [ -e "$p" ]; then find -H "$p" -maxdepth 0 -printf \'{_FIELDS}\'; '
        f'elif [ -L "$p" ]; then find "$p" -maxdepth 0 -printf \'{_FIELDS}\'; '
        f"else exit {_MISSING}; fi"
    )


def stat_result(outcome: WrapperOutcome, path: str) -> FileInfo | None:
    """The answer of :func:`stat_script`."""
    if outcome.exit_code == _MISSING:
        return None
    if outcome.exit_code != 0:
        raise command_failure(outcome, "stat", path)
    text = outcome.stdout.decode("utf-8", "replace").rstrip("\n")
    info = _parse_entry(text)
    if info is None:
        raise RuntimeFileError(f"Unexpected stat answer for {printable(path)}", path=path)
    return info.model_copy(update={"path": path})


def list_script(path: str, depth: int, limit: int) -> str:
    """List ``path`` down to ``depth`` (at least 1), at most ``limit`` entries."""
    q = shlex.quote
    return (
        f'p={q(path)}; if [ -d "$p" ]; then '
        f"find -H \"$p\" -mindepth 1 -maxdepth {int(depth)} -printf '{_RECORDS}' "
        f"| LC_ALL=C sort -z -t '\t' -k5 | head -z -n {int(limit)} | base64; "
        f'elif [ -e "$p" ] || [ -L "$p" ]; then '
        f"find \"$p\" -maxdepth 0 -printf '{_RECORDS}' | base64; "
        # Missing: below a regular file (the nearest existing ancestor) or simply absent.
        f'else a="$p"; while a=$(dirname -- "$a"); [ "$a" != / ] && [ ! -e "$a" ]; do :; '
        f'done; [ -d "$a" ] || exit {_NOT_A_DIRECTORY}; exit {_MISSING}; fi'
    )


def list_result(outcome: WrapperOutcome, path: str, limit: int) -> list[FileInfo]:
    """The answer of :func:`list_script`."""
    if outcome.exit_code == _MISSING:
        raise RuntimeFileNotFoundError(f"Path does not exist: {printable(path)}", path=path)
    if outcome.exit_code == _NOT_A_DIRECTORY:
        raise NotADirectoryFileError(
            f"Cannot list {printable(path)}: a component of the path is not a directory", path=path
        )
    if outcome.exit_code != 0:
        raise command_failure(outcome, "list", path)
    if outcome.stdout_size > len(outcome.stdout):
        raise RuntimeFileError(
            f"Cannot list {printable(path)}: the listing is over {LIST_OUTPUT_CAP} bytes; ask for "
            "fewer entries or less depth",
            path=path,
        )
    try:
        records = base64.b64decode(outcome.stdout)
    except (binascii.Error, ValueError) as exc:
        raise RuntimeFileError(
            f"Unexpected listing answer for {printable(path)}", path=path
        ) from exc
    entries = []
    for record in records.split(b"\0"):
        if record:
            info = _parse_entry(record.decode("utf-8", "surrogateescape"))
            if info is not None:
                entries.append(info)
    if len(entries) == 1 and entries[0].path == path and not entries[0].is_directory:
        return entries
    entries.sort(key=lambda item: item.path)
    return entries[:limit]


def delete_script(path: str) -> str:
    """Delete ``path`` recursively; the root directory is refused."""
    if path.rstrip("/") in ("", "/"):
        raise RuntimeFileError("Refusing to delete the root directory", path=path)
    return f"rm -rf -- {shlex.quote(path)}"


def make_directory_script(path: str) -> str:
    """Create ``path`` and its parents."""
    return f"mkdir -p -- {shlex.quote(path)}"


def marker_script(path: str, text: str) -> str:
    """Write the small text file ``path`` (parents created)."""
    q = shlex.quote
    return f"mkdir -p -- {q(posixpath.dirname(path) or '/')} && printf '%s' {q(text)} > {q(path)}"


LIST_OUTPUT_CAP = 64 * 1024 * 1024
"""Bytes of a listing kept per stream."""

QUERY_OUTPUT_CAP = 1024 * 1024
"""Bytes of the other file commands' output kept per stream."""
