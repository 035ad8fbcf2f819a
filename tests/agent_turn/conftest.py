"""Fixtures of the agent-turn tests: a local runtime and small skills written on the host.

``make_skill(name, files, frontmatter=...)`` writes a skill directory and returns its path;
:class:`CountingSource` wraps a skill directory and counts ``load``/``end_turn`` calls (it
reloads the directory on every load, so a changed file reaches the next turn).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_turn.helpers import MakeSkill
from skillruntime.local import LocalSkillRuntime


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalSkillRuntime]:
    with LocalSkillRuntime(
        work_root=tmp_path / "work", kill_grace_seconds=0.2, drain_seconds=0.2
    ) as opened:
        yield opened


@pytest.fixture
def make_skill(tmp_path: Path) -> MakeSkill:
    def factory(
        name: str,
        files: dict[str, str] | None = None,
        *,
        frontmatter: str = "",
        body: str | None = None,
        root: str = "skills",
    ) -> Path:
        directory = tmp_path / root / name
        directory.mkdir(parents=True, exist_ok=True)
        text = body if body is not None else f"# {name}\n\nInstructions of {name}.\n"
        (directory / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: The {name} skill.\n{frontmatter}---\n\n{text}"
        )
        for relative, content in (files or {}).items():
            path = directory / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        return directory

    return factory
