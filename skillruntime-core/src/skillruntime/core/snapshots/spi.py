"""The snapshot store SPI: content-addressed objects, manifests per conversation, retention.

A store holds two kinds of thing. **Objects** are file contents keyed by their sha256 digest,
written once (a second put of a present digest uploads nothing) and verified on every read.
**Manifests** (:class:`~skillruntime.core.snapshots.manifest.Manifest`) are kept per conversation
under their snapshot id. Retention keeps the last N manifests of a conversation and then sweeps
(mark and sweep) the objects no remaining manifest of any conversation references, sparing any
object younger than a grace so that a snapshot being written concurrently keeps its objects.

:class:`SnapshotStore` implements the operations once over a handful of storage primitives; the
two stores are :class:`~skillruntime.core.snapshots.local.LocalSnapshotStore` (a directory, the
embedded default) and :class:`~skillruntime.core.snapshots.objectstore.ObjectSnapshotStore`
(any fsspec file system: S3, GCS, Azure, memory).
"""

from __future__ import annotations

import hashlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import BinaryIO

from ..errors import (
    SnapshotIntegrityError,
    SnapshotManifestError,
    SnapshotNotFoundError,
    SnapshotStoreError,
)
from .manifest import Manifest, is_digest, snapshot_id_of

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_GRACE_SECONDS",
    "RetentionResult",
    "SnapshotRef",
    "SnapshotStore",
    "conversation_key",
]

logger = logging.getLogger(__name__)

CHUNK_SIZE = 1024 * 1024
"""Bytes read or written at a time: a stream through a store holds about this much in memory."""

DEFAULT_GRACE_SECONDS = 3600.0
"""An unreferenced object younger than this is not swept (a snapshot may be being written)."""

_CREATED_FORMAT = "%Y%m%dT%H%M%S%fZ"


def conversation_key(conversation: str) -> str:
    """The storage folder of a conversation: the sha256 of its id (ids are free text)."""
    return hashlib.sha256(conversation.encode("utf-8", "surrogatepass")).hexdigest()


def manifest_name(manifest: Manifest, snapshot_id: str | None = None) -> str:
    """``<created>-<id>.json``: sorts by creation time, then id (``snapshot_id`` when the
    caller already has it: computing it serializes the manifest)."""
    identifier = manifest.snapshot_id if snapshot_id is None else snapshot_id
    return f"{manifest.created.strftime(_CREATED_FORMAT)}-{identifier}.json"


@dataclass(frozen=True, order=True)
class SnapshotRef:
    """A stored snapshot, as listed: when it was taken and its id."""

    created: datetime
    snapshot_id: str
    conversation: str = field(compare=False)


@dataclass(frozen=True)
class RetentionResult:
    """What a retention pass removed."""

    deleted_snapshots: tuple[str, ...] = ()
    deleted_objects: tuple[str, ...] = ()


def parse_manifest_name(name: str) -> tuple[datetime, str] | None:
    stem, dot, suffix = name.rpartition(".")
    created, dash, snapshot_id = stem.partition("-")
    if not dot or suffix != "json" or not dash or not is_digest(snapshot_id):
        return None
    try:
        when = datetime.strptime(created, _CREATED_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
    return when, snapshot_id


def require_digest(digest: str) -> str:
    if not is_digest(digest):
        raise SnapshotStoreError("an object digest must be 64 lowercase hex digits (sha256)")
    return digest


def copy_verified(
    source: BinaryIO, sink: BinaryIO, digest: str, *, what: str, size: int | None = None
) -> int:
    """Copy ``source`` to ``sink`` in :data:`CHUNK_SIZE` chunks, hashing as it goes; raise
    :class:`SnapshotIntegrityError` when the bytes do not hash to ``digest``. Returns the size."""
    hasher = hashlib.sha256()
    total = 0
    while True:
        chunk = source.read(CHUNK_SIZE)
        if not chunk:
            break
        hasher.update(chunk)
        sink.write(chunk)
        total += len(chunk)
    if hasher.hexdigest() != digest:
        raise SnapshotIntegrityError(
            f"{what} does not match its digest {digest}", code="DIGEST_MISMATCH"
        )
    if size is not None and total != size:
        raise SnapshotIntegrityError(
            f"{what} has {total} bytes, not the {size} declared", code="SIZE_MISMATCH"
        )
    return total


class SnapshotStore(ABC):
    """Workspace snapshots: objects by digest and manifests by conversation (module docstring).

    Subclasses provide the storage primitives (the ``_``-prefixed abstract methods); the public
    operations, their checks and retention are written here once. Stores are usable from several
    threads and processes at once: every write lands whole (or not at all) under its final name.
    """

    grace_seconds: float = DEFAULT_GRACE_SECONDS

    # -- objects ----------------------------------------------------------------------------------

    def put_object(self, digest: str, stream: BinaryIO, *, size: int | None = None) -> bool:
        """Store the bytes of ``stream`` under ``digest``, streamed in bounded memory and
        verified while written (:class:`SnapshotIntegrityError` if they do not match, nothing
        stored). An object already present is not uploaded again, only freshened so that a
        concurrent sweep spares it. Returns whether bytes were written."""
        require_digest(digest)
        if self._freshen(digest):
            return False
        self._write_object(digest, stream, size)
        return True

    def has_objects(self, digests: Iterable[str]) -> set[str]:
        """The subset of ``digests`` present in the store, in one call (the incremental check).

        Each object found is freshened (as :meth:`put_object` does), so an object reported
        present is not swept before the snapshot that reuses it stores its manifest.
        """
        wanted = {require_digest(digest) for digest in digests}
        if not wanted:
            return set()
        present = self._present(wanted)
        return {digest for digest in present if self._freshen(digest)}

    @abstractmethod
    def get_object(self, digest: str) -> BinaryIO:
        """A readable stream of the object, verified in full before it is returned (a corrupted
        object raises :class:`SnapshotIntegrityError` and returns nothing). Close it after use."""

    # -- manifests --------------------------------------------------------------------------------

    def put_manifest(self, manifest: Manifest) -> str:
        """Store ``manifest`` and return its snapshot id. Every object its files need must be in
        the store (else :class:`SnapshotStoreError` naming how many are missing, nothing kept)."""
        needed = manifest.digests()
        missing = needed - self._present(needed)
        if missing:
            raise SnapshotStoreError(
                f"{len(missing)} object(s) of the snapshot are not in the store; put them first"
            )
        data = manifest.canonical_json()
        snapshot_id = snapshot_id_of(data)
        key = conversation_key(manifest.conversation)
        self._write_manifest(key, manifest_name(manifest, snapshot_id), data)
        missing = needed - self._present(needed)
        if missing:  # swept between the check and the write: do not leave a dangling manifest
            self._delete_manifest(key, manifest_name(manifest, snapshot_id))
            raise SnapshotStoreError(
                f"{len(missing)} object(s) of the snapshot were removed while it was stored"
            )
        logger.info(
            "stored snapshot %s of conversation %s (%d entries)",
            snapshot_id,
            key[:12],
            len(manifest.entries),
        )
        return snapshot_id

    def get_manifest(self, conversation: str, snapshot_id: str) -> Manifest:
        """The manifest of a stored snapshot, verified against its id."""
        key = conversation_key(conversation)
        name = self._find_manifest(key, snapshot_id)
        data = self._read_manifest(key, name)
        if snapshot_id_of(data) != snapshot_id:
            raise SnapshotIntegrityError(
                f"manifest of snapshot {snapshot_id} does not match its id",
                code="MANIFEST_MISMATCH",
            )
        try:
            manifest = Manifest.from_json(data)
        except SnapshotManifestError as error:
            raise SnapshotIntegrityError(
                f"stored manifest of snapshot {snapshot_id} is invalid: {error}",
                code="MANIFEST_MISMATCH",
            ) from None
        if manifest.conversation != conversation:
            raise SnapshotIntegrityError(
                f"snapshot {snapshot_id} belongs to another conversation", code="MANIFEST_MISMATCH"
            )
        return manifest

    def list_snapshots(self, conversation: str) -> list[SnapshotRef]:
        """The conversation's snapshots, oldest first."""
        refs = []
        for name in self._manifest_names(conversation_key(conversation)):
            parsed = parse_manifest_name(name)
            if parsed is not None:
                refs.append(SnapshotRef(parsed[0], parsed[1], conversation))
        return sorted(refs)

    def latest(self, conversation: str) -> Manifest | None:
        """The newest manifest of the conversation, or ``None``."""
        refs = self.list_snapshots(conversation)
        return self.get_manifest(conversation, refs[-1].snapshot_id) if refs else None

    def delete_snapshot(self, conversation: str, snapshot_id: str) -> None:
        """Remove a snapshot's manifest (its objects go at the next sweep)."""
        key = conversation_key(conversation)
        self._delete_manifest(key, self._find_manifest(key, snapshot_id))

    # -- retention --------------------------------------------------------------------------------

    def keep_last(
        self, conversation: str, n: int, *, grace_seconds: float | None = None
    ) -> RetentionResult:
        """Delete all but the newest ``n`` (at least 1) snapshots of ``conversation``, then
        :meth:`sweep` the objects no remaining manifest references."""
        if n < 1:
            raise SnapshotStoreError("keep_last keeps at least one snapshot")
        refs = self.list_snapshots(conversation)
        doomed = refs[:-n]
        for ref in doomed:
            self.delete_snapshot(conversation, ref.snapshot_id)
        swept = self.sweep(grace_seconds=grace_seconds)
        return RetentionResult(
            deleted_snapshots=tuple(ref.snapshot_id for ref in doomed),
            deleted_objects=swept.deleted_objects,
        )

    def sweep(self, *, grace_seconds: float | None = None) -> RetentionResult:
        """Mark every digest referenced by a manifest of any conversation, then delete the
        unmarked objects older than the grace (and stale temporary files)."""
        grace = self.grace_seconds if grace_seconds is None else grace_seconds
        marked = self._mark()
        now = time.time()
        candidates = [
            digest
            for digest, modified in self._objects()
            if digest not in marked and now - modified >= grace
        ]
        if not candidates:
            self._sweep_temporaries(now - grace)
            return RetentionResult()
        marked = self._mark()  # a manifest stored since the first mark keeps its objects
        deleted = []
        for digest in candidates:
            if digest in marked:
                continue
            if self._delete_object_if_older(digest, now - grace):
                deleted.append(digest)
        self._sweep_temporaries(now - grace)
        if deleted:
            logger.info("swept %d unreferenced snapshot object(s)", len(deleted))
        return RetentionResult(deleted_objects=tuple(sorted(deleted)))

    def _mark(self) -> set[str]:
        marked: set[str] = set()
        for key, name in self._all_manifests():
            try:
                data = self._read_manifest(key, name)
            except SnapshotNotFoundError:
                continue  # deleted meanwhile
            try:
                marked |= Manifest.from_json(data).digests()
            except SnapshotManifestError:
                # an unreadable manifest could still name objects: sweep nothing it might hold
                raise SnapshotStoreError(
                    f"manifest {name} is unreadable; refusing to sweep objects"
                ) from None
        return marked

    def _find_manifest(self, key: str, snapshot_id: str) -> str:
        for name in self._manifest_names(key):
            parsed = parse_manifest_name(name)
            if parsed is not None and parsed[1] == snapshot_id:
                return name
        raise SnapshotNotFoundError(f"no snapshot {snapshot_id} for this conversation")

    # -- primitives -------------------------------------------------------------------------------

    @abstractmethod
    def _write_object(self, digest: str, stream: BinaryIO, size: int | None) -> None:
        """Write the object atomically, verifying the digest before it becomes visible."""

    @abstractmethod
    def _freshen(self, digest: str) -> bool:
        """If the object exists, refresh its modification time and return True."""

    @abstractmethod
    def _present(self, digests: set[str]) -> set[str]:
        """Which of ``digests`` exist (no freshening)."""

    @abstractmethod
    def _objects(self) -> Iterator[tuple[str, float]]:
        """Every stored object as (digest, modification time in epoch seconds)."""

    @abstractmethod
    def _delete_object_if_older(self, digest: str, cutoff: float) -> bool:
        """Delete the object unless it was modified after ``cutoff``; return whether deleted."""

    @abstractmethod
    def _sweep_temporaries(self, cutoff: float) -> None:
        """Remove temporary files left by crashed writers, modified before ``cutoff``."""

    @abstractmethod
    def _write_manifest(self, key: str, name: str, data: bytes) -> None: ...

    @abstractmethod
    def _read_manifest(self, key: str, name: str) -> bytes:
        """The manifest's bytes, or :class:`SnapshotNotFoundError`."""

    @abstractmethod
    def _delete_manifest(self, key: str, name: str) -> None: ...

    @abstractmethod
    def _manifest_names(self, key: str) -> list[str]: ...

    @abstractmethod
    def _all_manifests(self) -> Iterator[tuple[str, str]]:
        """Every stored manifest as (conversation key, name)."""
