"""Skill artifact stores: install skill packages once, materialize exact versions per node.

:class:`ZipSkillArtifactStore` keeps immutable versions under a local directory;
:class:`ObjectSkillArtifactStore` keeps ZIP packages in any fsspec file system (extra
``skillruntime-core[objectstore]``) with a digest-keyed node cache. :func:`open_artifact_store`
builds either from a URL through the plugin hook, and :class:`ArtifactSkillSource` hands an
artifact to ``SkillTools`` so it is materialized on the skill's first use.
"""

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
