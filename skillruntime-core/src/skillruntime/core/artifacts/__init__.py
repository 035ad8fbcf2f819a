"""Skill artifact stores: install skill packages once, materialize exact versions per node.

:class:`ZipSkillArtifactStore` keeps immutable versions under a local directory;
:class:`ObjectSkillArtifactStore` keeps ZIP packages in any fsspec file system (extra
``skillruntime-core[objectstore]``) with a digest-keyed node cache. :func:`open_artifact_store`
builds either from a URL through the plugin hook, and :class:`ArtifactSkillSource` hands an
artifact to ``SkillTools`` so it is materialized on the skill's first use.
"""

from typing import TYPE_CHECKING

from skillruntime.core._lazy import lazy_attributes

if TYPE_CHECKING:
    from .objectstore import ObjectSkillArtifactStore, default_cache_dir
    from .source import ArtifactSkillSource
    from .spi import (
        ArtifactExistsError,
        ArtifactIntegrityError,
        ArtifactInUseError,
        ArtifactNotFoundError,
        ArtifactStoreError,
        PackageRejectedError,
        SkillArtifact,
        SkillArtifactStore,
        SkillPackage,
        normalize_digest,
    )
    from .urls import open_artifact_store, url_scheme
    from .zipcheck import DEFAULT_LIMITS, PackageLimits
    from .zipstore import ZipSkillArtifactStore

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "ObjectSkillArtifactStore": ".objectstore",
        "default_cache_dir": ".objectstore",
        "ArtifactSkillSource": ".source",
        "ArtifactExistsError": ".spi",
        "ArtifactIntegrityError": ".spi",
        "ArtifactInUseError": ".spi",
        "ArtifactNotFoundError": ".spi",
        "ArtifactStoreError": ".spi",
        "PackageRejectedError": ".spi",
        "SkillArtifact": ".spi",
        "SkillArtifactStore": ".spi",
        "SkillPackage": ".spi",
        "normalize_digest": ".spi",
        "open_artifact_store": ".urls",
        "url_scheme": ".urls",
        "DEFAULT_LIMITS": ".zipcheck",
        "PackageLimits": ".zipcheck",
        "ZipSkillArtifactStore": ".zipstore",
    },
)

__all__ = [
    "DEFAULT_LIMITS",
    "ArtifactExistsError",
    "ArtifactInUseError",
    "ArtifactIntegrityError",
    "ArtifactNotFoundError",
    "ArtifactSkillSource",
    "ArtifactStoreError",
    "ObjectSkillArtifactStore",
    "PackageLimits",
    "PackageRejectedError",
    "SkillArtifact",
    "SkillArtifactStore",
    "SkillPackage",
    "ZipSkillArtifactStore",
    "default_cache_dir",
    "normalize_digest",
    "open_artifact_store",
    "url_scheme",
]
