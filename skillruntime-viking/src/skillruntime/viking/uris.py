"""Skill URIs and package paths: parsing ``viking://…/skills/<name>`` and refusing unsafe paths."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from .errors import SKILL_INVALID, VikingStoreError

__all__ = ["AGENT_SKILLS_ROOT", "SkillUri", "parse_skill_uri", "safe_relative_path"]

AGENT_SKILLS_ROOT = "viking://agent/skills"
"""Skills shared by every user of an account."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_USER = re.compile(r"[^/\s%?#]{1,128}")
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class SkillUri:
    """A parsed skill URI.

    ``scope_root`` is the skills root asked for (``viking://user/<u>/skills``,
    ``viking://agent/skills`` or ``viking://~/skills``); ``root_uri`` is ``scope_root/name``.
    ``user`` is the user segment (``~`` for the caller's own root, ``None`` for agent scope).
    """

    scope_root: str
    name: str
    user: str | None

    @property
    def root_uri(self) -> str:
        """The skill's root URI in the form asked for."""
        return f"{self.scope_root}/{self.name}"

    @property
    def is_home(self) -> bool:
        """Whether the URI uses the ``viking://~`` alias for the caller's user root."""
        return self.user == "~"


def parse_skill_uri(uri: str) -> SkillUri:
    """Parse ``viking://user/<u>/skills/<name>``, ``viking://agent/skills/<name>`` or
    ``viking://~/skills/<name>`` (a trailing ``/`` or ``/SKILL.md`` is accepted).

    Raises :class:`VikingStoreError` (``SKILL_INVALID``) for anything else, including the removed
    uid-less form ``viking://user/skills/<name>``.
    """
    text = uri.strip()
    if not text.startswith("viking://"):
        raise VikingStoreError(f"not a viking:// skill URI: {uri!r}", code=SKILL_INVALID, uri=uri)
    rest = text.removeprefix("viking://").rstrip("/")
    rest = rest.removesuffix("/SKILL.md")
    parts = rest.split("/")
    if len(parts) == 3 and parts[0] == "agent" and parts[1] == "skills":
        scope, user, name = AGENT_SKILLS_ROOT, None, parts[2]
    elif len(parts) == 3 and parts[0] == "~" and parts[1] == "skills":
        scope, user, name = "viking://~/skills", "~", parts[2]
    elif (
        len(parts) == 4
        and parts[0] == "user"
        and parts[2] == "skills"
        and _USER.fullmatch(parts[1])
        and parts[1] not in {".", "..", "~", "skills"}
    ):
        scope, user, name = f"viking://user/{parts[1]}/skills", parts[1], parts[3]
    else:
        raise VikingStoreError(
            "expected viking://user/<user>/skills/<name>, viking://agent/skills/<name> or "
            f"viking://~/skills/<name>, got {uri!r}",
            code=SKILL_INVALID,
            uri=uri,
        )
    if not _NAME.fullmatch(name):
        raise VikingStoreError(
            f"skill names are 1-64 characters of [A-Za-z0-9_-]: {name!r}",
            code=SKILL_INVALID,
            uri=uri,
        )
    return SkillUri(scope_root=scope, name=name, user=user)


def _unsafe_reason(path: str) -> str | None:
    if not path:
        return "empty path"
    if any(ord(char) < 32 or ord(char) == 127 for char in path):
        return "control character"
    if "\\" in path:
        return "backslash"
    if path.startswith("/"):
        return "absolute path"
    if _DRIVE.match(path):
        return "drive letter"
    for segment in path.split("/"):
        if segment in {"", ".", ".."}:
            return f"segment {segment!r}"
    return None


def safe_relative_path(path: object) -> str:
    """Return ``path`` when it is a safe relative package path, else raise ``SKILL_INVALID``.

    Refused: non-strings, empty paths, absolute paths, drive letters, backslashes, control
    characters, empty, ``.`` or ``..`` segments, and the same in any percent-decoded form
    (``%2e%2e%2f…``, double encoding included).
    """
    if not isinstance(path, str):
        raise VikingStoreError("a manifest path is not a string", code=SKILL_INVALID)
    candidate = path
    for _ in range(4):
        reason = _unsafe_reason(candidate)
        if reason is not None:
            raise VikingStoreError(
                f"unsafe path in the skill manifest ({reason}): {path!r}", code=SKILL_INVALID
            )
        decoded = unquote(candidate)
        if decoded == candidate:
            return path
        candidate = decoded
    raise VikingStoreError(f"over-encoded path in the manifest: {path!r}", code=SKILL_INVALID)
