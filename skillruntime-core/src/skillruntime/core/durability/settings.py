"""What both faces of workspace snapshots share beyond the pure pieces of :mod:`.common`: the
store, the bounds and the work done against the store (:class:`SnapshotSettings`).

:class:`~.workspace.WorkspaceSnapshots` and :class:`~.async_workspace.AsyncWorkspaceSnapshots`
(the sync face is generated from the async one by ``scripts/generate_sync.py``) extend it with
the calls into a runtime. The store is the synchronous SPI: the sync face calls it directly, the
async face in worker threads. See docs/durability.md.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from ..errors import SnapshotIntegrityError, SnapshotNotFoundError, WorkspaceSnapshotError
from ..runtime.async_spi import AsyncSkillRuntime
from ..runtime.spi import SkillRuntime
from ..snapshots.listing import DEFAULT_MAX_ENTRIES, ListingEntry
from ..snapshots.manifest import Entry, Manifest
from ..snapshots.spi import SnapshotStore
from .common import (
    DEFAULT_EXCLUDE,
    DEFAULT_LISTING_TIMEOUT,
    DEFAULT_MAX_LISTING_BYTES,
    DEFAULT_SCRIPT_TIMEOUT,
    DigestCache,
    excluded,
    lister_tag,
    seeded_cache,
)

__all__ = ["CACHED_WORKSPACES", "SPOOL_WORKERS", "TMPFS_SPOOL_BYTES", "SnapshotSettings"]

SPOOL_WORKERS = 8
"""Objects a restore fetches from the store at once."""

CACHED_WORKSPACES = 64
"""Workspaces whose last listing's digests are kept (least recently listed dropped first)."""

TMPFS_SPOOL_BYTES = 256 * 1024 * 1024
"""A restore of at most this many bytes spools its objects on ``/dev/shm`` when it can."""


class SnapshotSettings:
    """The store and the bounds shared by :class:`WorkspaceSnapshots` and its async twin.

    ``exclude`` names top-level workspace entries that are the runtime's and are neither stored
    nor touched by a restore (``skills``, the prepared skill copies, by default).
    ``listing_timeout_seconds`` and ``max_listing_bytes`` bound the listing command (a listing
    cut at the cap fails closed), ``max_entries`` the entries of a listing, and
    ``skip_special`` leaves FIFOs, sockets and devices out instead of refusing the snapshot.
    """

    def __init__(
        self,
        store: SnapshotStore,
        *,
        exclude: Sequence[str] = DEFAULT_EXCLUDE,
        listing_timeout_seconds: float = DEFAULT_LISTING_TIMEOUT,
        script_timeout_seconds: float = DEFAULT_SCRIPT_TIMEOUT,
        max_listing_bytes: int = DEFAULT_MAX_LISTING_BYTES,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        skip_special: bool = False,
        spool_dir: str | Path | None = None,
    ) -> None:
        self.store = store
        self.exclude = tuple(exclude)
        self.listing_timeout_seconds = listing_timeout_seconds
        self.script_timeout_seconds = script_timeout_seconds
        self.max_listing_bytes = max_listing_bytes
        self.max_entries = max_entries
        self.skip_special = skip_special
        self.spool_dir = spool_dir
        self._caches: OrderedDict[tuple[str, str, str], DigestCache] = OrderedDict()
        self._manifests: OrderedDict[str, Manifest] = OrderedDict()
        self._distrusted: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    def _cache(self, key: tuple[str, str, str]) -> DigestCache | None:
        cache = self._caches.get(key)
        if cache is not None:
            self._caches.move_to_end(key)
        return cache

    def _remember(self, key: tuple[str, str, str], cache: DigestCache | None) -> None:
        """Keep what a listing saw for the next one (at most :data:`CACHED_WORKSPACES`)."""
        self._caches.pop(key, None)
        if cache is not None:
            self._caches[key] = cache
            while len(self._caches) > CACHED_WORKSPACES:
                self._caches.popitem(last=False)

    def _seed(self, key: tuple[str, str, str], manifest: Manifest | None) -> DigestCache | None:
        """The digest cache ``manifest``'s stat keys give the workspace ``key`` (same lister;
        docs/durability.md, "Digest reuse"), unless a file of that workspace did not match its
        listed digest since its last full listing (then it is hashed whole: fail safe)."""
        if key in self._distrusted:
            return None
        return seeded_cache(manifest, lister_tag(*key))

    def _listed(self, key: tuple[str, str, str], cache: DigestCache | None) -> None:
        """A listing of workspace ``key`` succeeded: keep what it saw (:meth:`_remember`); one
        that hashed everything makes the workspace's manifests trusted to seed again."""
        self._remember(key, cache)
        if cache is not None:
            self._distrusted.pop(key, None)

    @contextlib.contextmanager
    def _forgetting(
        self, runtime: SkillRuntime | AsyncSkillRuntime, conversation_id: str
    ) -> Iterator[None]:
        """A file that did not match its listed digest drops the workspace's digest cache (the
        next listing hashes every file: fail safe)."""
        try:
            yield
        except WorkspaceSnapshotError:
            key = (runtime.name, runtime.default_working_directory, conversation_id)
            self._remember(key, None)
            self._distrusted[key] = None
            while len(self._distrusted) > CACHED_WORKSPACES:
                self._distrusted.popitem(last=False)
            raise

    def _parsed(self, entries: list[ListingEntry]) -> list[ListingEntry]:
        if not self.exclude:
            return entries
        if not any("/" in top for top in self.exclude):
            # top-level names only (the usual case): one set lookup per entry
            tops = frozenset(self.exclude)
            return [entry for entry in entries if entry.path.partition("/")[0] not in tops]
        return [entry for entry in entries if not excluded(entry.path, self.exclude)]

    def _previous(self, conversation_id: str) -> Manifest | None:
        """The conversation's newest manifest: the one this object stored or read last when the
        store still names it the newest (one listing of the store's manifests), else read from
        the store (verified against its id there)."""
        refs = self.store.list_snapshots(conversation_id)
        if not refs:
            self._manifests.pop(conversation_id, None)
            return None
        newest = refs[-1].snapshot_id
        kept = self._manifests.get(conversation_id)
        if kept is not None and kept.snapshot_id == newest:
            self._manifests.move_to_end(conversation_id)
            return kept
        manifest = self.store.get_manifest(conversation_id, newest)
        self._keep(conversation_id, manifest)
        return manifest

    def _keep(self, conversation_id: str, manifest: Manifest) -> None:
        """Keep ``manifest`` as the conversation's newest (at most :data:`CACHED_WORKSPACES`
        conversations); the manifest is immutable, its id computed once."""
        self._manifests.pop(conversation_id, None)
        self._manifests[conversation_id] = manifest
        while len(self._manifests) > CACHED_WORKSPACES:
            self._manifests.popitem(last=False)

    def _put(self, entry: Entry, stream: BinaryIO) -> None:
        """Store one file's content, verified against the listing's digest and size."""
        assert entry.digest is not None
        try:
            self.store.put_object(entry.digest, stream, size=entry.size)
        except SnapshotIntegrityError as error:
            raise WorkspaceSnapshotError(
                f"{entry.path[:200]!r} changed while the snapshot read it ({error.code}); "
                "take the snapshot again"
            ) from error

    def _retain(self, conversation_id: str, keep_last: int | None) -> tuple[str, ...]:
        if keep_last is None:
            return ()
        return self.store.keep_last(conversation_id, keep_last).deleted_snapshots

    def _manifest(self, conversation_id: str, snapshot_id: str | None) -> Manifest:
        if snapshot_id is not None:
            return self.store.get_manifest(conversation_id, snapshot_id)
        manifest = self.store.latest(conversation_id)
        if manifest is None:
            raise SnapshotNotFoundError(f"conversation {conversation_id!r} has no snapshot")
        return manifest

    def _spool(self, manifest: Manifest, spool: Path) -> dict[str, Path]:
        """Every object of ``manifest`` fetched (verified by the store) into ``spool``, a few at
        a time in worker threads (the store's calls are blocking I/O)."""
        digests = sorted(manifest.digests())

        def fetch(digest: str) -> Path:
            target = spool / digest
            with self.store.get_object(digest) as source, open(target, "wb") as sink:
                shutil.copyfileobj(source, sink, 1024 * 1024)
            return target

        def fetch_all(share: list[str]) -> list[Path]:
            return [fetch(digest) for digest in share]

        if len(digests) < 2:
            return {digest: fetch(digest) for digest in digests}
        # one share of the digests per worker: a future per object costs more than a small
        # object's fetch
        workers = min(SPOOL_WORKERS, len(digests))
        shares = [digests[index::workers] for index in range(workers)]
        spooled: dict[str, Path] = {}
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for share, paths in zip(shares, pool.map(fetch_all, shares), strict=True):
                spooled.update(zip(share, paths, strict=True))
        return spooled

    def _spool_root(self, manifest: Manifest) -> str | None:
        """Where a restore spools its objects: ``spool_dir`` when given, else ``/dev/shm`` when
        it is writable and the snapshot is small enough (at most :data:`TMPFS_SPOOL_BYTES`, and
        half the free space there), else the system's temporary directory."""
        if self.spool_dir is not None:
            return str(self.spool_dir)
        size = manifest.total_size()
        if size > TMPFS_SPOOL_BYTES or not os.access("/dev/shm", os.W_OK):
            return None
        try:
            stats = os.statvfs("/dev/shm")
        except OSError:
            return None
        return "/dev/shm" if size * 2 <= stats.f_bavail * stats.f_frsize else None
