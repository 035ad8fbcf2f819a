"""The object-storage snapshot store: any fsspec file system (S3, GCS, Azure, memory).

Same layout as the local store under the store URL (``s3://bucket/prefix``)::

    <base>/objects/<hh>/<digest>
    <base>/manifests/<key>/<name>.json

An object is spooled to a local temporary file while it is hashed (bounded memory), verified,
and only then uploaded, so a bad stream uploads nothing; a read downloads to a local temporary
file while hashing and returns it only once verified. Object stores write whole objects, so no
rename is needed. fsspec is imported lazily: install ``skillruntime-core[objectstore]`` (plus
``s3fs``, ``gcsfs`` or ``adlfs``), the extra the artifact stores use.

Every request has a timeout: on S3 the botocore connect and read timeouts are set from
``timeout`` (unless ``storage_options`` set ``config_kwargs`` themselves); other file systems
take their own options through ``storage_options``. ``has_objects`` lists the folders of the
digests asked about (the whole ``objects/`` tree when they span more than 16 folders).
"""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import SnapshotNotFoundError, SnapshotStoreError
from .manifest import is_digest
from .spi import (
    DEFAULT_GRACE_SECONDS,
    SnapshotStore,
    copy_verified,
    require_digest,
)

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "ObjectSnapshotStore"]

DEFAULT_TIMEOUT_SECONDS = 30.0
"""Connect and read timeout of each request to the object store."""

_WHOLE_LISTING_PREFIXES = 16
"""Above this many distinct two-hex folders, ``has_objects`` lists the whole ``objects/`` tree."""

_EXTRA_HINT = "install it with: pip install 'skillruntime-core[objectstore]'"


def _import_fsspec() -> Any:
    try:
        import fsspec  # type: ignore[import-untyped]
    except ImportError:
        raise SnapshotStoreError(
            f"the object-storage snapshot store needs fsspec; {_EXTRA_HINT}"
        ) from None
    return fsspec


def _with_timeouts(url: str, options: dict[str, Any], timeout: float) -> dict[str, Any]:
    if url.split("://", 1)[0] in ("s3", "s3a") and "config_kwargs" not in options:
        options["config_kwargs"] = {
            "connect_timeout": timeout,
            "read_timeout": timeout,
            "retries": {"max_attempts": 3, "mode": "standard"},
        }
    return options


def _redact(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"


def _modified(info: Mapping[str, Any]) -> float:
    for field in ("LastModified", "last_modified", "mtime", "created"):
        value = info.get(field)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return datetime.fromisoformat(value).timestamp()
    return 0.0


class ObjectSnapshotStore(SnapshotStore):
    """Snapshots in an fsspec location (module docstring).

    Build it from ``url`` (``storage_options`` go to fsspec, as for the artifact object store),
    or pass a ``filesystem`` with ``url`` as the base path inside it. ``spool_dir`` holds the
    temporary files of uploads and downloads (default: the system's temporary folder).
    """

    def __init__(
        self,
        url: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
        filesystem: Any = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        spool_dir: str | Path | None = None,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
    ) -> None:
        if filesystem is None:
            fsspec = _import_fsspec()
            options = _with_timeouts(url, dict(storage_options or {}), timeout)
            try:
                filesystem, base = fsspec.core.url_to_fs(url, **options)
            except ImportError as error:
                raise SnapshotStoreError(
                    f"cannot open snapshot store {_redact(url)}: {error}"
                ) from None
        else:
            base = url
        self.filesystem: Any = filesystem
        self.base = str(base).rstrip("/")
        self.url = _redact(url)
        self.timeout = timeout
        self.spool_dir = str(spool_dir) if spool_dir is not None else None
        self.grace_seconds = grace_seconds

    def __repr__(self) -> str:
        return f"ObjectSnapshotStore({self.url!r})"

    def _path(self, *parts: str) -> str:
        return "/".join([self.base, *parts]) if self.base else "/".join(parts)

    def _object_path(self, digest: str) -> str:
        return self._path("objects", digest[:2], digest)

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except (SnapshotStoreError, FileNotFoundError):
            raise
        except (OSError, TimeoutError) as error:
            raise SnapshotStoreError(f"{what} in {self.url} failed: {error}") from None

    # -- objects ----------------------------------------------------------------------------------

    def _write_object(self, digest: str, stream: BinaryIO, size: int | None) -> None:
        with tempfile.NamedTemporaryFile(dir=self.spool_dir, prefix=".snapshot-") as spool:
            copy_verified(stream, spool, digest, what="object", size=size)  # type: ignore[arg-type]
            spool.flush()
            with self._errors(f"uploading object {digest}"):
                self.filesystem.put_file(spool.name, self._object_path(digest))

    def _freshen(self, digest: str) -> bool:
        path = self._object_path(digest)
        with self._errors(f"checking object {digest}"):
            self.filesystem.invalidate_cache(path)
            if not self.filesystem.exists(path):
                return False
            protocol = self.filesystem.protocol
            protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
            if "s3" in protocols:
                # a copy onto itself with new metadata: a new LastModified, no download
                self.filesystem.setxattr(
                    path, copy_kwargs={"MetadataDirective": "REPLACE"}, freshened="1"
                )
            else:
                try:
                    self.filesystem.touch(path, truncate=False)
                except NotImplementedError:
                    # no way to renew a time in place: a server-side copy renamed over it
                    fresh = f"{path}.fresh-{uuid.uuid4().hex}"
                    self.filesystem.copy(path, fresh)
                    self.filesystem.mv(fresh, path)
        return True

    def _present(self, digests: set[str]) -> set[str]:
        prefixes = {digest[:2] for digest in digests}
        if len(prefixes) > _WHOLE_LISTING_PREFIXES:
            listing = self._object_listing_of_digests()
        else:  # a few digests: list only their folders (one request each, not the whole store)
            listing = {}
            for prefix in sorted(prefixes):
                listing |= self._object_listing_of_digests(prefix)
        return {digest for digest in digests if digest in listing}

    def _object_listing(self, prefix: str | None = None) -> dict[str, float]:
        root = self._path("objects", prefix) if prefix else self._path("objects")
        with self._errors("listing objects"):
            self.filesystem.invalidate_cache(root)
            try:
                found: dict[str, Any] = self.filesystem.find(root, detail=True)
            except FileNotFoundError:
                return {}
        return {path.rpartition("/")[2]: _modified(info) for path, info in found.items()}

    def _object_listing_of_digests(self, prefix: str | None = None) -> dict[str, float]:
        listing = self._object_listing(prefix)
        return {name: modified for name, modified in listing.items() if is_digest(name)}

    def get_object(self, digest: str) -> BinaryIO:
        require_digest(digest)
        spool = tempfile.TemporaryFile(dir=self.spool_dir, prefix=".snapshot-")  # noqa: SIM115
        try:
            with self._errors(f"downloading object {digest}"):
                try:
                    source = self.filesystem.open(self._object_path(digest), "rb")
                except FileNotFoundError:
                    raise SnapshotNotFoundError(
                        f"no object {digest} in the snapshot store"
                    ) from None
                with source:
                    copy_verified(source, spool, digest, what=f"stored object {digest}")
            spool.seek(0)
        except BaseException:
            spool.close()
            raise
        return spool

    def _objects(self) -> Iterator[tuple[str, float]]:
        yield from self._object_listing_of_digests().items()

    def _delete_object_if_older(self, digest: str, cutoff: float) -> bool:
        path = self._object_path(digest)
        with self._errors(f"deleting object {digest}"):
            self.filesystem.invalidate_cache(path)
            try:
                info = self.filesystem.info(path)
            except FileNotFoundError:
                return False
            if _modified(info) > cutoff:
                return False
            with contextlib.suppress(FileNotFoundError):
                self.filesystem.rm_file(path)
        return True

    def _sweep_temporaries(self, cutoff: float) -> None:
        """Uploads are whole-object puts; only a freshening copy can be left behind by a crash."""
        for name, modified in self._object_listing().items():
            digest, dot, rest = name.partition(".fresh-")
            if dot and is_digest(digest) and modified < cutoff:
                with self._errors("removing a stale copy"), contextlib.suppress(FileNotFoundError):
                    self.filesystem.rm_file(f"{self._object_path(digest)}.fresh-{rest}")

    # -- manifests --------------------------------------------------------------------------------

    def _write_manifest(self, key: str, name: str, data: bytes) -> None:
        with self._errors(f"writing manifest {name}"):
            self.filesystem.pipe_file(self._path("manifests", key, name), data)

    def _read_manifest(self, key: str, name: str) -> bytes:
        path = self._path("manifests", key, name)
        with self._errors(f"reading manifest {name}"):
            try:
                data: bytes = self.filesystem.cat_file(path)
            except FileNotFoundError:
                raise SnapshotNotFoundError(f"no manifest {name}") from None
        return data

    def _delete_manifest(self, key: str, name: str) -> None:
        path = self._path("manifests", key, name)
        with self._errors(f"deleting manifest {name}"), contextlib.suppress(FileNotFoundError):
            self.filesystem.rm_file(path)
            self.filesystem.invalidate_cache(path)

    def _manifest_names(self, key: str) -> list[str]:
        folder = self._path("manifests", key)
        with self._errors("listing manifests"):
            self.filesystem.invalidate_cache(folder)
            try:
                return [path.rpartition("/")[2] for path in self.filesystem.find(folder)]
            except FileNotFoundError:
                return []

    def _all_manifests(self) -> Iterator[tuple[str, str]]:
        root = self._path("manifests")
        with self._errors("listing manifests"):
            self.filesystem.invalidate_cache(root)
            try:
                paths = list(self.filesystem.find(root))
            except FileNotFoundError:
                paths = []
        for path in paths:
            key, _, name = path.removeprefix(root + "/").rpartition("/")
            if key and "/" not in key:
                yield key, name
