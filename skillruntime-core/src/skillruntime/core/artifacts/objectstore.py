"""The object-storage artifact store: ZIP packages in any fsspec file system, cached per node.

Packages live at ``<base>/<name>/<version>/<sha256 hex>.zip`` where ``<base>`` is the store URL
(``s3://bucket/prefix``, ``gs://…``, ``az://…``, ``memory://…``, ``file:///…``); the storage key
recorded in an artifact is the part after ``<base>/``. Each node keeps a cache keyed by digest::

    <cache>/objects/<hex>/<name>/  the extracted package (SKILL.md directly inside)
    <cache>/objects/<hex>/.name    the skill name the entry was validated for
    <cache>/downloads/             packages being downloaded or installed
    <cache>/locks/<hex>.lock       one download per digest across threads and processes

A download is verified against the artifact's digest (and size when known) and extracted through
the same validation as the ZIP store before it is published into the cache with one rename; a
cache hit makes no request to the object store. fsspec is imported lazily: install the extra
``skillruntime-core[objectstore]`` (plus ``s3fs``, ``gcsfs`` or ``adlfs`` for a cloud store).
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from filelock import FileLock

from ..observability.audit import audited_call
from .spi import (
    ArtifactExistsError,
    ArtifactIntegrityError,
    ArtifactNotFoundError,
    ArtifactStoreError,
    PackageRejectedError,
    SkillArtifact,
    SkillArtifactStore,
    SkillPackage,
    materialize_audit_fields,
)
from .zipcheck import (
    DEFAULT_LIMITS,
    PackageLimits,
    SpooledPackage,
    check_declared,
    extract_package,
    spool_package,
)

__all__ = ["ObjectSkillArtifactStore", "default_cache_dir", "import_fsspec"]

logger = logging.getLogger(__name__)

_EXTRA_HINT = "install it with: pip install 'skillruntime-core[objectstore]'"


def import_fsspec() -> Any:
    """Import fsspec, or raise :class:`ArtifactStoreError` naming the extra to install."""
    try:
        import fsspec  # type: ignore[import-untyped]
    except ImportError:
        raise ArtifactStoreError(
            f"the object-storage artifact store needs fsspec; {_EXTRA_HINT}"
        ) from None
    return fsspec


def default_cache_dir() -> Path:
    """Node cache: ``$SKILLRUNTIME_ARTIFACT_CACHE`` or ``<XDG cache>/skillruntime/artifacts``."""
    configured = os.environ.get("SKILLRUNTIME_ARTIFACT_CACHE")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "skillruntime" / "artifacts"


class ObjectSkillArtifactStore(SkillArtifactStore):
    """A store over one fsspec location with a local, digest-keyed node cache.

    Build it from ``url`` (``storage_options`` go to fsspec, e.g. ``endpoint_url`` or ``anon``
    for S3) or pass an fsspec ``filesystem`` with ``url`` as the base path inside it. The node
    cache is ``cache_dir`` (default :func:`default_cache_dir`); it is content-addressed, so stores
    may share it. Versions are immutable: installing a name/version that has an object raises
    :class:`ArtifactExistsError` (a check-then-put: two nodes installing the same version at the
    same instant are not prevented, let the catalogue serialize installs).
    """

    def __init__(
        self,
        url: str,
        *,
        cache_dir: str | Path | None = None,
        storage_options: Mapping[str, Any] | None = None,
        filesystem: Any = None,
        limits: PackageLimits = DEFAULT_LIMITS,
    ) -> None:
        super().__init__()
        if filesystem is None:
            fsspec = import_fsspec()
            try:
                filesystem, base = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
            except ImportError as error:
                raise ArtifactStoreError(
                    f"cannot open artifact store {_redact(url)}: {error}"
                ) from None
        else:
            base = url
        self.filesystem: Any = filesystem
        self.base = str(base).rstrip("/")
        self.url = _redact(url)
        self.limits = limits
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        for sub in ("objects", "downloads", "locks"):
            (self.cache_dir / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        self._thread_locks: dict[str, threading.Lock] = {}
        self._thread_locks_guard = threading.Lock()
        protocol = filesystem.protocol
        protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
        self._local = bool({"file", "local"} & set(protocols))

    def __repr__(self) -> str:
        return f"ObjectSkillArtifactStore({self.url!r}, cache_dir={str(self.cache_dir)!r})"

    # -- keys -------------------------------------------------------------------------------------

    @staticmethod
    def storage_key_for(artifact: SkillArtifact, digest_hex: str) -> str:
        """``<name>/<version>/<hex>.zip``: the storage key of a package with this digest."""
        return f"{artifact.name}/{artifact.version}/{digest_hex}.zip"

    def _object_path(self, key: str) -> str:
        return f"{self.base}/{key}" if self.base else key

    def _require_digest(self, artifact: SkillArtifact) -> str:
        digest_hex = artifact.digest_hex
        if digest_hex is None:
            raise ArtifactStoreError(
                f"skill artifact {artifact.label} has no digest; use the artifact install returned"
            )
        self._check_storage_key(artifact, self.storage_key_for(artifact, digest_hex))
        return digest_hex

    # -- SPI --------------------------------------------------------------------------------------

    def install(self, artifact: SkillArtifact, package: SkillPackage) -> SkillArtifact:
        """Validate ``package``, upload it and warm this node's cache with it."""
        download = self._temp("install", ".zip")
        partial = self._temp("partial", "", parent=self.cache_dir / "objects")
        try:
            with package.open() as stream:
                spooled = spool_package(stream, download, self.limits.max_package_bytes)
            check_declared(artifact, spooled, what="skill package")
            storage_key = self.storage_key_for(artifact, spooled.sha256)
            self._check_storage_key(artifact, storage_key)
            completed = artifact.model_copy(
                update={
                    "digest": f"sha256:{spooled.sha256}",
                    "size": spooled.size,
                    "storage_key": storage_key,
                }
            )
            partial.mkdir(mode=0o700)
            extract_package(spooled.path, partial / artifact.name, artifact.name, self.limits)
            (partial / ".name").write_text(artifact.name, encoding="utf-8")
            self._refuse_existing(artifact)
            self._upload(spooled, self._object_path(storage_key))
            with self._digest_lock(spooled.sha256):
                self._publish_cache(partial, spooled.sha256)
        finally:
            download.unlink(missing_ok=True)
            shutil.rmtree(partial, ignore_errors=True)
        logger.info("installed skill artifact %s (%s)", completed.label, completed.digest)
        return completed

    def _refuse_existing(self, artifact: SkillArtifact) -> None:
        prefix = self._object_path(f"{artifact.name}/{artifact.version}")
        self.filesystem.invalidate_cache(prefix)
        try:
            existing = [p for p in self.filesystem.find(prefix) if p.endswith(".zip")]
        except FileNotFoundError:
            existing = []
        if existing:
            raise ArtifactExistsError(f"skill artifact {artifact.label} is already installed")

    def _upload(self, spooled: SpooledPackage, remote: str) -> None:
        fs = self.filesystem
        if not self._local:
            fs.put_file(str(spooled.path), remote)
            return
        # A local copy is not atomic: write beside the target, then rename.
        fs.makedirs(posixpath.dirname(remote), exist_ok=True)
        temporary = f"{remote}.partial-{uuid.uuid4().hex}"
        try:
            fs.put_file(str(spooled.path), temporary)
            fs.mv(temporary, remote)
        finally:
            if fs.exists(temporary):
                fs.rm_file(temporary)

    @audited_call("artifact.materialize", materialize_audit_fields("objectstore"))
    def materialize(self, artifact: SkillArtifact) -> Path:
        """The cached ``skill`` directory of ``artifact``, downloaded once per node if missing."""
        digest_hex = self._require_digest(artifact)
        hit = self._cache_hit(artifact, digest_hex)
        if hit is not None:
            return hit
        with self._digest_lock(digest_hex):
            hit = self._cache_hit(artifact, digest_hex)
            if hit is not None:
                return hit
            self._download(artifact, digest_hex)
            hit = self._cache_hit(artifact, digest_hex)
        if hit is None:  # pragma: no cover - _download publishes or raises
            raise ArtifactStoreError(f"skill artifact {artifact.label} could not be cached")
        return hit

    def _cache_hit(self, artifact: SkillArtifact, digest_hex: str) -> Path | None:
        entry = self.cache_dir / "objects" / digest_hex
        try:
            cached_name = (entry / ".name").read_text(encoding="utf-8")
        except OSError:
            return None
        skill_md = entry / cached_name / "SKILL.md"
        if not skill_md.is_file() or skill_md.is_symlink():
            return None
        if cached_name != artifact.name:
            raise PackageRejectedError(
                f"package {artifact.digest} holds skill {cached_name[:100]!r}, "
                f"not {artifact.name!r}",
                reason="NAME_MISMATCH",
            )
        return entry / cached_name

    def _download(self, artifact: SkillArtifact, digest_hex: str) -> None:
        remote = self._object_path(self.storage_key_for(artifact, digest_hex))
        download = self._temp("download", ".zip")
        partial = self._temp("partial", "", parent=self.cache_dir / "objects")
        try:
            try:
                with self.filesystem.open(remote, "rb") as stream:
                    spooled = spool_package(stream, download, self.limits.max_package_bytes)
            except FileNotFoundError:
                raise ArtifactNotFoundError(
                    f"skill artifact {artifact.label} has no object in {self.url}"
                ) from None
            if spooled.sha256 != digest_hex:
                raise ArtifactIntegrityError(
                    f"downloaded object of {artifact.label} does not match its digest "
                    f"{artifact.digest}; the object was changed after it was installed",
                    code="DIGEST_MISMATCH",
                )
            check_declared(artifact, spooled, what="downloaded object")
            partial.mkdir(mode=0o700)
            extract_package(spooled.path, partial / artifact.name, artifact.name, self.limits)
            (partial / ".name").write_text(artifact.name, encoding="utf-8")
            self._publish_cache(partial, digest_hex)
            logger.info("cached skill artifact %s (%s)", artifact.label, artifact.digest)
        finally:
            download.unlink(missing_ok=True)
            shutil.rmtree(partial, ignore_errors=True)

    def _publish_cache(self, partial: Path, digest_hex: str) -> None:
        """Rename ``partial`` to ``objects/<hex>`` unless it exists (the caller holds the lock)."""
        entry = self.cache_dir / "objects" / digest_hex
        if entry.exists():
            if (entry / ".name").is_file():
                return
            self._discard(entry)  # an incomplete entry left by a crash
        os.rename(partial, entry)

    def delete(self, artifact: SkillArtifact) -> None:
        """Remove the object (missing is fine) and this node's cache entry for its digest."""
        self._check_not_leased(artifact)
        digest_hex = self._require_digest(artifact)
        remote = self._object_path(self.storage_key_for(artifact, digest_hex))
        with suppress(FileNotFoundError):
            self.filesystem.rm_file(remote)
        self.filesystem.invalidate_cache(remote)
        with self._digest_lock(digest_hex):
            self._discard(self.cache_dir / "objects" / digest_hex)
        logger.info("deleted skill artifact %s", artifact.label)

    def list_artifacts(self) -> list[SkillArtifact]:
        """Artifacts found under the store URL (objects not named like packages are ignored)."""
        self.filesystem.invalidate_cache(self.base)
        try:
            found: dict[str, Any] = self.filesystem.find(self.base, detail=True)
        except FileNotFoundError:
            return []
        artifacts: list[SkillArtifact] = []
        prefix = f"{self.base}/" if self.base else ""
        for path, info in found.items():
            artifact = _parse_key(path.removeprefix(prefix), info.get("size"))
            if artifact is not None:
                artifacts.append(artifact)
        return sorted(artifacts, key=lambda a: (a.name, a.version, a.storage_key or ""))

    # -- helpers ----------------------------------------------------------------------------------

    def _temp(self, prefix: str, suffix: str, parent: Path | None = None) -> Path:
        directory = parent or self.cache_dir / "downloads"
        return directory / f".{prefix}-{uuid.uuid4().hex}{suffix}"

    def _discard(self, entry: Path) -> None:
        trash = self._temp("trash", "")
        try:
            os.rename(entry, trash)
        except FileNotFoundError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    @contextmanager
    def _digest_lock(self, digest_hex: str) -> Iterator[None]:
        with self._thread_locks_guard:
            lock = self._thread_locks.setdefault(digest_hex, threading.Lock())
        with lock, FileLock(str(self.cache_dir / "locks" / f"{digest_hex}.lock")):
            yield


def _parse_key(key: str, size: Any) -> SkillArtifact | None:
    parts = key.split("/")
    if len(parts) != 3 or not parts[2].endswith(".zip"):
        return None
    try:
        return SkillArtifact(
            name=parts[0],
            version=parts[1],
            digest=parts[2].removesuffix(".zip"),
            storage_key=key,
            size=int(size) if size is not None else None,
        )
    except ValueError:
        return None


def _redact(url: str) -> str:
    """The URL without any ``user:password@`` part, for messages."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"
