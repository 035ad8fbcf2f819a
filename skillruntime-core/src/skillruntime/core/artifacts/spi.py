"""The skill artifact store SPI: artifacts, packages, stores and their errors.

A *skill artifact* is one exact version of a skill package (a ZIP whose root holds ``SKILL.md``).
A :class:`SkillArtifactStore` installs packages once, shares them between nodes and turns an
artifact into a verified local directory that contains ``SKILL.md``, held by a lease while the
caller prepares it into a runtime. There is no catalogue, "latest" or version resolution here: the
application records the artifacts that :meth:`SkillArtifactStore.install` returns and picks the
exact one to use (see ``docs/artifacts.md``).
"""

from __future__ import annotations

import io
import logging
import re
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import (
    ArtifactExistsError,
    ArtifactIntegrityError,
    ArtifactInUseError,
    ArtifactNotFoundError,
    ArtifactStoreError,
    PackageRejectedError,
)
from ..runtime.closing import Closeable

__all__ = [
    "ArtifactExistsError",
    "ArtifactInUseError",
    "ArtifactIntegrityError",
    "ArtifactNotFoundError",
    "ArtifactStoreError",
    "PackageRejectedError",
    "SkillArtifact",
    "SkillArtifactStore",
    "SkillPackage",
    "materialize_audit_fields",
    "normalize_digest",
]

logger = logging.getLogger(__name__)

_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
_DIGEST = re.compile(r"(?:sha256[:-])?([0-9a-fA-F]{64})")


def normalize_digest(value: str) -> str:
    """Return ``sha256:<lowercase hex>`` for ``sha256:<hex>``, ``sha256-<hex>`` or bare hex.

    Raises :class:`ValueError` for anything else.
    """
    match = _DIGEST.fullmatch(value.strip())
    if match is None:
        raise ValueError("digest must be 'sha256:' followed by 64 hexadecimal characters")
    return "sha256:" + match.group(1).lower()


def materialize_audit_fields(store: str) -> Callable[..., dict[str, Any]]:
    """The audit fields of ``materialize(artifact)`` on a ``store`` store (for
    :func:`skillruntime.core.observability.audit.audited_call`): name, version as revision, declared
    digest."""

    def fields(_self: object, artifact: SkillArtifact, *_rest: Any) -> dict[str, Any]:
        return {
            "runtime": store,
            "skill_name": artifact.name,
            "skill_revision": artifact.version,
            "skill_digest": artifact.digest,
        }

    return fields


class SkillArtifact(BaseModel):
    """One exact version of a skill package.

    ``name`` must equal the ``name`` in the package's ``SKILL.md``; ``name`` and ``version`` are
    single path segments (``[A-Za-z0-9][A-Za-z0-9._+-]*``, at most 128 characters). ``digest`` is
    the SHA-256 of the ZIP package as ``sha256:<hex>``, ``storage_key`` where the store keeps it
    and ``size`` the package size in bytes. Before installation ``digest`` and ``size`` may be
    declared (the store then refuses a package that does not match) or left ``None``; the artifact
    returned by :meth:`SkillArtifactStore.install` has every field set and is what the application
    records.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str
    digest: str | None = None
    storage_key: str | None = None
    size: int | None = Field(default=None, ge=0)

    @field_validator("name", "version")
    @classmethod
    def _safe_segment(cls, value: str) -> str:
        if not _SEGMENT.fullmatch(value):
            raise ValueError(
                "must be 1-128 characters of [A-Za-z0-9._+-] starting with a letter or digit"
            )
        return value

    @field_validator("digest")
    @classmethod
    def _normalized_digest(cls, value: str | None) -> str | None:
        return None if value is None else normalize_digest(value)

    @property
    def digest_hex(self) -> str | None:
        """The lowercase hex SHA-256 of the package, or ``None`` when not known."""
        return None if self.digest is None else self.digest.removeprefix("sha256:")

    @property
    def label(self) -> str:
        """``name@version``, for messages and listings."""
        return f"{self.name}@{self.version}"


class SkillPackage:
    """A ZIP skill package read from a file or a stream.

    :meth:`open` returns a binary stream at the start of the content; the caller closes it. A
    package built from a path or bytes can be opened any number of times; one built from a stream
    can be opened once (stores read a package once, while spooling and hashing it).
    """

    def __init__(
        self,
        *,
        path: Path | None = None,
        stream: BinaryIO | None = None,
        data: bytes | None = None,
        file_name: str = "package.zip",
    ) -> None:
        if [path, stream, data].count(None) != 2:
            raise ValueError("give exactly one of path, stream or data")
        self._path = path
        self._stream = stream
        self._data = data
        self._lock = threading.Lock()
        self.file_name = path.name if path is not None else file_name

    @classmethod
    def from_path(cls, path: str | Path) -> SkillPackage:
        """A package read from an existing regular file (``ValueError`` otherwise)."""
        resolved = Path(path).absolute()
        if not resolved.is_file():
            raise ValueError(f"skill package is not an existing regular file: {resolved}")
        return cls(path=resolved)

    @classmethod
    def from_stream(cls, stream: BinaryIO, file_name: str = "package.zip") -> SkillPackage:
        """A package read once from ``stream`` (the store reads it but does not close it)."""
        return cls(stream=stream, file_name=file_name)

    @classmethod
    def from_bytes(cls, data: bytes, file_name: str = "package.zip") -> SkillPackage:
        """A package held in memory."""
        return cls(data=data, file_name=file_name)

    @property
    def size(self) -> int | None:
        """The package size in bytes when known without reading it, else ``None``."""
        if self._path is not None:
            return self._path.stat().st_size
        if self._data is not None:
            return len(self._data)
        return None

    @contextmanager
    def open(self) -> Iterator[BinaryIO]:
        """A binary stream at the start of the package; a stream package can be opened once."""
        if self._path is not None:
            with self._path.open("rb") as handle:
                yield handle
            return
        if self._data is not None:
            yield io.BytesIO(self._data)
            return
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is None:
            raise ArtifactStoreError("a stream skill package can be read only once")
        yield stream


class SkillArtifactStore(Closeable, ABC):
    """Installs skill packages and materializes exact versions as local directories.

    Implementations provide :meth:`install`, :meth:`materialize`, :meth:`delete` and
    :meth:`list_artifacts`; :meth:`lease` is the way callers use :meth:`materialize`. A store is
    safe to use from several threads and is a context manager (:meth:`close` releases what it
    owns and is idempotent).
    """

    def __init__(self) -> None:
        self._leases: Counter[str] = Counter()
        self._lease_lock = threading.Lock()

    @abstractmethod
    def install(self, artifact: SkillArtifact, package: SkillPackage) -> SkillArtifact:
        """Validate and persist ``package`` as ``artifact``; return the completed artifact.

        The returned artifact has ``digest``, ``size`` and ``storage_key`` set. A declared digest
        or size that does not match raises :class:`ArtifactIntegrityError` and an invalid package
        :class:`PackageRejectedError`, both before anything is published; an installed version
        raises :class:`ArtifactExistsError`. No reader ever sees a half-installed artifact and a
        failure leaves nothing behind.
        """

    @abstractmethod
    def materialize(self, artifact: SkillArtifact) -> Path:
        """A local directory on this node that directly contains the artifact's ``SKILL.md``.

        Prefer :meth:`lease`, which keeps the directory from being deleted by this process while
        it is in use. Raises :class:`ArtifactNotFoundError` when the artifact is not installed and
        :class:`ArtifactIntegrityError` when its content does not match its digest.
        """

    @abstractmethod
    def delete(self, artifact: SkillArtifact) -> None:
        """Remove the artifact (and this node's copy of it); deleting a missing one succeeds.

        Raises :class:`ArtifactInUseError` while this process holds a lease on it. Catalogue
        references are the application's job.
        """

    @abstractmethod
    def list_artifacts(self) -> list[SkillArtifact]:
        """Every installed artifact, sorted by name, version and storage key."""

    def lease_key(self, artifact: SkillArtifact) -> str:
        """The key that leases and deletions of ``artifact`` share (the digest when known)."""
        return artifact.digest or artifact.label

    @contextmanager
    def lease(self, artifact: SkillArtifact) -> Iterator[Path]:
        """Materialize ``artifact`` and hold it for a ``with`` block: ``with store.lease(a) as d``.

        While the lease is held, :meth:`delete` of the same artifact in this process raises
        :class:`ArtifactInUseError`. Other processes are not prevented from deleting it: retire
        versions through the catalogue and delete them after a retention period.
        """
        key = self.lease_key(artifact)
        with self._lease_lock:
            self._leases[key] += 1
        try:
            yield self.materialize(artifact)
        finally:
            with self._lease_lock:
                self._leases[key] -= 1
                if self._leases[key] <= 0:
                    del self._leases[key]

    @staticmethod
    def _check_storage_key(artifact: SkillArtifact, expected: str) -> None:
        """Refuse an artifact whose ``storage_key`` is set and is not ``expected``."""
        if artifact.storage_key is not None and artifact.storage_key != expected:
            raise ArtifactStoreError(
                f"storage key {artifact.storage_key[:200]!r} of {artifact.label} is not "
                f"{expected!r}, the key this store uses"
            )

    def _check_not_leased(self, artifact: SkillArtifact) -> None:
        with self._lease_lock:
            if self._leases.get(self.lease_key(artifact)):
                raise ArtifactInUseError(
                    f"skill artifact {artifact.label} is leased in this process; "
                    "delete it after the lease ends"
                )

    def close(self) -> None:
        """Release what the store owns (idempotent); the default owns nothing."""
