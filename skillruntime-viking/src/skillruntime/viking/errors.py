"""Errors of the OpenViking distribution, and the stable codes the Viking store refuses a skill
with.

Under the core hierarchy (:mod:`skillruntime.core.errors`) and Python's own::

    ArtifactIntegrityError
    └── VikingStoreError
    SkillRuntimeError
    └── VikingSessionError
    TimeoutError
    └── LockTimeoutError
"""

from __future__ import annotations

from skillruntime.core.errors import ArtifactIntegrityError, SkillRuntimeError

__all__ = [
    "SKILL_ACCESS_DENIED",
    "SKILL_CACHE_CORRUPT",
    "SKILL_INTEGRITY_UNAVAILABLE",
    "SKILL_INVALID",
    "SKILL_NOT_FOUND",
    "SKILL_PACKAGE_TOO_LARGE",
    "SKILL_REVISION_CHANGED",
    "SKILL_UNAVAILABLE",
    "LockTimeoutError",
    "VikingSessionError",
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


class VikingSessionError(SkillRuntimeError):
    """A session call failed; ``code`` is one of the ``SESSION_*`` constants of
    :mod:`.sessions`.

    ``uncertain``: the request may have reached the server and been carried out (a timeout, a
    broken connection, a 5xx other than 503). Messages never hold credentials or message text.
    """

    def __init__(self, message: str, *, code: str, uncertain: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.uncertain = uncertain

    def __str__(self) -> str:
        return f"{self.code}: {super().__str__()}"


class LockTimeoutError(TimeoutError):
    """A host lock of the skill cache was not obtained before the deadline."""
