"""The Viking store's value objects: manifests, files, listings and cache entries."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["VikingCacheEntry", "VikingSkillFile", "VikingSkillManifest", "VikingSkillSummary"]


class VikingSkillFile(BaseModel):
    """One package file: relative ``path``, ``size`` in bytes and lowercase hex ``sha256``."""

    model_config = ConfigDict(frozen=True)

    path: str
    size: int
    sha256: str


class VikingSkillManifest(BaseModel):
    """A verified integrity manifest of one skill revision.

    ``uri`` is the URI asked for, ``root_uri`` the canonical skill root the server answered with.
    ``files`` are the package files in path order, ``SKILL.md`` included and server-generated
    summaries (``.abstract.md``, ``.overview.md``) excluded. ``content_sha256`` is the SHA-256 of
    ``SKILL.md``. ``signature`` fingerprints the whole server manifest (root, revision,
    content hash and every entry with its URI, size and hash), summaries included: two reads
    with the same signature describe the same bytes.
    """

    model_config = ConfigDict(frozen=True)

    uri: str
    root_uri: str
    name: str
    description: str
    revision: str
    content_sha256: str
    files: tuple[VikingSkillFile, ...]
    signature: str
    content: str = Field(default="", repr=False)
    """The verified ``SKILL.md`` text (its SHA-256 is ``content_sha256``)."""

    @property
    def total_bytes(self) -> int:
        """Bytes of all package files."""
        return sum(item.size for item in self.files)


class VikingSkillSummary(BaseModel):
    """A skill found by :meth:`VikingSkillStore.list_skills` (nothing verified or downloaded)."""

    model_config = ConfigDict(frozen=True)

    uri: str
    name: str
    description: str
    score: float | None = None
    """The search relevance, for skills found by :meth:`VikingSkillStore.find_skills`."""


class VikingCacheEntry(BaseModel):
    """One cached snapshot: ``path`` is the directory with ``SKILL.md``, ``size`` its bytes.

    ``key`` is ``<scope digest>/<root digest>/<revision digest>``; ``leased`` tells whether any
    process holds it at the moment of the listing.
    """

    model_config = ConfigDict(frozen=True)

    key: str
    root_uri: str
    revision: str
    path: Path
    size: int
    last_used: datetime
    leased: bool
