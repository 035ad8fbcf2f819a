"""Viking artifact store: OpenViking skill revisions as verified, cached local directories.

:class:`VikingSkillStore` resolves ``viking://…/skills/<name>`` through the integrity API,
downloads and verifies every file, and keeps revisions in a private host cache shared by
threads and processes. :class:`VikingArtifactStore` offers it through the core
``SkillArtifactStore`` SPI (read-only) and :class:`VikingSkillSource` to the skill tools.
See ``docs/viking.md``.
"""

from ._version import __version__
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
