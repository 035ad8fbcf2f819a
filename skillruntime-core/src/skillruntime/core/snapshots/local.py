"""The embedded snapshot store: one local directory.

Layout under ``root``::

    objects/<hh>/<digest>          file contents, by sha256 (``hh``: the digest's first two hex)
    manifests/<key>/<name>.json    manifests (``key``: sha256 of the conversation id)
    tmp/                           files being written

Every write goes to a file in ``tmp/``, is flushed and fsynced, then renamed to its final name
(and the directory fsynced), so a reader or a crash sees a whole file or none. Objects are
verified while written and again on every read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import SnapshotIntegrityError, SnapshotNotFoundError, SnapshotStoreError
from .spi import CHUNK_SIZE, DEFAULT_GRACE_SECONDS, SnapshotStore, copy_verified, require_digest

__all__ = ["LocalSnapshotStore", "default_snapshot_dir"]


def default_snapshot_dir() -> Path:
    """``$SKILLRUNTIME_SNAPSHOT_DIR`` or ``<XDG data home>/skillruntime/snapshots``."""
    configured = os.environ.get("SKILLRUNTIME_SNAPSHOT_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "skillruntime" / "snapshots"


def _fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class LocalSnapshotStore(SnapshotStore):
    """Snapshots in a local directory (module docstring); ``root`` defaults to
    :func:`default_snapshot_dir`. Safe for several threads and processes on one machine."""

    def __init__(
        self, root: str | Path | None = None, *, grace_seconds: float = DEFAULT_GRACE_SECONDS
    ) -> None:
        self.root = Path(root).expanduser() if root is not None else default_snapshot_dir()
        self.grace_seconds = grace_seconds
        for sub in ("objects", "manifests", "tmp"):
            (self.root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"LocalSnapshotStore({str(self.root)!r})"

    # -- objects ----------------------------------------------------------------------------------

    def _object_path(self, digest: str) -> Path:
        return self.root / "objects" / digest[:2] / digest

    def _write_object(self, digest: str, stream: BinaryIO, size: int | None) -> None:
        final = self._object_path(digest)
        self._atomic_write(
            final, lambda sink: copy_verified(stream, sink, digest, what="object", size=size)
        )

    def _atomic_write(self, final: Path, write: Callable[[BinaryIO], Any]) -> None:
        temporary = self.root / "tmp" / f".{final.name}-{uuid.uuid4().hex}"
        try:
            with open(temporary, "xb") as sink:
                write(sink)
                sink.flush()
                os.fsync(sink.fileno())
            final.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.replace(temporary, final)
            _fsync_dir(final.parent)
        except OSError as error:
            raise SnapshotStoreError(f"cannot write {final.name} in {self.root}: {error}") from None
        finally:
            temporary.unlink(missing_ok=True)

    def _freshen(self, digest: str) -> bool:
        try:
            os.utime(self._object_path(digest))
        except FileNotFoundError:
            return False
        return True

    def _present(self, digests: set[str]) -> set[str]:
        objects = os.path.join(self.root, "objects")
        isfile = os.path.isfile
        return {digest for digest in digests if isfile(f"{objects}/{digest[:2]}/{digest}")}

    def get_object(self, digest: str) -> BinaryIO:
        require_digest(digest)
        path = self._object_path(digest)
        try:
            stream = open(path, "rb")  # noqa: SIM115 - returned to the caller
        except FileNotFoundError:
            raise SnapshotNotFoundError(f"no object {digest} in the snapshot store") from None
        except OSError as error:
            raise SnapshotStoreError(f"cannot read object {digest}: {error}") from None
        try:
            # Objects are only ever replaced by rename, never written in place: the bytes hashed
            # through this descriptor are the bytes the caller reads after the rewind.
            hasher = hashlib.sha256()
            while chunk := stream.read(CHUNK_SIZE):
                hasher.update(chunk)
            if hasher.hexdigest() != digest:
                raise SnapshotIntegrityError(
                    f"stored object {digest} does not match its digest", code="DIGEST_MISMATCH"
                )
            stream.seek(0)
        except BaseException:
            stream.close()
            raise
        return stream

    def _objects(self) -> Iterator[tuple[str, float]]:
        for folder in sorted((self.root / "objects").iterdir()):
            if not folder.is_dir():
                continue
            for path in folder.iterdir():
                with contextlib.suppress(FileNotFoundError):
                    yield path.name, path.stat().st_mtime

    def _delete_object_if_older(self, digest: str, cutoff: float) -> bool:
        path = self._object_path(digest)
        try:
            if path.stat().st_mtime > cutoff:
                return False
            path.unlink()
        except FileNotFoundError:
            return False
        return True

    def _sweep_temporaries(self, cutoff: float) -> None:
        for path in (self.root / "tmp").iterdir():
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime < min(cutoff, time.time() - 60):
                    path.unlink()

    # -- manifests --------------------------------------------------------------------------------

    def _write_manifest(self, key: str, name: str, data: bytes) -> None:
        self._atomic_write(self.root / "manifests" / key / name, lambda sink: sink.write(data))

    def _read_manifest(self, key: str, name: str) -> bytes:
        try:
            return (self.root / "manifests" / key / name).read_bytes()
        except FileNotFoundError:
            raise SnapshotNotFoundError(f"no manifest {name}") from None

    def _delete_manifest(self, key: str, name: str) -> None:
        folder = self.root / "manifests" / key
        with contextlib.suppress(FileNotFoundError):
            (folder / name).unlink()
            _fsync_dir(folder)

    def _manifest_names(self, key: str) -> list[str]:
        try:
            return [path.name for path in (self.root / "manifests" / key).iterdir()]
        except FileNotFoundError:
            return []

    def _all_manifests(self) -> Iterator[tuple[str, str]]:
        for folder in sorted((self.root / "manifests").iterdir()):
            for name in self._manifest_names(folder.name):
                yield folder.name, name
