"""Tar streams for the Engine's archive API, written and read in bounded memory.

:func:`tar_stream` writes an archive of regular files and directories as a generator of chunks
(headers, file bytes read from their source one chunk at a time, padding), so an upload of any
size streams. :class:`MemberReader` reads an archive the engine sends, one member at a time,
and :func:`checked_member` refuses every member a download must not accept: an absolute name,
a name with a ``..`` component, a hard or symbolic link, a device, a FIFO — anything but the
regular file or directory that was asked for.
"""

from __future__ import annotations

import posixpath
import struct
import tarfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, cast

__all__ = [
    "ArchiveMemberError",
    "ChunkReader",
    "DirectoryEntry",
    "FileEntry",
    "MemberReader",
    "checked_member",
    "tar_stream",
]

_BLOCK = 512
_CHUNK = 256 * 1024
_USTAR = struct.Struct("100s8s8s8s12s12s8s1s100s8s32s32s8s8s155s12x")


class ArchiveMemberError(ValueError):
    """A member of an archive from the container that the client refuses to accept."""


@dataclass(frozen=True)
class DirectoryEntry:
    """A directory member: ``name`` relative to the extraction directory; ``owner`` (uid, gid)
    instead of the archive's (a root-only staging directory)."""

    name: str
    mode: int = 0o755
    owner: tuple[int, int] | None = None


@dataclass(frozen=True)
class FileEntry:
    """A regular file member of ``size`` bytes read from ``source`` (an open binary file)."""

    name: str
    size: int
    source: IO[bytes]
    mode: int = 0o644


def _header(
    name: str, kind: bytes, size: int, mode: int, *, owner: tuple[int, int], mtime: int
) -> bytes:
    """The header block(s) of one member: a plain ustar block for a short ASCII name (the
    common case, built directly), else ``tarfile``'s PAX header (long or non-ASCII names)."""
    encoded = name.encode("utf-8", "surrogateescape")
    if len(encoded) < 100 and encoded.isascii() and 0 <= size < 0o77777777777:
        block = bytearray(
            _USTAR.pack(
                encoded,
                b"%07o\0" % (mode & 0o7777),
                b"%07o\0" % owner[0],
                b"%07o\0" % owner[1],
                b"%011o\0" % size,
                b"%011o\0" % mtime,
                b"        ",
                kind,
                b"",
                b"ustar\x0000",
                b"",
                b"",
                b"",
                b"",
                b"",
            )
        )
        block[148:156] = b"%06o\0 " % sum(block)
        return bytes(block)
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.mode = mode
    info.uid, info.gid = owner
    info.mtime = mtime
    return info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8", errors="surrogateescape")


def tar_stream(
    entries: Iterable[DirectoryEntry | FileEntry], *, uid: int, gid: int
) -> Iterator[bytes]:
    """The archive of ``entries`` as chunks of about 256 KiB (headers, small files and padding
    are gathered, so a tree of many small files is a few large writes, not one per member),
    owned by ``uid``/``gid``. A file source that ends early is padded with zero bytes and one
    that grew is cut at its declared size, so the archive is always well formed."""
    owner = (uid, gid)
    mtime = int(time.time())
    buffer = bytearray()
    for entry in entries:
        if isinstance(entry, DirectoryEntry):
            buffer += _header(
                entry.name.rstrip("/") + "/",
                tarfile.DIRTYPE,
                0,
                entry.mode,
                owner=entry.owner or owner,
                mtime=mtime,
            )
            continue
        buffer += _header(
            entry.name, tarfile.REGTYPE, entry.size, entry.mode, owner=owner, mtime=mtime
        )
        left = entry.size
        while left > 0:
            chunk = entry.source.read(min(_CHUNK, left))
            if not chunk:
                buffer += bytes(left)
                left = 0
                break
            if len(chunk) > left:
                chunk = chunk[:left]
            left -= len(chunk)
            buffer += chunk
            if len(buffer) >= _CHUNK:
                yield bytes(buffer)
                buffer.clear()
        padding = -entry.size % _BLOCK
        if padding:
            buffer += bytes(padding)
        if len(buffer) >= _CHUNK:
            yield bytes(buffer)
            buffer.clear()
    buffer += bytes(2 * _BLOCK)
    yield bytes(buffer)


class ChunkReader:
    """A minimal binary reader over an iterator of chunks (what ``tarfile``'s stream mode
    needs: ``read(n)``)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = b""

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            data = self._buffer + b"".join(self._chunks)
            self._buffer = b""
            return data
        while len(self._buffer) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data


def checked_member(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """``member`` if a download may accept it; :class:`ArchiveMemberError` otherwise."""
    name = member.name
    if name.startswith("/") or posixpath.isabs(name):
        raise ArchiveMemberError(f"archive member with an absolute name refused: {name!r}")
    if ".." in name.split("/"):
        raise ArchiveMemberError(f"archive member leaving its directory refused: {name!r}")
    if member.islnk() or member.issym():
        raise ArchiveMemberError(f"archive member that is a link refused: {name!r}")
    if not (member.isreg() or member.isdir()):
        raise ArchiveMemberError(f"archive member that is a device or FIFO refused: {name!r}")
    return member


class MemberReader:
    """Reads an archive sent as ``chunks``: :meth:`first` gives its first member (checked),
    :meth:`content` that member's bytes in chunks."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._tar = tarfile.open(fileobj=cast("IO[bytes]", ChunkReader(chunks)), mode="r|")  # noqa: SIM115

    def first(self) -> tarfile.TarInfo | None:
        """The first member, checked with :func:`checked_member` (``None``: empty archive)."""
        member = self._tar.next()
        return None if member is None else checked_member(member)

    def content(self, member: tarfile.TarInfo, chunk_size: int) -> Iterator[bytes]:
        """The bytes of the regular file ``member``, ``chunk_size`` at a time."""
        handle = self._tar.extractfile(member)
        if handle is None:
            return
        while True:
            chunk = handle.read(chunk_size)
            if not chunk:
                return
            yield chunk

    def close(self) -> None:
        self._tar.close()
