"""Helpers of the agent-turn tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from skillruntime.core.models import Skill
from skillruntime.core.skills import load_skill

MakeSkill = Callable[..., Path]
"""``make_skill(name, files, frontmatter=..., body=..., root=...)`` -> the skill directory."""


class CountingSource:
    """A skill source over a host directory that counts loads and turn ends."""

    def __init__(self, directory: Path, *, location: str | None = None) -> None:
        self.directory = directory
        self.loads = 0
        self.turn_ends = 0
        self.refuse = False
        self._location = location or str(directory)

    @property
    def name(self) -> str:
        return self.directory.name

    @property
    def description(self) -> str:
        return f"Counting {self.directory.name}"

    @property
    def location(self) -> str:
        return self._location

    def load(self) -> Skill:
        self.loads += 1
        if self.refuse:
            raise PermissionError("access to this skill was revoked")
        skill = load_skill(self.directory, strict=True)
        assert skill is not None
        return skill

    def end_turn(self) -> None:
        self.turn_ends += 1
