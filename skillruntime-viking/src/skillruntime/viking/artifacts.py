"""``VikingArtifactStore``: the Viking store behind the core ``SkillArtifactStore`` SPI.

OpenViking owns installation, so the adapter is read-only: :meth:`install` is refused, and
:meth:`delete` only drops this host's cached copies. An artifact pins one revision:
``name`` is the skill name, ``version`` the server revision and ``storage_key`` the skill's
root URI (:meth:`artifact_for` builds it from a URI). Materializing an artifact whose revision
is no longer current fails with ``SKILL_REVISION_CHANGED`` instead of silently using newer bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillruntime.core.artifacts.spi import (
    ArtifactNotFoundError,
    ArtifactStoreError,
    SkillArtifact,
    SkillArtifactStore,
    SkillPackage,
)

from .errors import SKILL_REVISION_CHANGED, VikingStoreError
from .models import VikingSkillManifest
from .options import VikingStoreOptions
from .store import VikingSkillStore

__all__ = ["VikingArtifactStore", "artifact_from_manifest"]


def artifact_from_manifest(manifest: VikingSkillManifest) -> SkillArtifact:
    """The artifact pinning ``manifest``'s revision."""
    return SkillArtifact(
        name=manifest.name,
        version=manifest.revision,
        storage_key=manifest.root_uri,
        size=manifest.total_bytes,
    )


class VikingArtifactStore(SkillArtifactStore):
    """A read-only :class:`SkillArtifactStore` over a :class:`VikingSkillStore`."""

    def __init__(
        self,
        store: VikingSkillStore | None = None,
        options: VikingStoreOptions | None = None,
        **option_values: Any,
    ) -> None:
        super().__init__()
        self._owned = store is None
        self.store = store if store is not None else VikingSkillStore(options, **option_values)

    def artifact_for(self, uri: str) -> SkillArtifact:
        """The artifact of the skill's current revision (verified manifest, no download)."""
        return artifact_from_manifest(self.store.resolve(uri))

    def install(self, artifact: SkillArtifact, package: SkillPackage) -> SkillArtifact:
        """Refused: skills are added to OpenViking through its own API or CLI."""
        raise ArtifactStoreError(
            "the viking store is read-only; add skills with OpenViking (POST /api/v1/skills)"
        )

    def _pinned(self, artifact: SkillArtifact) -> str:
        uri = artifact.storage_key
        if not uri or not uri.startswith("viking://"):
            raise ArtifactNotFoundError(
                f"{artifact.label} has no viking:// storage key; use artifact_for(uri)"
            )
        manifest = self.store.resolve(uri)
        if manifest.name != artifact.name or manifest.revision != artifact.version:
            raise VikingStoreError(
                f"{uri} is now at revision {manifest.revision}, not {artifact.version}",
                code=SKILL_REVISION_CHANGED,
                uri=uri,
            )
        return uri

    def materialize(self, artifact: SkillArtifact) -> Path:
        """The pinned revision as a verified directory (see
        :meth:`VikingSkillStore.materialize` for the eviction risk; prefer :meth:`lease`)."""
        return self.store.materialize(self._pinned(artifact))

    @contextmanager
    def lease(self, artifact: SkillArtifact) -> Iterator[Path]:
        """The pinned revision, held against eviction across processes for the block."""
        uri = self._pinned(artifact)
        key = self.lease_key(artifact)
        with self._lease_lock:
            self._leases[key] += 1
        try:
            with self.store.lease(uri) as path:
                yield path
        finally:
            with self._lease_lock:
                self._leases[key] -= 1
                if self._leases[key] <= 0:
                    del self._leases[key]

    def delete(self, artifact: SkillArtifact) -> None:
        """Drop this host's unleased cached copies of the artifact (the server is untouched)."""
        self._check_not_leased(artifact)
        if artifact.storage_key:
            self.store.forget(artifact.storage_key, artifact.version)

    def list_artifacts(self) -> list[SkillArtifact]:
        """The revisions cached on this host (OpenViking has no artifact catalogue)."""
        found = {
            (entry.root_uri.rpartition("/")[2], entry.revision, entry.root_uri): entry.size
            for entry in self.store.cache_entries()
        }
        return [
            SkillArtifact(name=name, version=version, storage_key=root, size=size)
            for (name, version, root), size in sorted(found.items())
        ]

    def close(self) -> None:
        """Close the wrapped store when this adapter created it."""
        if self._owned:
            self.store.close()
