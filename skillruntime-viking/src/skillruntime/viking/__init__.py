"""Viking artifact store: OpenViking skill revisions as verified, cached local directories.

:class:`VikingSkillStore` resolves ``viking://…/skills/<name>`` through the integrity API,
downloads and verifies every file, and keeps revisions in a private host cache shared by
threads and processes. :class:`VikingArtifactStore` offers it through the core
``SkillArtifactStore`` SPI (read-only) and :class:`VikingSkillSource` to the skill tools.
:class:`VikingSessionSink` stores an agent turn's record in an OpenViking session (committed by
a :class:`CommitPolicy`) over :class:`VikingSessionClient`.
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
        VikingSessionError,
        VikingStoreError,
    )
    from .models import VikingCacheEntry, VikingSkillFile, VikingSkillManifest, VikingSkillSummary
    from .options import VikingStoreOptions
    from .session_sink import CommitPolicy, VikingSessionSink, commit_session, session_messages
    from .sessions import (
        SESSION_ACCESS_DENIED,
        SESSION_NOT_FOUND,
        SESSION_REFUSED,
        SESSION_UNAVAILABLE,
        VikingSessionClient,
    )
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
        "CommitPolicy": ".session_sink",
        "VikingSessionSink": ".session_sink",
        "commit_session": ".session_sink",
        "session_messages": ".session_sink",
        "SESSION_ACCESS_DENIED": ".sessions",
        "SESSION_NOT_FOUND": ".sessions",
        "SESSION_REFUSED": ".sessions",
        "SESSION_UNAVAILABLE": ".sessions",
        "VikingSessionClient": ".sessions",
        "VikingSessionError": ".errors",
        "VikingSkillSource": ".source",
        "viking_skill_sources": ".source",
        "Progress": ".store",
        "VikingSkillStore": ".store",
        "SkillUri": ".uris",
        "parse_skill_uri": ".uris",
    },
)

__all__ = [
    "SESSION_ACCESS_DENIED",
    "SESSION_NOT_FOUND",
    "SESSION_REFUSED",
    "SESSION_UNAVAILABLE",
    "SKILL_ACCESS_DENIED",
    "SKILL_CACHE_CORRUPT",
    "SKILL_INTEGRITY_UNAVAILABLE",
    "SKILL_INVALID",
    "SKILL_NOT_FOUND",
    "SKILL_PACKAGE_TOO_LARGE",
    "SKILL_REVISION_CHANGED",
    "SKILL_UNAVAILABLE",
    "CommitPolicy",
    "Progress",
    "SkillUri",
    "VikingArtifactStore",
    "VikingCacheEntry",
    "VikingSessionClient",
    "VikingSessionError",
    "VikingSessionSink",
    "VikingSkillFile",
    "VikingSkillManifest",
    "VikingSkillSource",
    "VikingSkillStore",
    "VikingSkillSummary",
    "VikingStoreError",
    "VikingStoreOptions",
    "__version__",
    "artifact_from_manifest",
    "commit_session",
    "parse_skill_uri",
    "session_messages",
    "viking_skill_sources",
]
