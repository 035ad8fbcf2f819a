"""``SnapshotCache``: the versioned host cache of verified skill snapshots.

Layout under ``<cache_dir>/v1``::

    entries/<scope>/<root>/<revision>/metadata.json   (mtime = last use, the TTL/LRU clock)
    entries/<scope>/<root>/<revision>/<name>/…        (the skill directory, SKILL.md at its top)
    locks/<key id>.lease                              (shared by every lease of the entry)
    locks/<key id>.build                              (one download per key on this host)
    .partial-<key id>-<random>/                       (staging of a download, swept when stale)
    .trash-<random>/                                  (an entry being removed)

``<scope>``, ``<root>`` and ``<revision>`` are SHA-256 digests of the permission scope, root URI
and revision. Directories are 0700 and files 0600. An entry is published by renaming a complete
staging directory, so a reader sees a whole entry or none. A lease holds the entry's lease lock
shared; eviction takes it exclusively without waiting, so a leased entry is never removed, in
this process or any other.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .locks import HostLock
from .models import VikingCacheEntry, VikingSkillManifest

__all__ = ["CacheKey", "CorruptSnapshotError", "SnapshotCache", "hash_file", "verify_snapshot"]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
_META = "metadata.json"
_HASH_CHUNK = 1024 * 1024


class CorruptSnapshotError(Exception):
    """Snapshot bytes on disk differ from the manifest."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CacheKey:
    """``(scope, root, revision)`` digests of one cache entry; ``name`` (the skill name, which
    names the snapshot directory as Agent Skills require) is not part of the identity."""

    scope: str
    root: str
    revision: str
    name: str = ""

    @classmethod
    def build(cls, scope_digest: str, manifest: VikingSkillManifest) -> CacheKey:
        """The key of ``manifest``'s revision in the permission scope ``scope_digest``."""
        return cls(
            scope_digest, _digest(manifest.root_uri), _digest(manifest.revision), manifest.name
        )

    @property
    def text(self) -> str:
        """``scope/root/revision``."""
        return f"{self.scope}/{self.root}/{self.revision}"

    @property
    def ident(self) -> str:
        """A short file-name-safe identifier for lock and staging names."""
        return _digest(self.text)[:40]


def hash_file(path: Path, chunk: int = _HASH_CHUNK) -> tuple[int, str]:
    """``(size, sha256 hex)`` of a regular file, read in ``chunk``-byte blocks (bounded memory)
    without following a link."""
    digest = hashlib.sha256()
    size = 0
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        while block := handle.read(chunk):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


Fingerprint = tuple[int, int, int, int, int]
"""``(size, mtime_ns, ctime_ns, inode, mode)`` of a cached file, as :func:`os.lstat` gives it."""

RACY_NS = 50_000_000
"""A fingerprint whose ctime is this close to the verification that produced it is not recorded:
file time stamps advance by a kernel tick, so a change in the same tick as the last one could keep
the same ctime. Such a file is hashed again on the next check, as git does with racy entries."""


def _fingerprint(info: os.stat_result) -> Fingerprint:
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_mode)


def verify_snapshot(
    snapshot: Path,
    manifest: VikingSkillManifest,
    fingerprints: Mapping[str, Fingerprint] | None = None,
) -> dict[str, Fingerprint]:
    """Raise :class:`CorruptSnapshotError` unless ``snapshot`` holds exactly the manifest's
    files with their sizes and hashes (no links, no other files).

    A file whose :func:`os.lstat` fingerprint equals its entry in ``fingerprints`` (recorded by an
    earlier verification) is trusted without reading it: any write to it, or a change of its
    time stamps, moves its ctime, which no unprivileged process can set back. Every other file is
    hashed in full. Returns the fingerprints that may be recorded for the next check: those trusted
    and those hashed whose ctime is older than the verification by :data:`RACY_NS`."""
    expected = {item.path: item for item in manifest.files}
    known = fingerprints or {}
    started = time.time_ns()
    seen: set[str] = set()
    recorded: dict[str, Fingerprint] = {}
    pending = [(os.fspath(snapshot), "")]
    while pending:
        folder, prefix = pending.pop()
        with os.scandir(folder) as entries:
            children = list(entries)
        for entry in children:
            relative = prefix + entry.name
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                pending.append((entry.path, relative + "/"))
                continue
            if stat.S_ISLNK(info.st_mode):
                raise CorruptSnapshotError(f"link in snapshot: {relative}")
            item = expected.get(relative)
            if item is None or not stat.S_ISREG(info.st_mode):
                raise CorruptSnapshotError(f"unexpected entry in snapshot: {relative}")
            if info.st_size != item.size:
                raise CorruptSnapshotError(f"size of {relative} differs")
            fingerprint = _fingerprint(info)
            if known.get(relative) == fingerprint:
                recorded[relative] = fingerprint
            else:
                size, digest = hash_file(Path(entry.path))
                if size != item.size or digest != item.sha256:
                    raise CorruptSnapshotError(f"content of {relative} differs")
                if info.st_ctime_ns < started - RACY_NS:
                    recorded[relative] = fingerprint
            seen.add(relative)
    if seen != set(expected):
        raise CorruptSnapshotError(f"{len(set(expected) - seen)} file(s) missing from snapshot")
    return recorded


def _load_fingerprints(meta: Mapping[str, Any]) -> dict[str, Fingerprint]:
    """The fingerprints recorded in an entry's metadata; malformed ones are ignored."""
    raw = meta.get("fingerprints")
    found: dict[str, Fingerprint] = {}
    if not isinstance(raw, dict):
        return found
    for name, value in raw.items():
        if (
            isinstance(name, str)
            and isinstance(value, list)
            and len(value) == 5
            and all(type(part) is int for part in value)
        ):
            found[name] = (value[0], value[1], value[2], value[3], value[4])
    return found


def make_private_dir(path: Path) -> None:
    """Create ``path`` and missing parents as 0700 directories (existing ones are left alone)."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(folder, 0o700)


@dataclass
class _Scanned:
    key: CacheKey
    path: Path
    meta: dict[str, Any] | None
    mtime: float
    size: int


class SnapshotCache:
    """The cache directory of one store; every method is safe across threads and processes."""

    def __init__(self, directory: Path, *, clock: Callable[[], float], ttl: float) -> None:
        self.root = directory / "v1"
        self._clock = clock
        self._ttl = ttl

    # -- layout ----------------------------------------------------------------------------
    def prepare(self) -> None:
        """Create the layout with private permissions; ``OSError`` if it cannot be used."""
        make_private_dir(self.root)
        for name in ("entries", "locks"):
            make_private_dir(self.root / name)
        info = self.root.stat()
        if info.st_uid != os.geteuid():
            raise PermissionError("the cache directory belongs to another user")
        os.chmod(self.root, 0o700)
        probe = self.root / f".probe-{uuid.uuid4().hex}"
        probe.write_bytes(b"")
        probe.unlink()

    def entry_dir(self, key: CacheKey) -> Path:
        """The directory of ``key``'s entry (it may not exist)."""
        return self.root / "entries" / key.scope / key.root / key.revision

    def snapshot_dir(self, key: CacheKey) -> Path:
        """The skill directory of ``key``'s entry."""
        return self.entry_dir(key) / key.name

    def _lock_path(self, key: CacheKey, kind: str) -> Path:
        return self.root / "locks" / f"{key.ident}.{kind}"

    # -- locks -----------------------------------------------------------------------------
    def lease_lock(self, key: CacheKey, timeout: float) -> HostLock:
        """Hold ``key``'s entry against eviction (shared with other leases)."""
        return HostLock.acquire(self._lock_path(key, "lease"), shared=True, timeout=timeout)

    def build_lock(self, key: CacheKey, timeout: float) -> HostLock:
        """The exclusive right to (re)build ``key``'s entry on this host."""
        return HostLock.acquire(self._lock_path(key, "build"), shared=False, timeout=timeout)

    def is_leased(self, key: CacheKey) -> bool:
        """Whether any process holds a lease on ``key`` right now."""
        held = HostLock.try_acquire(self._lock_path(key, "lease"), shared=False)
        if held is None:
            return True
        held.release()
        return False

    # -- entries ---------------------------------------------------------------------------
    def read_meta(self, key: CacheKey) -> dict[str, Any] | None:
        """The entry's metadata, or ``None`` when missing or unreadable."""
        try:
            data = json.loads((self.entry_dir(key) / _META).read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def check(self, key: CacheKey, manifest: VikingSkillManifest) -> str:
        """``"hit"`` (metadata and every byte match ``manifest``), ``"missing"``, ``"stale"``
        (unreadable or foreign metadata) or ``"corrupt"`` (bytes differ)."""
        if not self.entry_dir(key).exists():
            return "missing"
        meta = self.read_meta(key)
        if (
            meta is None
            or meta.get("format_version") != FORMAT_VERSION
            or meta.get("root_uri") != manifest.root_uri
            or meta.get("revision") != manifest.revision
            or meta.get("manifest_signature") != manifest.signature
        ):
            return "stale"
        known = _load_fingerprints(meta)
        try:
            recorded = verify_snapshot(self.snapshot_dir(key), manifest, known)
        except (CorruptSnapshotError, OSError) as error:
            logger.warning("cached snapshot of %s is corrupt: %s", manifest.root_uri, error)
            return "corrupt"
        if recorded != known:
            self._record_fingerprints(key, meta, recorded)
        return "hit"

    def _record_fingerprints(
        self, key: CacheKey, meta: dict[str, Any], fingerprints: Mapping[str, Fingerprint]
    ) -> None:
        """Replace the entry's metadata with one recording ``fingerprints`` (atomic rename; the
        last-use time is kept; a failure only costs a full hash next time)."""
        path = self.entry_dir(key) / _META
        updated = dict(meta)
        updated["fingerprints"] = {name: list(value) for name, value in fingerprints.items()}
        part = path.with_name(f".{_META}.{uuid.uuid4().hex[:12]}")
        try:
            used = path.stat()
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(updated, handle, sort_keys=True)
            os.utime(part, ns=(used.st_atime_ns, used.st_mtime_ns))
            os.replace(part, path)
        except OSError as error:
            logger.debug("cannot record fingerprints: %s", type(error).__name__)
            with contextlib.suppress(OSError):
                part.unlink()

    def new_staging(self, key: CacheKey) -> Path:
        """A fresh private staging directory for ``key`` (its skill directory is created)."""
        staging = self.root / f".partial-{key.ident}-{uuid.uuid4().hex[:12]}"
        for folder in (staging, self.staging_snapshot(staging, key)):
            folder.mkdir(mode=0o700)
            os.chmod(folder, 0o700)
        return staging

    @staticmethod
    def staging_snapshot(staging: Path, key: CacheKey) -> Path:
        """Where the files of a staging directory go."""
        return staging / key.name

    def publish(self, staging: Path, key: CacheKey, manifest: VikingSkillManifest) -> bool:
        """Write the metadata and rename ``staging`` into place; ``False`` (staging removed)
        when an entry appeared meanwhile."""
        meta = {
            "format_version": FORMAT_VERSION,
            "root_uri": manifest.root_uri,
            "revision": manifest.revision,
            "manifest_signature": manifest.signature,
            "total_bytes": manifest.total_bytes,
            "file_count": len(manifest.files),
            "created_at": datetime.fromtimestamp(self._clock(), UTC).isoformat(),
        }
        meta_path = staging / _META
        fd = os.open(meta_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(meta, handle, sort_keys=True)
        now = self._clock()
        os.utime(meta_path, (now, now))
        target = self.entry_dir(key)
        make_private_dir(target.parent)
        try:
            os.rename(staging, target)
        except OSError:
            if target.exists():
                remove_tree(staging)
                return False
            raise
        return True

    def touch(self, key: CacheKey) -> None:
        """Record a use of the entry now (ignored when it vanished)."""
        now = self._clock()
        with contextlib.suppress(OSError):
            os.utime(self.entry_dir(key) / _META, (now, now))

    def discard(self, key: CacheKey) -> None:
        """Move the entry aside and delete it (callers make sure nobody still needs it)."""
        target = self.entry_dir(key)
        trash = self.root / f".trash-{uuid.uuid4().hex[:12]}"
        try:
            os.rename(target, trash)
        except FileNotFoundError:
            return
        remove_tree(trash)

    def expire_if_idle(self, key: CacheKey) -> bool:
        """Delete ``key``'s entry when it is idle past the TTL and nobody holds it."""
        meta_path = self.entry_dir(key) / _META
        try:
            idle = self._clock() - meta_path.stat().st_mtime
        except OSError:
            return False
        if idle < self._ttl:
            return False
        return self._evict(key)

    def evict_key(self, text: str) -> int:
        """Evict the entry named by a ``scope/root/revision`` key text unless leased (0 or 1)."""
        scope, root, revision = text.split("/")
        return 1 if self._evict(CacheKey(scope, root, revision)) else 0

    def _evict(self, key: CacheKey) -> bool:
        lease = HostLock.try_acquire(self._lock_path(key, "lease"), shared=False)
        if lease is None:
            return False
        try:
            build = HostLock.try_acquire(self._lock_path(key, "build"), shared=False)
            if build is None:
                return False
            try:
                self.discard(key)
                build.unlink()
            finally:
                build.release()
            lease.unlink()
        finally:
            lease.release()
        return True

    def _scan(self) -> Iterator[_Scanned]:
        entries = self.root / "entries"
        for scope in _subdirs(entries):
            for root in _subdirs(scope):
                for revision in _subdirs(root):
                    key = CacheKey(scope.name, root.name, revision.name)
                    meta = self.read_meta(key)
                    try:
                        mtime = (revision / _META).stat().st_mtime
                    except OSError:
                        mtime = 0.0
                    size = meta.get("total_bytes", 0) if meta else 0
                    yield _Scanned(key, revision, meta, mtime, size if isinstance(size, int) else 0)

    def entries(self) -> list[VikingCacheEntry]:
        """Every entry with readable metadata, least recently used first."""
        found = [item for item in self._scan() if item.meta is not None]
        found.sort(key=lambda item: item.mtime)
        return [
            VikingCacheEntry(
                key=item.key.text,
                root_uri=str(item.meta.get("root_uri", "")) if item.meta else "",
                revision=str(item.meta.get("revision", "")) if item.meta else "",
                path=item.path / str(item.meta.get("root_uri", "")).rpartition("/")[2]
                if item.meta
                else item.path,
                size=item.size,
                last_used=datetime.fromtimestamp(item.mtime, UTC),
                leased=self.is_leased(item.key),
            )
            for item in found
        ]

    def sweep_staging(self) -> int:
        """Remove staging and trash directories nobody is writing; returns how many."""
        removed = 0
        for path in _subdirs(self.root):
            name = path.name
            if name.startswith(".trash-"):
                remove_tree(path)
                removed += 1
            elif name.startswith(".partial-"):
                ident = name.removeprefix(".partial-").rpartition("-")[0]
                lock_path = self.root / "locks" / f"{ident}.build"
                build = HostLock.try_acquire(lock_path, shared=False)
                if build is None:
                    continue
                try:
                    remove_tree(path)
                    removed += 1
                finally:
                    build.release()
        return removed

    def prune(self, *, max_entries: int, max_bytes: int, everything: bool = False) -> int:
        """Evict unleased entries: unreadable or idle past the TTL (all with ``everything``),
        then least recently used ones until at most ``max_entries`` and ``max_bytes`` remain.
        Returns the number of entries removed."""
        self.sweep_staging()
        now = self._clock()
        evicted = 0
        live: list[_Scanned] = []
        for item in self._scan():
            doomed = everything or item.meta is None or now - item.mtime >= self._ttl
            if doomed and self._evict(item.key):
                evicted += 1
                continue
            live.append(item)
        live.sort(key=lambda item: item.mtime)
        count = len(live)
        total = sum(item.size for item in live)
        for item in live:
            if count <= max_entries and total <= max_bytes:
                break
            if self._evict(item.key):
                evicted += 1
                count -= 1
                total -= item.size
        self._remove_empty_parents()
        return evicted

    def _remove_empty_parents(self) -> None:
        entries = self.root / "entries"
        for scope in _subdirs(entries):
            for root in _subdirs(scope):
                _rmdir_quiet(root)
            _rmdir_quiet(scope)


def _subdirs(path: Path) -> list[Path]:
    try:
        return [item for item in path.iterdir() if item.is_dir() and not item.is_symlink()]
    except OSError:
        return []


def _rmdir_quiet(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


def remove_tree(path: Path) -> None:
    """Delete a directory tree, logging (not raising) what could not be removed."""

    def on_error(function: Any, target: str, info: Any) -> None:
        error = info[1]
        if not isinstance(error, FileNotFoundError):
            logger.warning("could not remove %s: %s", target, type(error).__name__)

    shutil.rmtree(path, onerror=on_error)
