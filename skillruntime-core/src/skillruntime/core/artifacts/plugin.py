"""The core plugin registering the built-in artifact stores (entry point ``builtin_stores``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..plugins.registry import ArtifactStoreProvider, hookimpl

if TYPE_CHECKING:  # the stores load when one is opened, not with the plugins
    from .objectstore import ObjectSkillArtifactStore
    from .zipstore import ZipSkillArtifactStore

__all__ = ["OBJECT_STORE_SCHEMES", "skillruntime_artifact_stores"]

OBJECT_STORE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "memory")
"""Schemes served by the object store without the ``objectstore+`` prefix."""

_DISTRIBUTION = "skillruntime-core"


def _zip_store(url: str, **options: Any) -> ZipSkillArtifactStore:
    path = url.removeprefix("file://")
    if url.startswith("file://") and not path.startswith("/"):
        raise ValueError(f"a file URL must hold an absolute path: {url}")
    from .zipstore import ZipSkillArtifactStore

    return ZipSkillArtifactStore(Path(path), **options)


def _object_store(url: str, **options: Any) -> ObjectSkillArtifactStore:
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower().startswith("objectstore+"):
        url = f"{scheme.partition('+')[2]}://{rest}"
    known = {"cache_dir", "limits", "storage_options", "filesystem"}
    storage_options = dict(options.pop("storage_options", None) or {})
    storage_options.update({k: options.pop(k) for k in list(options) if k not in known})
    from .objectstore import ObjectSkillArtifactStore

    return ObjectSkillArtifactStore(url, storage_options=storage_options, **options)


@hookimpl
def skillruntime_artifact_stores() -> list[ArtifactStoreProvider]:
    """The ZIP/directory store for ``file`` and the object store for fsspec schemes."""
    providers = [
        ArtifactStoreProvider(
            scheme="file",
            description="ZIP packages extracted into immutable versions under a local directory",
            factory=_zip_store,
            distribution=_DISTRIBUTION,
        ),
        ArtifactStoreProvider(
            scheme="objectstore",
            description="objectstore+<fsspec URL>: ZIP packages in any fsspec file system",
            factory=_object_store,
            distribution=_DISTRIBUTION,
        ),
    ]
    providers.extend(
        ArtifactStoreProvider(
            scheme=scheme,
            description=f"ZIP packages in {scheme}:// object storage with a node cache (fsspec)",
            factory=_object_store,
            distribution=_DISTRIBUTION,
        )
        for scheme in OBJECT_STORE_SCHEMES
    )
    return providers
