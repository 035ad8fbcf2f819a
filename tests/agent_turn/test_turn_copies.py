"""Rule 5: turn-level copies — remote skills by default, local ones on request; deleted at close."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_turn.helpers import MakeSkill
from doubles.viking import VikingDouble
from skillruntime.core.tools import SkillTools
from skillruntime.core.tools.copies import TURN_COPIES_DIRECTORY
from skillruntime.local import LocalSkillRuntime
from skillruntime.viking import VikingSkillStore
from skillruntime.viking.source import viking_skill_sources

ROOT = "viking://user/default/skills/mutator"
SKILL_MD = b"""---
name: mutator
description: Has a script that rewrites its sibling.
allowed-tools: Bash(sh *) Read Write
---

Run `sh scripts/greet.sh`; `sh scripts/mutate.sh` rewrites it.
"""
MUTATE = b"""echo 'echo mutated' > "$(dirname "$0")/greet.sh"\n"""


@pytest.fixture
def remote_tools(tmp_path: Path, runtime: LocalSkillRuntime) -> Iterator[SkillTools]:
    with VikingDouble() as viking:
        viking.add_skill(
            ROOT,
            {
                "SKILL.md": SKILL_MD,
                "scripts/greet.sh": b"echo original\n",
                "scripts/mutate.sh": MUTATE,
            },
        )
        with (
            VikingSkillStore(server_url=viking.url, cache_dir=tmp_path / "cache") as store,
            SkillTools(runtime, viking_skill_sources(store, [ROOT])) as tools,
        ):
            yield tools


def _exists(runtime: LocalSkillRuntime, path: str) -> bool:
    return runtime.get_file_system().exists(path)


def test_a_script_that_rewrites_its_skill_cannot_change_the_next_turn(
    remote_tools: SkillTools, runtime: LocalSkillRuntime
) -> None:
    with remote_tools.turn() as turn:
        turn.dispatch("skill", {"command": "mutator"})
        assert turn.base_directory("mutator") is None  # remote first: nothing local yet
        turn.dispatch("bash", {"command": "sh scripts/mutate.sh"})
        base = turn.base_directory("mutator")
        assert base is not None
        assert f"/{TURN_COPIES_DIRECTORY}/" in base
        prepared = remote_tools.prepared_skill("mutator")
        assert prepared is not None
        assert base != prepared.base_path
        assert "mutated" in turn.dispatch("bash", {"command": "sh scripts/greet.sh"})
        turn.dispatch("write", {"file_path": "answer.txt", "content": "kept\n"})
    assert not _exists(runtime, base)
    assert _exists(runtime, f"{runtime.default_working_directory}/answer.txt")
    with remote_tools.turn() as turn:
        turn.dispatch("skill", {"command": "mutator"})
        assert "original" in turn.dispatch("bash", {"command": "sh scripts/greet.sh"})
        assert turn.base_directory("mutator") is not None
        assert turn.base_directory("mutator") != base  # another turn, another copy


def test_local_skills_run_from_the_prepared_copy_unless_asked(
    runtime: LocalSkillRuntime, make_skill: MakeSkill
) -> None:
    tools = SkillTools(runtime, [make_skill("local", {"scripts/hi.sh": "echo hi\n"})])
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "local"})
        prepared = tools.prepared_skill("local")
        assert prepared is not None
        assert turn.base_directory("local") == prepared.base_path
    with tools.turn(turn_copies=True) as turn:
        turn.dispatch("skill", {"command": "local"})
        copy = turn.base_directory("local")
        assert copy is not None
        assert copy != prepared.base_path
        assert "hi" in turn.dispatch("bash", {"command": "sh scripts/hi.sh"})
        resolved = turn.usage[-1].resolved_args
        assert resolved is not None
        assert resolved["command"] == f"sh {copy}/scripts/hi.sh"
    assert not _exists(runtime, copy)


def test_nothing_runs_at_close_when_no_copy_was_made(
    runtime: LocalSkillRuntime, make_skill: MakeSkill, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = SkillTools(runtime, [make_skill("local")])
    commands: list[str] = []
    original = runtime.execute

    def spy(request: Any) -> Any:
        commands.append(request.command)
        return original(request)

    monkeypatch.setattr(runtime, "execute", spy)
    with tools.turn() as turn:
        turn.dispatch("skill", {"command": "local"})
        before = len(commands)
    assert len(commands) == before
    assert not any(TURN_COPIES_DIRECTORY in command for command in commands)
