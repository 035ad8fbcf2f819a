"""Validate a ZIP skill package and extract it safely.

Every check runs on the member list before a byte is written, then again while extracting (actual
byte counts, never the sizes the archive declares). A package is refused when a member escapes
the target (absolute, ``..``, backslashes, drive letters, NUL), is a symbolic link or another
special file, appears twice (compared case-insensitively, so it extracts the same on every file
system), or when the package has too many members, too many uncompressed bytes, a member that
decompresses more than the compression-ratio guard allows, or not exactly one ``SKILL.md`` at its
root whose ``name`` equals the artifact name.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from ..skills import skill_frontmatter
from .spi import ArtifactIntegrityError, PackageRejectedError, SkillArtifact

__all__ = [
    "DEFAULT_LIMITS",
    "PackageLimits",
    "SpooledPackage",
    "check_declared",
    "extract_package",
    "read_package_skill_name",
    "spool_package",
]

_DRIVE = re.compile(r"^[A-Za-z]:")
_CHUNK = 1024 * 1024
_SKILL_MD = "SKILL.md"
_SKILL_MD_MAX_BYTES = 1024 * 1024
_MIB = 1024 * 1024
_MAX_SEGMENT_BYTES = 255
"""Longest member path segment, in UTF-8 bytes (the usual file-name limit)."""
_MAX_NAME_BYTES = 1024
"""Longest member name, in UTF-8 bytes, so the extracted path stays far below ``PATH_MAX``."""


@dataclass(frozen=True)
class PackageLimits:
    """Limits a package must respect.

    ``max_members`` entries and ``max_uncompressed_bytes`` in total; ``max_package_bytes`` for the
    ZIP itself; a member bigger than ``ratio_exempt_bytes`` may not decompress to more than
    ``max_compression_ratio`` times its compressed size.
    """

    max_members: int = 10_000
    max_uncompressed_bytes: int = 512 * _MIB
    max_package_bytes: int = 512 * _MIB
    max_compression_ratio: float = 200.0
    ratio_exempt_bytes: int = 64 * 1024


DEFAULT_LIMITS = PackageLimits()


@dataclass(frozen=True)
class SpooledPackage:
    """A package copied to a local file, with its SHA-256 (hex) and size."""

    path: Path
    sha256: str
    size: int


def spool_package(source: BinaryIO, target: Path, max_bytes: int) -> SpooledPackage:
    """Copy ``source`` to new file ``target`` (0600) hashing it; refuse over ``max_bytes``."""
    digest = hashlib.sha256()
    size = 0
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(_CHUNK):
            size += len(chunk)
            if size > max_bytes:
                raise PackageRejectedError(
                    f"skill package is larger than the limit of {max_bytes} bytes",
                    reason="TOO_LARGE",
                )
            digest.update(chunk)
            out.write(chunk)
    return SpooledPackage(path=target, sha256=digest.hexdigest(), size=size)


def check_declared(artifact: SkillArtifact, spooled: SpooledPackage, *, what: str) -> None:
    """Raise :class:`ArtifactIntegrityError` when a declared digest or size does not match."""
    if artifact.size is not None and artifact.size != spooled.size:
        raise ArtifactIntegrityError(
            f"{what} for {artifact.label} has {spooled.size} bytes, {artifact.size} were declared",
            code="SIZE_MISMATCH",
        )
    if artifact.digest_hex is not None and artifact.digest_hex != spooled.sha256:
        raise ArtifactIntegrityError(
            f"{what} for {artifact.label} does not match its declared digest {artifact.digest}",
            code="DIGEST_MISMATCH",
        )


@dataclass(frozen=True)
class _Member:
    info: zipfile.ZipInfo
    parts: tuple[str, ...]
    is_dir: bool
    executable: bool


def _member_name(info: zipfile.ZipInfo) -> str:
    raw = info.orig_filename
    if "\0" in raw:
        raise PackageRejectedError("a member name contains a NUL character", reason="ESCAPE")
    return raw


def _split(name: str) -> tuple[tuple[str, ...], bool]:
    """The path segments of a member name and whether it names a directory."""
    shown = name[:200]
    if not name or "\\" in name or name.startswith("/") or _DRIVE.match(name):
        raise PackageRejectedError(
            f"member {shown!r} escapes the package (absolute path, drive letter or backslash)",
            reason="ESCAPE",
        )
    is_dir = name.endswith("/")
    parts = tuple(name.rstrip("/").split("/"))
    if any(part in {"", ".", ".."} for part in parts):
        raise PackageRejectedError(
            f"member {shown!r} escapes the package or is not a normalized path", reason="ESCAPE"
        )
    size = len(name.encode("utf-8", "surrogateescape"))
    longest = max(len(part.encode("utf-8", "surrogateescape")) for part in parts)
    if size > _MAX_NAME_BYTES or longest > _MAX_SEGMENT_BYTES:
        raise PackageRejectedError(
            f"member {shown!r}... has a name of {size} bytes or a segment of {longest} bytes; "
            f"at most {_MAX_NAME_BYTES} and {_MAX_SEGMENT_BYTES} are accepted",
            reason="NAME_TOO_LONG",
        )
    return parts, is_dir


def _classify(info: zipfile.ZipInfo) -> _Member:
    name = _member_name(info)
    parts, is_dir = _split(name)
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if kind == stat.S_IFLNK:
        raise PackageRejectedError(
            f"member {name[:200]!r} is a symbolic link; packages may hold only files",
            reason="SYMLINK",
        )
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise PackageRejectedError(
            f"member {name[:200]!r} is a special file; packages may hold only files",
            reason="SPECIAL_FILE",
        )
    is_dir = is_dir or kind == stat.S_IFDIR
    return _Member(info=info, parts=parts, is_dir=is_dir, executable=bool(mode & 0o111))


def _check_members(archive: zipfile.ZipFile, limits: PackageLimits) -> list[_Member]:
    infos = archive.infolist()
    if len(infos) > limits.max_members:
        raise PackageRejectedError(
            f"skill package has {len(infos)} members, the limit is {limits.max_members}",
            reason="TOO_MANY_MEMBERS",
        )
    members = [_classify(info) for info in infos]
    files: set[tuple[str, ...]] = set()
    dirs: set[tuple[str, ...]] = set()
    total = 0
    for member in members:
        key = tuple(part.casefold() for part in member.parts)
        shown = "/".join(member.parts)[:200]
        if member.is_dir:
            if key in files:
                raise PackageRejectedError(f"member {shown!r} appears twice", reason="DUPLICATE")
            dirs.add(key)
            continue
        if key in files or key in dirs:
            raise PackageRejectedError(f"member {shown!r} appears twice", reason="DUPLICATE")
        files.add(key)
        dirs.update(key[:i] for i in range(1, len(key)))
        total += member.info.file_size
        if total > limits.max_uncompressed_bytes:
            raise PackageRejectedError(
                "skill package expands to more than the limit of "
                f"{limits.max_uncompressed_bytes} bytes",
                reason="TOO_LARGE",
            )
        _check_ratio(member.info, limits)
    if files & dirs:
        clash = "/".join(sorted(files & dirs)[0])[:200]
        raise PackageRejectedError(
            f"member {clash!r} is both a file and a directory", reason="DUPLICATE"
        )
    _check_skill_md(members)
    return members


def _check_ratio(info: zipfile.ZipInfo, limits: PackageLimits) -> None:
    if info.file_size <= limits.ratio_exempt_bytes:
        return
    if info.file_size > limits.max_compression_ratio * max(info.compress_size, 1):
        raise PackageRejectedError(
            f"member {info.filename[:200]!r} decompresses more than "
            f"{limits.max_compression_ratio:g} times its compressed size",
            reason="COMPRESSION_RATIO",
        )


def _check_skill_md(members: list[_Member]) -> None:
    found = [m for m in members if not m.is_dir and m.parts[-1].casefold() == "skill.md"]
    at_root = [m for m in found if m.parts == (_SKILL_MD,)]
    if len(found) == 1 and at_root:
        return
    if not found:
        detail = "it has none"
    elif not at_root and len(found) == 1:
        detail = (
            f"found {'/'.join(found[0].parts)[:200]!r}; zip the contents of the skill "
            "directory, not the directory itself"
        )
    else:
        detail = "found " + ", ".join(repr("/".join(m.parts)[:200]) for m in found[:5])
    raise PackageRejectedError(
        f"a skill package must contain exactly one SKILL.md, at its root: {detail}",
        reason="SKILL_MD",
    )


def _frontmatter_name(text: str) -> str | None:
    data = skill_frontmatter(text)
    name = data.get("name") if data is not None else None
    return name.strip() if isinstance(name, str) else None


def _open_archive(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise PackageRejectedError(
            f"skill package is not a readable ZIP archive ({type(error).__name__})",
            reason="NOT_A_ZIP",
        ) from None


def _read_skill_md(archive: zipfile.ZipFile) -> str:
    try:
        with archive.open(_SKILL_MD) as handle:
            data = handle.read(_SKILL_MD_MAX_BYTES + 1)
    except (zipfile.BadZipFile, OSError, RuntimeError, EOFError) as error:
        raise PackageRejectedError(
            f"SKILL.md cannot be read ({type(error).__name__})", reason="CORRUPT"
        ) from None
    if len(data) > _SKILL_MD_MAX_BYTES:
        raise PackageRejectedError("SKILL.md is larger than 1 MiB", reason="SKILL_MD")
    return data.decode("utf-8", errors="replace")


def read_package_skill_name(path: Path, limits: PackageLimits = DEFAULT_LIMITS) -> str | None:
    """Validate the member list of the package at ``path`` and return its ``SKILL.md`` name."""
    with _open_archive(path) as archive:
        _check_members(archive, limits)
        return _frontmatter_name(_read_skill_md(archive))


def extract_package(
    path: Path, target: Path, expected_name: str, limits: PackageLimits = DEFAULT_LIMITS
) -> None:
    """Validate the package at ``path`` and extract it into ``target`` (which must not exist).

    Files get mode 0755 when the archive marks them executable, 0644 otherwise; directories
    0755. On any failure ``target`` is removed and :class:`PackageRejectedError` raised.
    """
    with _open_archive(path) as archive:
        members = _check_members(archive, limits)
        name = _frontmatter_name(_read_skill_md(archive))
        if name != expected_name:
            raise PackageRejectedError(
                f"SKILL.md names the skill {str(name)[:100]!r}, the artifact is {expected_name!r}",
                reason="NAME_MISMATCH",
            )
        target.mkdir(mode=0o755)
        try:
            _extract_all(archive, members, target, limits)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise


def _extract_all(
    archive: zipfile.ZipFile, members: list[_Member], target: Path, limits: PackageLimits
) -> None:
    budget = limits.max_uncompressed_bytes
    for member in sorted(members, key=lambda m: m.parts):
        destination = target.joinpath(*member.parts)
        try:
            if member.is_dir:
                destination.mkdir(mode=0o755, parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            budget -= _extract_file(archive, member, destination, budget)
        except OSError as error:
            if error.errno != errno.ENAMETOOLONG:
                raise
            raise PackageRejectedError(
                f"member {member.info.filename[:200]!r}... cannot be extracted here: its path is "
                "too long for the file system",
                reason="NAME_TOO_LONG",
            ) from None


def _extract_file(archive: zipfile.ZipFile, member: _Member, destination: Path, budget: int) -> int:
    mode = 0o755 if member.executable else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    written = 0
    try:
        with archive.open(member.info) as source:
            fd = os.open(destination, flags, mode)
            with os.fdopen(fd, "wb") as out:
                for chunk in _chunks(source):
                    written += len(chunk)
                    if written > budget:
                        raise PackageRejectedError(
                            "skill package expands to more than its uncompressed size limit",
                            reason="TOO_LARGE",
                        )
                    out.write(chunk)
    except (zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError) as error:
        raise PackageRejectedError(
            f"member {member.info.filename[:200]!r} is corrupt or unsupported "
            f"({type(error).__name__})",
            reason="CORRUPT",
        ) from None
    os.chmod(destination, mode)
    return written


def _chunks(source: IO[bytes]) -> Iterator[bytes]:
    while chunk := source.read(_CHUNK):
        yield chunk
