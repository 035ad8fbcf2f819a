"""Viking artifact store: OpenViking skill revisions as verified, cached local directories.

:class:`VikingSkillStore` resolves ``viking://…/skills/<name>`` through the integrity API,
downloads and verifies every file, and keeps revisions in a private host cache shared by
threads and processes. :class:`VikingArtifactStore` offers it through the core
``SkillArtifactStore`` SPI (read-only) and :class:`VikingSkillSource` to the skill tools.
See ``docs/viking.md``.
"""

from typing import TYPE_CHECKING

from skillruntime.core._lazy import lazy_attributes

from ._version import __version__

if TYPE_CHECKING:
    from .artifacts import VikingArtifactStore, artifact_from_manifest
    from .errors import (
        SKILL_ACCESS_DENIED,
        SKILL_CACHE_CORRUPT,
        SKILL_INTEGRITY_UNAVAILABLE,
        SKILL_INVALID,
        SKILL_NOT_FOUND,
        SKILL_PACKAGE_TOO_LARGE,
        SKILL_REVISION_CHANGED,
        SKILL_UNAVAILABLE,
        VikingStoreError,
    )
    from .models import VikingCacheEntry, VikingSkillFile, VikingSkillManifest, VikingSkillSummary
    from .options import VikingStoreOptions
    from .source import VikingSkillSource, viking_skill_sources
    from .store import Progress, VikingSkillStore
    from .uris import SkillUri, parse_skill_uri

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "VikingArtifactStore": ".artifacts",
        "artifact_from_manifest": ".artifacts",
        "SKILL_ACCESS_DENIED": ".errors",
        "SKILL_CACHE_CORRUPT": ".errors",
        "SKILL_INTEGRITY_UNAVAILABLE": ".errors",
        "SKILL_INVALID": ".errors",
        "SKILL_NOT_FOUND": ".errors",
        "SKILL_PACKAGE_TOO_LARGE": ".errors",
        "SKILL_REVISION_CHANGED": ".errors",
        "SKILL_UNAVAILABLE": ".errors",
        "VikingStoreError": ".errors",
        "VikingCacheEntry": ".models",
        "VikingSkillFile": ".models",
        "VikingSkillManifest": ".models",
        "VikingSkillSummary": ".models",
        "VikingStoreOptions": ".options",
        "VikingSkillSource": ".source",
        "viking_skill_sources": ".source",
        "Progress": ".store",
        "VikingSkillStore": ".store",
        "SkillUri": ".uris",
        "parse_skill_uri": ".uris",
    },
)

__all__ = [
    "SKILL_ACCESS_DENIED",
    "SKILL_CACHE_CORRUPT",
    "SKILL_INTEGRITY_UNAVAILABLE",
    "SKILL_INVALID",
    "SKILL_NOT_FOUND",
    "SKILL_PACKAGE_TOO_LARGE",
    "SKILL_REVISION_CHANGED",
    "SKILL_UNAVAILABLE",
    "Progress",
    "SkillUri",
    "VikingArtifactStore",
    "VikingCacheEntry",
    "VikingSkillFile",
    "VikingSkillManifest",
    "VikingSkillSource",
    "VikingSkillStore",
    "VikingSkillSummary",
    "VikingStoreError",
    "VikingStoreOptions",
    "__version__",
    "artifact_from_manifest",
    "parse_skill_uri",
    "viking_skill_sources",
]
