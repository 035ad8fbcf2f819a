r"""The workspace listing: one command in the sandbox, a strict parser on the client.

:data:`LISTING_SCRIPT` is POSIX ``sh`` using ``find``, ``ls``, ``wc``, ``readlink`` and
``sha256sum``; run it as ``sh -c LISTING_SCRIPT sh <workspace>`` (:func:`listing_command`). Names
reach the commands as arguments (``find -exec ... {} +``), never through a pipe that splits them,
so any byte but NUL and ``/`` may appear in a name. Its output is a sequence of NUL-terminated
fields::

    SNAPLIST1                                  the header
    f  ./<path>  <ls -ldn line>  <wc -c>  <sha256sum output>      a regular file
    d  ./<path>  <ls -ldn line>                                   a directory
    l  ./<path>  <ls -ldn line>  <readlink output>                a symbolic link
    o  ./<path>  <ls -ldn line>                                   anything else (FIFO, socket, ...)
    SNAPEND                                    the trailer, printed only when every command worked

:func:`parse_listing` reads it in a stream and fails closed (:class:`SnapshotListingError`): a
missing header or trailer (a command failed midway), a field of the wrong shape, a mode string
that disagrees with the record's kind, a path that is not ``./`` and normalized, a field longer
than ``max_field_bytes`` or more than ``max_entries`` records. Names that are not UTF-8 are kept
with ``surrogateescape``. Sizes and digests are read separately, so a file written during the
listing may show a size and a digest of different moments: the upload verifies both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from ..errors import SnapshotListingError, SnapshotPathError
from .manifest import check_path

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_MAX_FIELD_BYTES",
    "LISTING_SCRIPT",
    "ListingEntry",
    "ListingKind",
    "listing_command",
    "listing_entry",
    "parse_listing",
]

ListingKind = Literal["file", "directory", "symlink", "special"]

HEADER = b"SNAPLIST1"
TRAILER = b"SNAPEND"

DEFAULT_MAX_ENTRIES = 1_000_000
DEFAULT_MAX_FIELD_BYTES = 64 * 1024

_INNER = (
    "for p do "
    'if [ -L "$p" ]; then '
    'printf "l\\0%s\\0" "$p"; ls -ldn -- "$p" || exit 4; printf "\\0"; '
    'readlink -- "$p" || exit 4; printf "\\0"; '
    'elif [ -f "$p" ]; then '
    'printf "f\\0%s\\0" "$p"; ls -ldn -- "$p" || exit 4; printf "\\0"; '
    'wc -c < "$p" || exit 4; printf "\\0"; sha256sum < "$p" || exit 4; printf "\\0"; '
    'elif [ -d "$p" ]; then '
    'printf "d\\0%s\\0" "$p"; ls -ldn -- "$p" || exit 4; printf "\\0"; '
    "else "
    'printf "o\\0%s\\0" "$p"; ls -ldn -- "$p" || exit 4; printf "\\0"; '
    "fi; done"
)

LISTING_SCRIPT = (
    "LC_ALL=C; export LC_ALL; "
    'cd -- "$1" || exit 3; '
    "printf 'SNAPLIST1\\0'; "
    f"find . ! -name . -exec sh -c '{_INNER}' sh {{}} + || exit 4; "
    "printf 'SNAPEND\\0'"
)
"""The in-sandbox listing command (POSIX sh + sha256sum): ``sh -c LISTING_SCRIPT sh <dir>``."""


def listing_command(workspace: str) -> list[str]:
    """The argv that lists ``workspace`` (an absolute path inside the sandbox)."""
    return ["sh", "-c", LISTING_SCRIPT, "sh", workspace]


@dataclass(frozen=True, slots=True)
class ListingEntry:
    """One entry of a workspace listing (``size``/``digest`` for files, ``target`` for links)."""

    path: str
    kind: ListingKind
    mode: int
    size: int | None = None
    digest: str | None = None
    target: str | None = None


_KINDS: dict[bytes, tuple[ListingKind, int, bytes]] = {
    # letter -> (kind, fields after the path, accepted ls type characters)
    b"f": ("file", 3, b"-"),
    b"d": ("directory", 1, b"d"),
    b"l": ("symlink", 2, b"l"),
    b"o": ("special", 1, b"pscbD"),
}
_SIZE = re.compile(rb"\s*([0-9]{1,20})\s*")
_SHA256SUM = re.compile(rb"([0-9a-f]{64}) [ *]-\n?")
_PERMISSIONS = (
    (1, {"r": 0o400}),
    (2, {"w": 0o200}),
    (3, {"x": 0o100, "s": 0o4100, "S": 0o4000}),
    (4, {"r": 0o040}),
    (5, {"w": 0o020}),
    (6, {"x": 0o010, "s": 0o2010, "S": 0o2000}),
    (7, {"r": 0o004}),
    (8, {"w": 0o002}),
    (9, {"x": 0o001, "t": 0o1001, "T": 0o1000}),
)


def _split(data: bytes, max_field: int) -> Iterator[bytes]:
    """The fields of a whole output at once: one split, then the bounds of :func:`_fields`."""
    fields = bytes(data).split(b"\0")
    last = fields.pop()
    if any(len(field) > max_field for field in fields) or len(last) > max_field:
        raise SnapshotListingError(f"a listing field is over {max_field} bytes")
    yield from fields
    if last:
        raise SnapshotListingError("the listing ends inside a field (truncated output)")


def _fields(chunks: Iterable[bytes], max_field: int) -> Iterator[bytes]:
    pending = bytearray()
    for chunk in chunks:
        pending += chunk
        start = 0
        while (end := pending.find(b"\0", start)) != -1:
            if end - start > max_field:
                raise SnapshotListingError(f"a listing field is over {max_field} bytes")
            yield bytes(pending[start:end])
            start = end + 1
        del pending[:start]
        if len(pending) > max_field:
            raise SnapshotListingError(f"a listing field is over {max_field} bytes")
    if pending:
        raise SnapshotListingError("the listing ends inside a field (truncated output)")


_MODES: dict[tuple[bytes, bytes], int] = {}
"""Mode fields already parsed (the first 11 bytes and the accepted types): a workspace has few
distinct ones, and only valid ones are kept (bounded: :data:`_MAX_MODES`)."""

_MAX_MODES = 4096


def _mode(line: bytes, types: bytes) -> int:
    key = (line[:11], types)
    found = _MODES.get(key)
    if found is not None:
        return found
    mode = _parse_mode(line, types)
    if len(_MODES) < _MAX_MODES:
        _MODES[key] = mode
    return mode


def _parse_mode(line: bytes, types: bytes) -> int:
    if len(line) < 11 or line[0:1] not in [bytes([t]) for t in types]:
        raise SnapshotListingError("a listing mode field does not match its record's kind")
    try:
        text = line[:10].decode("ascii")
    except UnicodeDecodeError:
        raise SnapshotListingError("a listing mode field is not ASCII") from None
    if line[10:11] not in (b" ", b"+", b".", b"@"):
        raise SnapshotListingError("a listing mode field is malformed")
    mode = 0
    for index, bits in _PERMISSIONS:
        char = text[index]
        if char in bits:
            mode |= bits[char]
        elif char != "-":
            raise SnapshotListingError("a listing mode field has an unknown permission letter")
    return mode


def _path(field: bytes) -> str:
    if not field.startswith(b"./"):
        raise SnapshotListingError("a listing path does not start with ./")
    try:
        return check_path(os.fsdecode(field[2:]))
    except SnapshotPathError as error:
        raise SnapshotListingError(f"a listing path is not normalized: {error}") from None


def listing_entry(letter: bytes, path: bytes, line: bytes, extra: Sequence[bytes]) -> ListingEntry:
    """One record of :data:`LISTING_SCRIPT`'s output (its kind letter, ``./`` path, ``ls -ldn``
    line and the fields after it: size and ``sha256sum`` output for a file, ``readlink`` output
    for a link) as an entry, checked as :func:`parse_listing` checks every record (module
    docstring); :class:`SnapshotListingError` when it is malformed."""
    shape = _KINDS.get(letter)
    if shape is None:
        raise SnapshotListingError("the listing holds a record of an unknown kind")
    kind, count, types = shape
    if len(extra) != count - 1:
        raise SnapshotListingError("the listing ends inside a record (truncated output)")
    name = _path(path)
    mode = _mode(line, types)
    if kind == "file":
        size_match = _SIZE.fullmatch(extra[0])
        digest_match = _SHA256SUM.fullmatch(extra[1])
        if size_match is None or digest_match is None:
            raise SnapshotListingError("a listing file record has a malformed size or digest")
        return ListingEntry(
            name, kind, mode, int(size_match.group(1)), digest_match.group(1).decode("ascii")
        )
    if kind == "symlink":
        raw = extra[0][:-1] if extra[0].endswith(b"\n") else extra[0]
        if not raw:
            raise SnapshotListingError("a listing symlink has an empty target")
        return ListingEntry(name, kind, mode, target=os.fsdecode(raw))
    return ListingEntry(name, kind, mode)


def parse_listing(
    data: bytes | Iterable[bytes],
    *,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    max_field_bytes: int = DEFAULT_MAX_FIELD_BYTES,
) -> list[ListingEntry]:
    """Parse :data:`LISTING_SCRIPT`'s output (bytes, or chunks as they arrive); see the module
    docstring for what is refused. Entries come back sorted by the bytes of their path."""
    fields = (
        _split(data, max_field_bytes)
        if isinstance(data, bytes | bytearray)
        else _fields(data, max_field_bytes)
    )
    if next(fields, None) != HEADER:
        raise SnapshotListingError("the listing has no SNAPLIST1 header")
    records: list[tuple[bytes, ListingEntry]] = []
    seen: set[bytes] = set()
    ended = False
    for letter in fields:
        if ended:
            raise SnapshotListingError("the listing has data after its trailer")
        if letter == TRAILER:
            ended = True
            continue
        shape = _KINDS.get(letter)
        if shape is None:
            raise SnapshotListingError("the listing holds a record of an unknown kind")
        rest = [next(fields, None) for _ in range(shape[1] + 1)]
        if any(value is None for value in rest):
            raise SnapshotListingError("the listing ends inside a record (truncated output)")
        path, line, *extra = [value for value in rest if value is not None]
        entry = listing_entry(letter, path, line, extra)
        if path in seen:
            raise SnapshotListingError("the listing names one path twice")
        seen.add(path)
        records.append((path, entry))
        if len(records) > max_entries:
            raise SnapshotListingError(f"the listing has more than {max_entries} entries")
    if not ended:
        raise SnapshotListingError("the listing has no SNAPEND trailer (a command failed)")
    # "./" + the path's bytes: the same order as the bytes of the path
    records.sort(key=lambda record: record[0])
    return [entry for _, entry in records]
