"""``VikingStoreError`` and the stable codes the Viking store refuses a skill with."""

from __future__ import annotations

from skillruntime.core.errors import ArtifactIntegrityError

__all__ = [
    "SKILL_ACCESS_DENIED",
    "SKILL_CACHE_CORRUPT",
    "SKILL_INTEGRITY_UNAVAILABLE",
    "SKILL_INVALID",
    "SKILL_NOT_FOUND",
    "SKILL_PACKAGE_TOO_LARGE",
    "SKILL_REVISION_CHANGED",
    "SKILL_UNAVAILABLE",
    "VikingStoreError",
]

SKILL_INVALID = "SKILL_INVALID"
"""Bad URI, a manifest that contradicts itself or the URI asked for, an unsafe or duplicate path."""
SKILL_INTEGRITY_UNAVAILABLE = "SKILL_INTEGRITY_UNAVAILABLE"
"""The server gave no content, ``content_sha256``, ``revision`` or per-file size/sha256."""
SKILL_PACKAGE_TOO_LARGE = "SKILL_PACKAGE_TOO_LARGE"
"""A file-count, per-file or total byte limit was exceeded (declared or while streaming)."""
SKILL_REVISION_CHANGED = "SKILL_REVISION_CHANGED"
"""Downloaded bytes do not match the manifest, or the manifest changed during the download."""
SKILL_CACHE_CORRUPT = "SKILL_CACHE_CORRUPT"
"""A cached snapshot was still corrupt after one rebuild."""
SKILL_NOT_FOUND = "SKILL_NOT_FOUND"
"""The server has no such skill (or file) for this identity."""
SKILL_ACCESS_DENIED = "SKILL_ACCESS_DENIED"
"""The server refused the credentials (401/403)."""
SKILL_UNAVAILABLE = "SKILL_UNAVAILABLE"
"""The server could not be reached, failed (5xx), stayed busy or broke off a transfer."""


class VikingStoreError(ArtifactIntegrityError):
    """An OpenViking skill could not be used; ``code`` is one of the ``SKILL_*`` constants.

    Messages name the skill URI and what failed; they never contain credentials or file content.
    ``uri`` is the skill URI asked for when known.
    """

    def __init__(self, message: str, *, code: str, uri: str | None = None) -> None:
        super().__init__(message, code=code)
        self.uri = uri
