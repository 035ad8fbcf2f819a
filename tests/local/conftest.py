"""Fixtures of the local runtime suite: runtimes with short kill grace periods, sample skills."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skillruntime.core.models import Skill
from skillruntime.local import LocalSkillRuntime


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalSkillRuntime]:
    """A runtime with a work root, a short kill grace and a short drain period."""
    with LocalSkillRuntime(
        work_root=tmp_path / "work", kill_grace_seconds=0.3, drain_seconds=0.2
    ) as rt:
        yield rt


@pytest.fixture
def conversation_runtime(tmp_path: Path) -> Iterator[LocalSkillRuntime]:
    """A runtime scoped to conversation ``conv-a`` under ``tmp_path/conversations``."""
    with LocalSkillRuntime(
        conversation_id="conv-a",
        conversations_root=tmp_path / "conversations",
        kill_grace_seconds=0.3,
    ) as rt:
        yield rt


@pytest.fixture
def skill(tmp_path: Path) -> Skill:
    """A small skill on disk: SKILL.md, an executable script, a nested asset and a .env."""
    root = tmp_path / "source" / "demo-skill"
    (root / "scripts").mkdir(parents=True)
    (root / "assets" / "deep").mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: demo-skill\ndescription: d\n---\nbody\n")
    script = root / "scripts" / "run.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o755)
    (root / "assets" / "deep" / "data.bin").write_bytes(bytes(range(256)))
    (root / ".env").write_text("SECRET=1\n")
    return Skill(name="demo-skill", description="d", base_path=str(root))
