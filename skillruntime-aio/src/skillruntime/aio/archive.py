"""One archive per skill: a gzip'd tar built from the policy-filtered files, and the command that
unpacks it safely on the service.

The archive holds regular files and their directories only, with relative member names and
modes ``0755``/``0644`` (the executable bit of each file is kept). The unpack command refuses
an archive with an absolute member, a ``..`` component, or any member that is not a regular
file or directory (links, devices), extracts into a staging sibling of the target and renames
it into place, so a failure leaves neither a half-unpacked target nor the staging directory.
"""

from __future__ import annotations

import posixpath
import shlex
import tarfile
import tempfile
import uuid
from collections.abc import Sequence
from typing import IO

from skillruntime.core.skills.files import SkillFile

__all__ = ["ARCHIVE_SPOOL_MEMORY", "build_skill_archive", "unpack_command"]

ARCHIVE_SPOOL_MEMORY = 8 * 1024 * 1024
"""Bytes of an archive kept in memory before it spills to a temporary file."""

_UNSAFE_MEMBER = 3
"""Exit code of the unpack command for a refused archive."""


def build_skill_archive(files: Sequence[SkillFile]) -> tuple[IO[bytes], int]:
    """Write ``files`` into a spooled ``.tar.gz`` and return it (rewound) with its size.

    Memory stays bounded (the archive spills to disk past :data:`ARCHIVE_SPOOL_MEMORY`); the
    caller closes the returned file.
    """
    spool = tempfile.SpooledTemporaryFile(max_size=ARCHIVE_SPOOL_MEMORY)  # noqa: SIM115
    try:
        with tarfile.open(
            fileobj=spool, mode="w:gz", compresslevel=6, format=tarfile.PAX_FORMAT
        ) as tar:
            directories: set[str] = set()
            for item in files:
                parent = posixpath.dirname(item.relative_path)
                missing = []
                while parent and parent not in directories:
                    missing.append(parent)
                    directories.add(parent)
                    parent = posixpath.dirname(parent)
                for directory in reversed(missing):
                    info = tarfile.TarInfo(directory)
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)
                info = tarfile.TarInfo(item.relative_path)
                info.size = item.local_path.stat().st_size
                info.mode = 0o755 if item.executable else 0o644
                with item.local_path.open("rb") as handle:
                    tar.addfile(info, handle)
        size = spool.tell()
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return spool, size


def unpack_command(archive: str, target: str) -> str:
    """The shell command that unpacks ``archive`` into ``target`` (see the module docs).

    It exits ``3`` with a message on stderr when the archive holds an unsafe member and removes
    the uploaded archive in every case.
    """
    q = shlex.quote
    staging = posixpath.join(
        posixpath.dirname(target), f".{posixpath.basename(target)}.{uuid.uuid4().hex[:8]}.partial"
    )
    return "\n".join(
        [
            f"a={q(archive)}; t={q(target)}; s={q(staging)}",
            'fail() { rm -rf -- "$s"; rm -f -- "$a"; echo "$2" >&2; exit "$1"; }',
            'tar -tzf "$a" > /dev/null 2>&1 || fail 1 "the skill archive is unreadable"',
            "if tar -tzf \"$a\" | grep -qE '^/|(^|/)\\.\\.(/|$)'; then "
            f'fail {_UNSAFE_MEMBER} "the skill archive has a member that leaves its directory"; fi',
            "if tar -tvzf \"$a\" | grep -qvE '^[-d]'; then "
            f'fail {_UNSAFE_MEMBER} "the skill archive has a link or special member"; fi',
            'mkdir -p -- "$s" || fail 1 "cannot create the staging directory"',
            'tar -xzf "$a" -C "$s" --no-same-owner || fail 1 "unpacking the skill archive failed"',
            'chmod 755 "$s"',
            'rm -rf -- "$t" && mv -T -- "$s" "$t" || fail 1 "cannot move the skill into place"',
            'rm -f -- "$a"',
        ]
    )
